"""An artefact's tensors matched to its Keras source's layers by the graph, on
small graphs written here: no tensor has a name, so only the graph can say which is which;
what the graph does not say is unmatched, never guessed. (The demo's real artefacts are
matched in tests/engine/test_artefact_source.py.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from segdiff_gui.core.errors import InputError
from segdiff_gui.engine.graph_matching import GraphMatch, SourceLayer, match_by_graph
from segdiff_gui.engine.tensor_matching import RuntimeTensor
from segdiff_gui.io.artefacts import ArtefactGraph, GraphOp, GraphTensor, artefact_graph
from tests.hostile.artefact_files import CYCLE, tflite_bytes


def _graph(
    ops: list[tuple[str, list[str], list[str], str]], shapes: dict[str, tuple]
) -> ArtefactGraph:
    """Operators ``(type, inputs, outputs, fused)`` in order; tensor ``"in"`` is the input,
    the last operator's output the graph's; every tensor nameless, int8 with a scale."""
    tensors = {
        key: GraphTensor(key, "", shape, "int8", 0.01, -128) for key, shape in shapes.items()
    }
    made = [
        GraphOp(str(index), kind, tuple(inputs), tuple(outputs), fused)
        for index, (kind, inputs, outputs, fused) in enumerate(ops)
    ]
    return ArtefactGraph("tflite", tuple(made), tensors, ("in",), made[-1].outputs)


def _layer(name, kind, shape, inputs, activation=""):
    return SourceLayer(name, kind, (1, *shape), tuple(inputs), activation)


def test_a_u_net_s_layers_are_matched_by_the_graph_alone():
    # conv (relu fused) → conv → pool → upsampling written as reshapes and tiles → concat
    # with the second conv → conv → its sigmoid as an operator of its own → dequantize.
    shapes = {
        "in": (1, 8, 8, 1), "q": (1, 8, 8, 1), "c1": (1, 8, 8, 4), "c2": (1, 8, 8, 4),
        "p": (1, 4, 4, 4), "r1": (1, 4, 1, 4, 4), "t1": (1, 4, 2, 4, 4), "r2": (1, 8, 4, 4),
        "t2": (1, 8, 4, 2, 4), "up": (1, 8, 8, 4), "cat": (1, 8, 8, 8), "c3": (1, 8, 8, 1),
        "sig": (1, 8, 8, 1), "out": (1, 8, 8, 1),
    }  # fmt: skip
    graph = _graph(
        [
            ("QUANTIZE", ["in"], ["q"], ""),
            ("CONV_2D", ["q"], ["c1"], "RELU"),
            ("CONV_2D", ["c1"], ["c2"], "RELU"),
            ("MAX_POOL_2D", ["c2"], ["p"], ""),
            ("RESHAPE", ["p"], ["r1"], ""),
            ("TILE", ["r1"], ["t1"], ""),
            ("RESHAPE", ["t1"], ["r2"], ""),
            ("TILE", ["r2"], ["t2"], ""),
            ("RESHAPE", ["t2"], ["up"], ""),
            ("CONCATENATION", ["up", "c2"], ["cat"], ""),
            ("CONV_2D", ["cat"], ["c3"], ""),
            ("LOGISTIC", ["c3"], ["sig"], ""),
            ("DEQUANTIZE", ["sig"], ["out"], ""),
        ],
        shapes,
    )
    layers = [
        _layer("enc_a", "Conv2D", (8, 8, 4), [""], "relu"),
        _layer("enc_b", "Conv2D", (8, 8, 4), ["enc_a"], "relu"),
        _layer("pool", "MaxPooling2D", (4, 4, 4), ["enc_b"]),
        _layer("up", "UpSampling2D", (8, 8, 4), ["pool"]),
        _layer("skip", "Concatenate", (8, 8, 8), ["up", "enc_b"]),
        _layer("mask", "Conv2D", (8, 8, 1), ["skip"], "sigmoid"),
    ]
    found = match_by_graph(layers, graph)
    assert found.unmatched == {}
    firsts = {name: keys[0] for name, keys in found.tensors.items()}
    assert firsts == {
        "enc_a": "c1", "enc_b": "c2", "pool": "p", "up": "up", "skip": "cat", "mask": "sig",
    }  # fmt: skip
    # Each layer on the node Model Explorer numbers it by (the operator's index).
    assert found.nodes["enc_a"] == "1" and found.nodes["skip"] == "9"
    assert found.nodes["mask"] == "10"  # the convolution whose sigmoid follows it
    # The concatenation's inputs in its own order: the other way round is another layer.
    swapped = [*layers[:4], _layer("skip", "Concatenate", (8, 8, 8), ["enc_b", "up"])]
    assert "skip" in match_by_graph(swapped, graph).unmatched


def test_an_activation_fused_into_the_convolution_before_it_takes_its_tensor():
    shapes = {"in": (1, 8, 8, 1), "c": (1, 8, 8, 4)}
    graph = _graph([("CONV_2D", ["in"], ["c"], "RELU")], shapes)
    layers = [
        _layer("conv", "Conv2D", (8, 8, 4), [""]),  # linear: its own output exists nowhere
        _layer("relu", "ReLU", (8, 8, 4), ["conv"], "relu"),
    ]
    found = match_by_graph(layers, graph)
    assert found.tensors == {"relu": ("c",)}
    assert "fused into it" in found.unmatched["conv"]
    # Without the ReLU layer, the convolution's tensor is after an activation it lacks.
    alone = match_by_graph(layers[:1], graph)
    assert alone.tensors == {} and "applies relu" in alone.unmatched["conv"]


def test_a_batch_normalisation_is_folded_only_where_the_graph_has_no_scale_of_its_own():
    shapes = {"in": (1, 8, 8, 1), "c": (1, 8, 8, 4), "m": (1, 8, 8, 4), "a": (1, 8, 8, 4)}
    layers = [
        _layer("conv", "Conv2D", (8, 8, 4), [""]),
        _layer("norm", "BatchNormalization", (8, 8, 4), ["conv"]),
    ]
    folded = match_by_graph(layers, _graph([("CONV_2D", ["in"], ["c"], "")], shapes))
    assert folded.tensors == {"norm": ("c",)} and "conv" in folded.unmatched
    # A scale and a shift of its own after the convolution: not said to be folded.
    graph = _graph(
        [("CONV_2D", ["in"], ["c"], ""), ("MUL", ["c"], ["m"], ""), ("ADD", ["m"], ["a"], "")],
        shapes,
    )
    kept = match_by_graph(layers, graph)
    assert kept.tensors == {"conv": ("c",)} and "norm" in kept.unmatched


def test_two_operators_either_layer_could_be_are_never_guessed():
    # Two convolutions of one shape read the same tensor: which is which, the graph cannot say.
    shapes = {"in": (1, 8, 8, 1), "a": (1, 8, 8, 4), "b": (1, 8, 8, 4), "s": (1, 8, 8, 4)}
    graph = _graph(
        [
            ("CONV_2D", ["in"], ["a"], ""),
            ("CONV_2D", ["in"], ["b"], ""),
            ("ADD", ["a", "b"], ["s"], ""),
        ],
        shapes,
    )
    layers = [
        _layer("left", "Conv2D", (8, 8, 4), [""]),
        _layer("right", "Conv2D", (8, 8, 4), [""]),
        _layer("sum", "Add", (8, 8, 4), ["left", "right"]),
    ]
    found = match_by_graph(layers, graph)
    assert found.tensors == {}
    assert "more than one operator" in found.unmatched["left"]
    assert "its input has no tensor" in found.unmatched["sum"]


def test_a_dropout_is_its_input_and_an_unknown_layer_stops_the_matching_after_it():
    shapes = {"in": (1, 8, 8, 1), "c": (1, 8, 8, 4), "x": (1, 8, 8, 4), "d": (1, 8, 8, 4)}
    graph = _graph(
        [
            ("CONV_2D", ["in"], ["c"], "RELU"),
            ("CUSTOM_THING", ["c"], ["x"], ""),
            ("CONV_2D", ["x"], ["d"], "RELU"),
        ],
        shapes,
    )
    layers = [
        _layer("conv", "Conv2D", (8, 8, 4), [""], "relu"),
        _layer("drop", "Dropout", (8, 8, 4), ["conv"]),
        _layer("mine", "MyLayer", (8, 8, 4), ["drop"]),
        _layer("after", "Conv2D", (8, 8, 4), ["mine"], "relu"),
    ]
    found = match_by_graph(layers, graph)
    assert found.tensors == {"conv": ("c",), "drop": ("c",)}
    assert set(found.unmatched) == {"mine", "after"}


def _square_onnx(tmp_path: Path, reshaped: bool = False, output: str = "out") -> ArtefactGraph:
    """A tf2onnx-like graph of a 16×16×16 convolution (its NCHW shape is its NHWC shape):
    the image transposed channels-first, Conv, Relu, a 1×1 Conv, Sigmoid, transposed back;
    ``reshaped``: the Relu's output goes through a Reshape to its own shape first;
    ``output="sig"``: the Sigmoid's NCHW tensor is the graph's output, not transposed."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array(rng.standard_normal((16, 1, 3, 3)).astype(np.float32), "w1"),
        numpy_helper.from_array(rng.standard_normal((1, 16, 1, 1)).astype(np.float32), "w2"),
    ]
    relu = "relu"
    nodes = [
        helper.make_node("Transpose", ["image"], ["nchw"], perm=[0, 3, 1, 2]),
        helper.make_node("Conv", ["nchw", "w1"], ["conv"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv"], ["relu"]),
    ]
    if reshaped:
        weights.append(numpy_helper.from_array(np.array([1, 16, 16, 16], np.int64), "same"))
        nodes.append(helper.make_node("Reshape", ["relu", "same"], ["kept"]))
        relu = "kept"
    nodes += [
        helper.make_node("Conv", [relu, "w2"], ["mask"]),
        helper.make_node("Sigmoid", ["mask"], ["sig"]),
    ]
    if output == "out":
        nodes.append(helper.make_node("Transpose", ["sig"], ["out"], perm=[0, 2, 3, 1]))
    shape = [1, 16, 16, 1] if output == "out" else [1, 1, 16, 16]
    graph = helper.make_graph(
        nodes,
        "sq",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 16, 16, 1])],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, shape)],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "sq.onnx"
    path.write_bytes(model.SerializeToString())
    return artefact_graph(path, path.read_bytes())


