"""Matching a converted model's tensors to the Keras layers they came from, by the names the
converters give them: nested scopes, the ``_1`` tracing adds, fused chains, ONNX's
channels-first layout, and what cannot be matched. (No runtime is imported: the test process
stays free of TensorFlow, which other tests of this worker check.)"""

import numpy as np

from segdiff_gui.engine.tensor_matching import (
    ExpectedLayer,
    LayerScopes,
    RuntimeTensor,
    as_layer,
    last_of_each_layer,
    match_layers,
)

FULL, HALF = (1, 32, 32, 8), (1, 16, 16, 8)
# What LiteRT (TensorFlow 2.21, Keras 3.15) names the tensors of tests/fixtures_models.py's
# default_names.keras, in execution order, with their shapes: twelve convolutions that keep
# Keras's default names.
DEFAULT_NAMES_LITERT = [
    ("functional_1/conv2d_1/convolution1", FULL),  # the layer conv2d (linear)
    ("functional_1/activation_1/Relu;functional_1/conv2d_1_2/convolution", FULL),  # + conv2d_1
    ("functional_1/max_pooling2d_1/MaxPool2d", HALF),
    *(
        (f"functional_1/conv2d_{i}_1/Relu;functional_1/conv2d_{i}_1/convolution", HALF)
        for i in range(2, 10)
    ),
    ("functional_1/up_sampling2d_1/Repeat/Tile", (1, 16, 2, 16, 8)),
    ("functional_1/up_sampling2d_1/Repeat_1/Reshape_1", FULL),
    ("functional_1/concatenate_1/concat", (1, 32, 32, 16)),
    ("functional_1/conv2d_10_1/Relu;functional_1/conv2d_10_1/convolution", FULL),
    ("functional_1/conv2d_11_1/convolution2", (1, 32, 32, 1)),
    ("StatefulPartitionedCall_1:0", (1, 32, 32, 1)),
]
# And ONNX (tf2onnx 1.17), its float node outputs that name a layer's scope.
DEFAULT_NAMES_ONNX = [
    "functional_1/conv2d_1/convolution:0",
    "functional_1/conv2d_1_2/convolution:0",
    "functional_1/activation_1/Relu:0",
    "functional_1/max_pooling2d_1/MaxPool2d:0",
    *(f"functional_1/conv2d_{i}_1/{op}:0" for i in range(2, 10) for op in ("convolution", "Relu")),
    "functional_1/up_sampling2d_1/Repeat_1/Reshape_1:0",
    "Transpose__92:0",
    "functional_1/concatenate_1/concat:0",
    "functional_1/conv2d_10_1/convolution:0",
    "functional_1/conv2d_10_1/Relu:0",
    "functional_1/conv2d_11_1/convolution:0",
    "functional_1/conv2d_11_1/Sigmoid:0",
    "Identity:0",
]


def _default_names_layers() -> list[ExpectedLayer]:
    return [
        ExpectedLayer("conv2d", "Conv2D", FULL),
        ExpectedLayer("conv2d_1", "Conv2D", FULL),
        ExpectedLayer("activation", "Activation", FULL),
        ExpectedLayer("max_pooling2d", "MaxPooling2D", HALF),
        *(ExpectedLayer(f"conv2d_{i}", "Conv2D", HALF) for i in range(2, 10)),
        ExpectedLayer("up_sampling2d", "UpSampling2D", FULL),
        ExpectedLayer("concatenate", "Concatenate", (1, 32, 32, 16)),
        ExpectedLayer("conv2d_10", "Conv2D", FULL),
        ExpectedLayer("conv2d_11", "Conv2D", (1, 32, 32, 1)),
    ]


def _tensor(name, shape):
    return RuntimeTensor(name, shape, "float32", lambda: np.zeros(shape, np.float32))


def _layers(expected, names):
    scopes = LayerScopes(expected, names)
    return {name: scopes.layer_of(name) for name in names}


