"""One telling line of an exception, whatever TensorFlow or Keras wrapped it in."""

from segdiff_gui.core.errors import first_line

# What Keras 3.x raised loading a model whose Lambda layer cannot be rebuilt (recorded from a
# real load_model call in a user's set-up; the bold markers are Keras's own).
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


def test_a_keras_failure_inside_tensorflows_traced_report_says_its_reason():
    """A TensorFlow run that failed in repair ended with "ValueError: • kwargs=<class
    'inspect._empty'>": the last line of Keras's argument list, not the reason above it."""
    traced = (
        'in user code:\n\n    File "/x/engine/models.py", line 60, in forward\n'
        "        return model(batch)\n\n"
        "    ValueError: Exception encountered when calling Functional.call().\n\n"
        "    \x1b[1m'conv' is not a valid scope name. A scope name has to match the following "
        "pattern: ^[A-Za-z0-9_.\\\\/>-]*$\x1b[0m\n\n"
        "    Arguments received by Functional.call():\n"
        "      • inputs=tf.Tensor(shape=(1, 16, 16, 1), dtype=float32)\n"
        "      • kwargs=<class 'inspect._empty'>\n"
    )
    line = first_line(ValueError(traced))
    assert line.startswith("'conv' is not a valid scope name") and "kwargs" not in line
    assert line.endswith("(in Functional.call())")