_SQUARE_LAYERS = [
    _layer("sq", "Conv2D", (16, 16, 16), [""], "relu"),
    _layer("mask", "Conv2D", (16, 16, 1), ["sq"], "sigmoid"),
]


def _as_run(key: str, values: np.ndarray) -> RuntimeTensor:
    return RuntimeTensor(key, values.shape, "float32", lambda: values, key=key)


def test_a_square_onnx_layer_is_laid_out_as_its_graph_says_never_by_its_shape(tmp_path):
    # H == W == C: the Conv's NCHW tensor has the layer's NHWC shape; ONNX's Conv is
    # channels-first, so its values are turned back, not compared as they lie.
    graph = _square_onnx(tmp_path)
    found = match_by_graph(_SQUARE_LAYERS, graph)
    assert found.tensors["sq"][0] == "relu" and found.layouts["relu"] == "first"
    keras = np.random.default_rng(1).standard_normal((1, 16, 16, 16)).astype(np.float32)
    as_run = {"relu": _as_run("relu", np.transpose(keras, (0, 3, 1, 2)))}
    fitting = found.laid_out("sq", keras.shape, as_run)
    assert not isinstance(fitting, str)
    tensor, layout = fitting
    np.testing.assert_array_equal(np.transpose(tensor.read(), layout), keras)