def test_a_tensor_name_gives_the_layer_whose_scope_made_it():
    expected = [
        ExpectedLayer(name, "Conv2D", (1, 8, 8, 4))
        for name in ("enc1", "enc1_1", "encoder/conv", "encoder/relu", "mask")
    ]
    names = [
        "unet_1/enc1_1/Relu",  # enc1's scope, made unique: the name of enc1_1, not its scope
        "unet_1/enc1_1_1/Relu;unet_1/enc1_1_1/BiasAdd",
        "unet_1/encoder_1/conv_1/Conv2D:0",
        "unet_1/encoder_1/relu_1/Relu:0",
        "Transpose__118:0",
        "unet_1/up2_1/Repeat/Tile",
        "unet_1/mask_1/Sigmoid",
    ]
    assert _layers(expected, names) == {
        names[0]: "enc1",
        names[1]: "enc1_1",
        names[2]: "encoder/conv",
        names[3]: "encoder/relu",
        names[4]: None,
        names[5]: None,  # no such layer
        names[6]: "mask",
    }


def test_default_names_are_matched_whole_scope_by_scope_never_by_the_longest_name():
    """With Keras's default names the first convolution runs in scope
    ``conv2d_1``, and ``conv2d_1`` (fused by LiteRT into the ReLU after it) has no tensor of
    its own: its row must not be the first convolution's output."""
    expected = _default_names_layers()
    matched, unmatched = match_layers(expected, [_tensor(*pair) for pair in DEFAULT_NAMES_LITERT])
    assert unmatched == ["conv2d_1"]  # fused: no tensor of its own
    assert matched["conv2d"][0].name == "functional_1/conv2d_1/convolution1"
    assert matched["activation"][0].name.startswith("functional_1/activation_1/Relu;")
    for i in (*range(2, 10), 10):
        assert matched[f"conv2d_{i}"][0].name.startswith(f"functional_1/conv2d_{i}_1/"), i
    assert matched["conv2d_11"][0].name == "functional_1/conv2d_11_1/convolution2"
    # ONNX keeps every layer's tensor: each is matched, to its own scope's last.
    chosen = last_of_each_layer(expected, DEFAULT_NAMES_ONNX)
    layers = _layers(expected, DEFAULT_NAMES_ONNX)
    assert {layers[name] for name in chosen} == {layer.name for layer in expected}
    assert layers["functional_1/conv2d_1/convolution:0"] == "conv2d"
    assert layers["functional_1/conv2d_1_2/convolution:0"] == "conv2d_1"


def test_a_layer_takes_the_last_tensor_of_its_shape_and_onnx_layouts_are_turned_back():
    expected = [
        ExpectedLayer("encoder/conv", "Conv2D", (1, 8, 8, 4)),
        ExpectedLayer("encoder/relu", "Activation", (1, 8, 8, 4)),
        ExpectedLayer("mask", "Conv2D", (1, 8, 8, 1)),
    ]
    tensors = [
        _tensor("m_1/encoder_1/relu_1/Relu:0", (1, 4, 8, 8)),  # channels first (ONNX)
        _tensor("m_1/mask_1/BiasAdd:0", (1, 8, 8, 1)),  # the logits: the sigmoid is the output's
    ]
    finals = [_tensor("mask", (1, 8, 8, 1))]
    matched, unmatched = match_layers(expected, tensors, finals)
    assert unmatched == ["encoder/conv"]  # fused: no tensor of its own
    tensor, layout = matched["encoder/relu"]
    assert layout == (0, 2, 3, 1) and tensor.shape == (1, 4, 8, 8)
    assert matched["mask"][0] is finals[0]
    names = ["m_1/encoder_1/conv_1/Conv:0", "m_1/encoder_1/relu_1/Relu:0", "Transpose:0"]
    assert last_of_each_layer(expected, names) == {names[0], names[1]}


def test_a_shared_layers_calls_and_a_tensor_of_another_shape_stay_unmatched():
    expected = [
        ExpectedLayer("conv", "Conv2D", (1, 8, 8, 4)),
        ExpectedLayer("conv#2", "Conv2D", (1, 8, 8, 4)),
        ExpectedLayer("pool", "MaxPooling2D", (1, 4, 4, 4)),
    ]
    tensors = [
        _tensor("m_1/conv_1/Relu", (1, 8, 8, 4)),
        _tensor("m_1/pool_1/MaxPool", (1, 2, 2, 4)),
    ]
    matched, unmatched = match_layers(expected, tensors)
    assert matched == {} and unmatched == ["conv", "conv#2", "pool"]


