"""A refused conversion said in one line with its real cause, read from the converters' own
text: here the text LiteRT's converter (TensorFlow 2.21) gave for a tf-keras U-Net saved with
input ``(None, None, 3)`` when it was converted with its free size (what segdiff did before
it fixed the size), and for an op LiteRT lacks. (No converter is imported: the test process
stays free of TensorFlow.)"""

from pathlib import Path

from segdiff_gui.engine.converter_errors import conversion_failure

MODEL = Path("unet.h5")

# Kept as the converter wrote them (the location line, the summary and its details).
FREE_SIZE_UNET = """\
Could not translate MLIR to FlatBuffer.<unknown>:0: error: loc(callsite(fused["Conv2D:", \
"model_1/conv2d_2_1/convolution@__inference_function_366"] at callsite(fused[\
"StatefulPartitionedCall:", "StatefulPartitionedCall@__inference_signature_wrapper_401"] at \
fused["StatefulPartitionedCall:", "StatefulPartitionedCall_1"]))): 'tf.Conv2D' op is neither a \
custom op nor a flex op
<unknown>:0: error: failed while converting: 'main':
Some ops are not supported by the native TFLite runtime, you can enable TF kernels fallback \
using TF Select. See instructions: https://www.tensorflow.org/lite/guide/ops_select
TF Select ops: Conv2D
Details:
\ttf.Conv2D(tensor<?x?x?x?xf32>, tensor<1x1x12x1xf32>) -> (tensor<?x?x?x1xf32>) : \
{data_format = "NHWC", device = "", dilations = [1, 1, 1, 1], explicit_paddings = [], \
padding = "VALID", strides = [1, 1, 1, 1], use_cudnn_on_gpu = true}
"""

ERFINV = """\
Could not translate MLIR to FlatBuffer.<unknown>:0: error: loc(callsite(fused["Erfinv:", \
"functional_10_1/erfinv/Erfinv@__inference_function_75"] at callsite(fused[\
"StatefulPartitionedCall:", "StatefulPartitionedCall@__inference_signature_wrapper_94"] at \
fused["StatefulPartitionedCall:", "StatefulPartitionedCall_1"]))): 'tf.Erfinv' op is neither \
a custom op nor a flex op
<unknown>:0: error: failed while converting: 'main':
Some ops in the model are custom ops, See instructions to implement custom ops: \
https://www.tensorflow.org/lite/guide/ops_custom
Custom ops: Erfinv
Details:
\ttf.Erfinv(tensor<?x32x32x1xf32>) -> (tensor<?x32x32x1xf32>) : {device = ""}
"""


def test_an_op_given_a_tensor_of_unknown_shape_is_said_so_not_called_unsupported():
    error = conversion_failure(MODEL, "litert", FREE_SIZE_UNET)
    said = str(error)
    assert said == (
        "unet.h5: cannot be converted to LiteRT: op Conv2D (layer conv2d_2) is given an input "
        "of unknown shape (?×?×?×?), and LiteRT's builtin Conv2D needs it known (ai-edge-litert "
        "runs no Select TensorFlow ops, which would take it)"
    )
    assert "no LiteRT builtin kernel" not in said


def test_an_op_litert_lacks_is_still_named_as_lacking_a_kernel_whatever_its_batch():
    # The batch is free (?) as in every conversion: not the cause.
    said = str(conversion_failure(MODEL, "litert", ERFINV))
    assert said == (
        "unet.h5: cannot be converted to LiteRT: op Erfinv (layer erfinv) has no LiteRT builtin "
        "kernel, and ai-edge-litert runs no Select TensorFlow ops"
    )
