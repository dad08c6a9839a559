"""Tiny artefacts written without TensorFlow, each a logistic of an 8×8 grey image,
and the hostile variants of each: a ``.tflite`` built with LiteRT's own flatbuffer schema, an
``.onnx`` with the ``onnx`` package's helpers, an OpenVINO IR written as its ``.xml`` and
``.bin``. The front-end tests open the good ones (their children are the fake engine's)."""

from __future__ import annotations

from pathlib import Path

import flatbuffers
import numpy as np

LOGISTIC = 14  # LiteRT's BuiltinOperator.LOGISTIC
CUSTOM = 32  # BuiltinOperator.CUSTOM
CAST = 53  # BuiltinOperator.CAST
# A graph whose operators compute a tensor from itself (LiteRT loads and invokes it): CAST
# 3 → 2, CAST 2 → 3, LOGISTIC 3 → 1, operators as (code, inputs, outputs) of tensors 0 … 3.
CYCLE = ((CAST, (3,), (2,)), (CAST, (2,), (3,)), (LOGISTIC, (3,), (1,)))


def tflite_bytes(
    custom: str = "",
    buffer_at: tuple[int, int] | None = None,
    batch: int = -1,
    operators: tuple[tuple[int, tuple[int, ...], tuple[int, ...]], ...] = (),
) -> bytes:
    """A ``.tflite`` whose one operator is a logistic (``custom``: a custom op of that name);
    ``buffer_at``: a buffer declared at (offset, size), as a model of over 2 GB keeps its
    weights after the flatbuffer; ``batch``: its input's batch (-1: free); ``operators``:
    these instead, as (builtin code, input tensors, output tensors), the input tensor 0 and
    the output 1 (``CYCLE``)."""
    from ai_edge_litert import schema_py_generated as s

    code = CUSTOM if custom else LOGISTIC
    operators = operators or ((code, (0,), (1,)),)
    codes = list(dict.fromkeys(op[0] for op in operators))
    count = max(max(op[1] + op[2]) for op in operators) + 1
    builder = flatbuffers.Builder(1024)
    names = [
        builder.CreateString(["input", "output"][i] if i < 2 else f"t{i}") for i in range(count)
    ]
    custom_name = builder.CreateString(custom) if custom else None
    tensors = []
    for index, name in enumerate(names):
        shape = builder.CreateNumpyVector(np.array([max(batch, 1), 8, 8, 1], np.int32))
        signature = builder.CreateNumpyVector(np.array([batch, 8, 8, 1], np.int32))
        s.TensorStart(builder)
        s.TensorAddShape(builder, shape)
        s.TensorAddShapeSignature(builder, signature)
        s.TensorAddType(builder, s.TensorType.FLOAT32)
        s.TensorAddBuffer(builder, index + 1)
        s.TensorAddName(builder, name)
        tensors.append(s.TensorEnd(builder))
    s.SubGraphStartTensorsVector(builder, len(tensors))
    for tensor in reversed(tensors):
        builder.PrependUOffsetTRelative(tensor)
    tensor_vector = builder.EndVector()
    inputs = builder.CreateNumpyVector(np.array([0], np.int32))
    outputs = builder.CreateNumpyVector(np.array([1], np.int32))
    made = []
    for op_code, op_inputs, op_outputs in operators:
        read = builder.CreateNumpyVector(np.array(op_inputs, np.int32))
        written = builder.CreateNumpyVector(np.array(op_outputs, np.int32))
        s.OperatorStart(builder)
        s.OperatorAddOpcodeIndex(builder, codes.index(op_code))
        s.OperatorAddInputs(builder, read)
        s.OperatorAddOutputs(builder, written)
        made.append(s.OperatorEnd(builder))
    s.SubGraphStartOperatorsVector(builder, len(made))
    for operator in reversed(made):
        builder.PrependUOffsetTRelative(operator)
    operators_vector = builder.EndVector()
    s.SubGraphStart(builder)
    s.SubGraphAddTensors(builder, tensor_vector)
    s.SubGraphAddInputs(builder, inputs)
    s.SubGraphAddOutputs(builder, outputs)
    s.SubGraphAddOperators(builder, operators_vector)
    subgraph = s.SubGraphEnd(builder)
    opcodes_made = []
    for op_code in codes:
        s.OperatorCodeStart(builder)
        s.OperatorCodeAddBuiltinCode(builder, op_code)
        s.OperatorCodeAddDeprecatedBuiltinCode(builder, op_code)
        if custom_name is not None and op_code == CUSTOM:
            s.OperatorCodeAddCustomCode(builder, custom_name)
        s.OperatorCodeAddVersion(builder, 1)
        opcodes_made.append(s.OperatorCodeEnd(builder))
    buffers = []
    for index in range(count + 1):
        s.BufferStart(builder)
        if index == 2 and buffer_at is not None:
            s.BufferAddOffset(builder, buffer_at[0])
            s.BufferAddSize(builder, buffer_at[1])
        buffers.append(s.BufferEnd(builder))
    s.ModelStartBuffersVector(builder, len(buffers))
    for buffer in reversed(buffers):
        builder.PrependUOffsetTRelative(buffer)
    buffer_vector = builder.EndVector()
    s.ModelStartSubgraphsVector(builder, 1)
    builder.PrependUOffsetTRelative(subgraph)
    subgraphs = builder.EndVector()
    s.ModelStartOperatorCodesVector(builder, len(opcodes_made))
    for opcode in reversed(opcodes_made):
        builder.PrependUOffsetTRelative(opcode)
    opcodes = builder.EndVector()
    s.ModelStart(builder)
    s.ModelAddVersion(builder, 3)
    s.ModelAddOperatorCodes(builder, opcodes)
    s.ModelAddSubgraphs(builder, subgraphs)
    s.ModelAddBuffers(builder, buffer_vector)
    builder.Finish(s.ModelEnd(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def onnx_bytes(domain: str = "", external: str = "") -> bytes:
    """An ``.onnx`` whose one node is a sigmoid (``domain``: of that operator domain, as a
    custom op library's); ``external``: a weight kept as external data at that location."""
    import onnx
    from onnx import TensorProto, helper

    image = helper.make_tensor_value_info("image", TensorProto.FLOAT, [None, 8, 8, 1])
    out = helper.make_tensor_value_info("map", TensorProto.FLOAT, [None, 8, 8, 1])
    nodes = [helper.make_node("Sigmoid", ["image"], ["raw"], domain=domain)]
    bias = helper.make_tensor("bias", TensorProto.FLOAT, [1], [0.0])
    if external:
        bias.ClearField("float_data")
        bias.data_location = TensorProto.EXTERNAL
        entry = bias.external_data.add()
        entry.key, entry.value = "location", external
    nodes.append(helper.make_node("Add", ["raw", "bias"], ["map"]))
    graph = helper.make_graph(nodes, "tiny", [image], [out], initializer=[bias])
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    return onnx.helper.make_model(graph, opset_imports=opsets).SerializeToString()


def ir_files(folder: Path, name: str = "model", bin_bytes: int | None = None, op: str = "opset1"):
    """An OpenVINO IR (``name.xml`` and ``name.bin``): input, plus a constant of four bytes,
    a sigmoid; ``bin_bytes``: a ``.bin`` of that many bytes instead of the four declared
    (None: none written); ``op``: the sigmoid's operation set (an extension's name)."""
    xml = f"""<?xml version="1.0"?>
<net name="tiny" version="11">
  <layers>
    <layer id="0" name="image" type="Parameter" version="opset1">
      <data shape="?,8,8,1" element_type="f32"/>
      <output><port id="0" precision="FP32"><dim>-1</dim><dim>8</dim><dim>8</dim><dim>1</dim></port></output>
    </layer>
    <layer id="1" name="bias" type="Const" version="opset1">
      <data element_type="f32" shape="1" offset="0" size="4"/>
      <output><port id="0" precision="FP32"><dim>1</dim></port></output>
    </layer>
    <layer id="2" name="add" type="Add" version="opset1">
      <input><port id="0"><dim>-1</dim><dim>8</dim><dim>8</dim><dim>1</dim></port><port id="1"><dim>1</dim></port></input>
      <output><port id="2" precision="FP32"><dim>-1</dim><dim>8</dim><dim>8</dim><dim>1</dim></port></output>
    </layer>
    <layer id="3" name="sigmoid" type="Sigmoid" version="{op}">
      <input><port id="0"><dim>-1</dim><dim>8</dim><dim>8</dim><dim>1</dim></port></input>
      <output><port id="1" precision="FP32"><dim>-1</dim><dim>8</dim><dim>8</dim><dim>1</dim></port></output>
    </layer>
    <layer id="4" name="map" type="Result" version="opset1">
      <input><port id="0"><dim>-1</dim><dim>8</dim><dim>8</dim><dim>1</dim></port></input>
    </layer>
  </layers>
  <edges>
    <edge from-layer="0" from-port="0" to-layer="2" to-port="0"/>
    <edge from-layer="1" from-port="0" to-layer="2" to-port="1"/>
    <edge from-layer="2" from-port="2" to-layer="3" to-port="0"/>
    <edge from-layer="3" from-port="1" to-layer="4" to-port="0"/>
  </edges>
</net>
"""  # noqa: E501 - an IR's lines as OpenVINO writes them
    path = folder / f"{name}.xml"
    path.write_text(xml)
    size = 4 if bin_bytes is None else bin_bytes
    (folder / f"{name}.bin").write_bytes(
        np.zeros(size // 4, np.float32).tobytes() + b"\0" * (size % 4)
    )
    return path