def test_a_square_tensor_whose_layout_the_graph_does_not_tell_is_unmatched(tmp_path):
    # Through a Reshape the layout is untold: the shape cannot tell it, so it is not guessed.
    graph = _square_onnx(tmp_path, reshaped=True)
    found = match_by_graph(_SQUARE_LAYERS, graph)
    # The Relu's tensor and the Reshape's of it (where the runtime returns only that one).
    assert found.tensors["sq"] == ("relu", "kept") and "kept" not in found.layouts
    values = np.zeros((1, 16, 16, 16), np.float32)
    assert found.laid_out("sq", values.shape, {"kept": _as_run("kept", values)}) == (
        "its layout cannot be told from its shape"
    )
    # A shape that differs between the layouts still tells it.
    wide = np.zeros((1, 8, 16, 16), np.float32)  # N, C, H, W of a 16×16×8 layer
    laid = GraphMatch(tensors={"c": ("k",)}).laid_out(
        "c", (1, 16, 16, 8), {"k": _as_run("k", wide)}
    )
    assert not isinstance(laid, str) and laid[1] == (0, 2, 3, 1)


@pytest.mark.timeout(30)
def test_a_cyclic_graph_is_refused_when_read_and_the_walks_end_on_one_regardless(tmp_path):
    # LiteRT loads and invokes CAST 3 → 2, CAST 2 → 3, LOGISTIC 3 → 1; walking it back from
    # tensor 3 through its casts never ended.
    path = tmp_path / "cycle.tflite"
    path.write_bytes(tflite_bytes(operators=CYCLE))
    with pytest.raises(InputError) as raised:
        artefact_graph(path, path.read_bytes())
    line = str(raised.value)
    assert line.startswith(str(path)) and "\n" not in line
    assert "has a cycle in its graph: its operator 0 reads a tensor no operator before" in line
    shapes = dict.fromkeys(("in", "out", "a", "b"), (1, 8, 8, 1))
    cyclic = _graph(
        [("CAST", ["b"], ["a"], ""), ("CAST", ["a"], ["b"], ""), ("LOGISTIC", ["b"], ["out"], "")],
        shapes,
    )
    layers = [_layer("foreground", "Activation", (8, 8, 1), [""], "sigmoid")]
    found = match_by_graph(layers, cyclic)
    assert found.tensors == {} and list(found.unmatched) == ["foreground"]


