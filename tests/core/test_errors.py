"""One telling line of an exception, whatever TensorFlow or Keras wrapped it in."""

from segdiff_gui.core.errors import first_line

# What Keras 3.x raised loading a model whose Lambda layer cannot be rebuilt (recorded from a
# real load_model call in the trial's set-up; the bold markers are Keras's own).
KERAS_LAMBDA = (
    "Exception encountered when calling Lambda.call().\n\n\x1b[1mWe could not automatically "
    "infer the shape of the Lambda's output. Please specify the `output_shape` argument for "
    "this Lambda layer.\x1b[0m\n\nArguments received by Lambda.call():\n  • args=('<KerasTensor "
    "shape=(None, 32, 32, 2), dtype=float32>',)\n  • kwargs={'mask': 'None'}"
)


def test_a_keras_layer_failure_keeps_its_reason_not_the_wrapper():
    line = first_line(NotImplementedError(KERAS_LAMBDA))
    assert line == (
        "We could not automatically infer the shape of the Lambda's output. Please specify the "
        "`output_shape` argument for this Lambda layer. (in Lambda.call())"
    )


def test_tensorflow_traced_errors_keep_their_last_line_and_plain_ones_their_first():
    assert first_line(ValueError("in user code:\n\n  File x\n  Boom: shapes differ")) == (
        "Boom: shapes differ"
    )
    assert first_line(ValueError("plain\nmore")) == "plain"
    assert first_line(ValueError("")) == "ValueError"
