"""The only room that imports TensorFlow/Keras. It runs inside child processes started as
``python -m segdiff_gui.engine run|probe``; nothing else in segdiff imports it."""