def test_onnx_runtime_returns_a_layer_s_tensor_that_is_the_graph_s_output(tmp_path):
    # The 1×1 convolution's Sigmoid is the graph's output "sig" (no transpose after it here):
    # ONNX Runtime's intermediates return it like any tensor, so the layer it ends is matched.
    from segdiff_gui.core.config import RunConfig
    from segdiff_gui.engine.backends.onnxruntime import OnnxRuntimeBackend

    path = tmp_path / "sq.onnx"
    graph = _square_onnx(tmp_path, output="sig")
    found = match_by_graph(_SQUARE_LAYERS, graph)
    assert found.tensors["mask"] == ("sig",) and found.layouts["sig"] == "first"
    image = np.random.default_rng(2).random((1, 16, 16, 1), np.float32)
    wanted = found.tensor_keys()
    outputs, tensors = OnnxRuntimeBackend().intermediates(
        path.read_bytes(), image, RunConfig(runtime="onnxruntime"), lambda order: wanted & {*order}
    )
    by_key = {tensor.key: tensor for tensor in tensors}
    assert set(by_key) == found.tensor_keys() == {"relu", "sig"}
    laid = found.laid_out("mask", (1, 16, 16, 1), by_key)
    assert not isinstance(laid, str)
    tensor, layout = laid
    assert layout == (0, 2, 3, 1)  # the graph's output is the Sigmoid's NCHW tensor
    np.testing.assert_array_equal(tensor.read(), outputs[0])