def test_a_layer_traced_late_can_run_in_the_scope_named_after_a_later_layer():
    """Real LiteRT names of convolutions made as conv2d … conv2d_11 and called from conv2d_11
    down to conv2d_1, then conv2d, a concatenation and conv2d_12: when conv2d is traced,
    conv2d_1 … conv2d_11 are taken, so it runs in scope conv2d_12, the last layer's name."""
    shape = (1, 16, 16, 4)
    expected = [
        *(ExpectedLayer(f"conv2d_{i}", "Conv2D", shape) for i in range(11, 0, -1)),
        ExpectedLayer("conv2d", "Conv2D", shape),
        ExpectedLayer("concatenate", "Concatenate", (1, 16, 16, 8)),
        ExpectedLayer("conv2d_12", "Conv2D", (1, 16, 16, 1)),
    ]
    names = [
        *(
            f"functional_1/conv2d_{i}_1/Relu;functional_1/conv2d_{i}_1/convolution"
            for i in range(11, 0, -1)
        ),
        "functional_1/conv2d_12/Relu;functional_1/conv2d_12/convolution",
        "functional_1/concatenate_1/concat",
        "functional_1/conv2d_12_2/convolution2",
    ]
    layers = _layers(expected, names)
    assert [layers[name] for name in names] == [layer.name for layer in expected]


def test_a_scope_two_layers_could_have_made_follows_the_trace_or_stays_unmatched():
    shape = (1, 8, 8, 4)
    expected = [
        ExpectedLayer("conv", "Conv2D", shape),
        ExpectedLayer("activation", "Activation", shape),
        ExpectedLayer("activation_1", "Activation", shape),  # linear: no op of its own
    ]
    # This trace adds _N to every scope (conv_1 shows it): activation_1 is activation's.
    assert _layers(expected, ["m_1/conv_1/BiasAdd", "m_1/activation_1/Relu"]) == {
        "m_1/conv_1/BiasAdd": "conv",
        "m_1/activation_1/Relu": "activation",
    }
    # One that keeps a layer's name where it can: activation_1 is activation_1's.
    assert (
        _layers(expected, ["m/conv/BiasAdd", "m/activation_1/Relu"])["m/activation_1/Relu"]
        == "activation_1"
    )
    # Nothing tells which: neither layer is credited with it.
    assert _layers(expected, ["m_1/activation_1/Relu"]) == {"m_1/activation_1/Relu": None}


def test_a_shared_models_second_call_is_not_credited_to_its_first():
    shape = (1, 8, 8, 4)
    expected = [
        ExpectedLayer("encoder/conv", "Conv2D", shape),
        ExpectedLayer("encoder#2/conv", "Conv2D", shape),
        ExpectedLayer("head", "Conv2D", shape),
    ]
    names = ["m_1/encoder_1/conv_1/Relu", "m_1/encoder_2/conv_1/Relu", "m_1/head_1/Relu"]
    tensors = [_tensor(name, shape) for name in names]
    matched, unmatched = match_layers(expected, tensors)
    assert list(matched) == ["head"] and unmatched == ["encoder/conv", "encoder#2/conv"]


def test_a_square_onnx_tensor_is_laid_out_as_the_graph_tells_and_never_guessed():
    # H == W == C: a channels-first tensor has the layer's channels-last shape. Its layout is
    # the converted graph's word (engine/tensor_layouts.py); where it says none, unmatched.
    expected = [ExpectedLayer("sq", "Conv2D", (1, 16, 16, 16))]
    keras = np.arange(16**3, dtype=np.float32).reshape(1, 16, 16, 16)
    nchw = np.transpose(keras, (0, 3, 1, 2))
    tensor = RuntimeTensor("m_1/sq_1/Relu:0", nchw.shape, "float32", lambda: nchw, key="t")
    matched, unmatched = match_layers(expected, [tensor], layouts={"t": "first"})
    found, layout = matched["sq"]
    np.testing.assert_array_equal(np.transpose(found.read(), layout), keras)
    assert match_layers(expected, [tensor], layouts={}) == ({}, ["sq"])
    assert as_layer(nchw.shape, (1, 16, 16, 16)) == "its layout cannot be told from its shape"
    assert as_layer((1, 8, 16, 16), (1, 16, 16, 8)) == (0, 2, 3, 1)  # the shape tells it
