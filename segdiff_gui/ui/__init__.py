"""The only room that imports PySide6, pyqtgraph and superqt: the segdiff-gui window."""
