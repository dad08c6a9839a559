"""Reading the user's own artefact (a ``.tflite``, an ``.onnx``, an OpenVINO IR) as untrusted
data, in the parent, before any child opens it: from the file's own bytes, bounded,
what it takes and gives (:class:`ArtefactFacts`), or one line naming the file for what would
make a runtime read outside it or run code.

- LiteRT: the flatbuffer is walked with LiteRT's own schema (``ai_edge_litert``'s generated
  reader, loaded from its file: the package itself would load LiteRT's native library): every
  vector's declared length bounded by the file, every buffer's declared offset and size within
  it, every operator's tensors and op code within their tables; a custom op (code segdiff
  never loads) is refused.
- ONNX: parsed by the ``onnx`` package from the bytes (no external data is loaded from bytes);
  a tensor kept as external data (a path) or an operator of a domain ONNX Runtime does not
  implement itself (a custom op library) is refused.
- OpenVINO IR: the ``.xml`` (bounded, no DTD) lists each constant's offset and size in the
  ``.bin`` beside it: that ``.bin`` must be a plain file (not a link) of exactly the size they
  declare; a layer of an operation set that is not OpenVINO's own (an extension: code) is
  refused.
"""

from __future__ import annotations

import importlib.util
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from segdiff_gui.core.artefacts import ArtefactFormat, artefact_files, artefact_format
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.limits import MAX_MODEL_BYTES, MAX_MODEL_CONFIG_BYTES
from segdiff_gui.core.runtimes import RUNTIMES
from segdiff_gui.io.untrusted import open_plain

__all__ = [
    "ArtefactFacts",
    "ArtefactGraph",
    "GraphOp",
    "GraphTensor",
    "TensorFacts",
    "artefact_graph",
    "artefact_facts_of",
    "read_artefact",
    "read_artefact_bytes",
    "read_weights",
    "self_contained",
]

Shape = tuple[int | None, ...]


@dataclass(frozen=True)
class TensorFacts:
    name: str
    shape: Shape  # None where free
    dtype: str  # numpy's name: "float32", "int8"


@dataclass(frozen=True)
class ArtefactFacts:
    """What an artefact takes and gives, read from its own bytes."""

    path: Path
    format: ArtefactFormat
    input: TensorFacts
    outputs: tuple[TensorFacts, ...]
    quantized: bool  # it holds int8 or float16 tensors (its kernels compute in them)

    @property
    def fixed_batch(self) -> int | None:
        """The batch its input fixes (a ``.tflite`` converted for one image fixes 1), or None."""
        return self.input.shape[0]

    @property
    def input_shape(self) -> tuple[int | None, int | None, int | None]:
        """Height, width and channels of its image input (None where free)."""
        _, height, width, channels = self.input.shape
        return height, width, channels


def _damaged(path: Path, what: str, why: str) -> InputError:
    return InputError(path, f"is not a readable {what}: {why}")


def _read_bounded(path: Path, limit: int, what: str) -> bytes:
    """A plain file's bytes, refused over ``limit`` before it is read."""
    with open_plain(path, what) as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > limit:
            raise InputError(
                path, f"holds {size / 2**20:,.0f} MB, over segdiff's bound of {limit >> 20} MB"
            )
        return handle.read(size + 1)[:limit]


# LiteRT --------------------------------------------------------------------------------------
_TFLITE_CUSTOM = 32  # BuiltinOperator.CUSTOM


def _tflite_schema(path: Path) -> Any:
    """LiteRT's generated flatbuffer reader (``schema_py_generated``, pure Python over the
    ``flatbuffers`` package), loaded from its file alone: importing ``ai_edge_litert`` would
    load LiteRT's native library into this process, which runs no runtime."""
    global _SCHEMA
    if _SCHEMA is None:
        package = importlib.util.find_spec("ai_edge_litert")  # finds it, imports nothing
        folders = list(package.submodule_search_locations or []) if package else []
        source = next((Path(f) / "schema_py_generated.py" for f in folders), None)
        if source is None or not source.is_file():
            runtime = RUNTIMES["litert"]
            raise InputError(
                path,
                f"needs {runtime.title} to be read, which is not installed in this Python "
                f"(pip install 'segdiff[{runtime.extra}]')",
            )
        spec = importlib.util.spec_from_file_location("segdiff_litert_schema", source)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _SCHEMA = module
    return _SCHEMA


_SCHEMA: Any = None


def _tflite_type_names(schema: Any) -> dict[int, str]:
    names = {
        value: name.lower()
        for name, value in vars(schema.TensorType).items()
        if not name.startswith("_") and isinstance(value, int)
    }
    return {**names, schema.TensorType.FLOAT16: "float16", schema.TensorType.FLOAT32: "float32"}


def _counted(count: int, data: bytes, path: Path) -> range:
    """The indices of a vector the flatbuffer declares ``count`` entries of: at least four
    bytes each, so a count past the file's size is damage, never a long loop."""
    if not 0 <= count <= len(data) // 4:
        raise _damaged(path, "LiteRT flatbuffer", f"it declares {count:,} entries of a table")
    return range(count)


def _tflite_shape(tensor: Any) -> Shape:
    signature = tensor.ShapeSignatureAsNumpy()
    dims = signature if not isinstance(signature, int) and len(signature) else tensor.ShapeAsNumpy()
    dims = [] if isinstance(dims, int) else dims
    return tuple(None if int(d) < 0 else int(d) for d in dims)


def _tflite_facts(path: Path, data: bytes) -> tuple[TensorFacts, tuple[TensorFacts, ...], bool]:
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise InputError(path, "is not a LiteRT flatbuffer (no TFL3 identifier)")
    schema = _tflite_schema(path)
    types = _tflite_type_names(schema)
    model = schema.Model.GetRootAs(data, 0)
    buffers = model.BuffersLength()
    for index in _counted(buffers, data, path):
        buffer = model.Buffers(index)
        offset, size = int(buffer.Offset()), int(buffer.Size())
        if offset > 1 and offset + size > len(data):
            raise _damaged(
                path,
                "LiteRT flatbuffer",
                f"buffer {index} is declared at bytes {offset:,}–{offset + size:,}, beyond its "
                f"{len(data):,} bytes",
            )
        buffer.DataAsNumpy()  # its declared length checked against the file (ValueError)
    codes = []
    for index in _counted(model.OperatorCodesLength(), data, path):
        code = model.OperatorCodes(index)
        builtin = max(int(code.BuiltinCode()), int(code.DeprecatedBuiltinCode()))
        if builtin == _TFLITE_CUSTOM:
            name = (code.CustomCode() or b"").decode("utf-8", "replace")[:80]
            raise InputError(
                path,
                f"uses the custom op {name!r}: its kernel is code that LiteRT's Python "
                "interpreter cannot load, and segdiff runs no artefact's code",
            )
        codes.append(builtin)
    if model.SubgraphsLength() < 1:
        raise _damaged(path, "LiteRT flatbuffer", "it has no subgraph")
    quantized = False
    for sub in _counted(model.SubgraphsLength(), data, path):
        graph = model.Subgraphs(sub)
        tensors = graph.TensorsLength()
        for index in _counted(tensors, data, path):
            tensor = graph.Tensors(index)
            if not 0 <= tensor.Buffer() < max(buffers, 1):
                raise _damaged(path, "LiteRT flatbuffer", f"tensor {index} names no buffer")
            quantized |= types.get(tensor.Type(), "") in ("int8", "uint8", "float16")
        for index in _counted(graph.OperatorsLength(), data, path):
            op = graph.Operators(index)
            if not 0 <= op.OpcodeIndex() < len(codes):
                raise _damaged(path, "LiteRT flatbuffer", f"operator {index} has no op code")
            for tensor_index in (*_ints(op.InputsAsNumpy()), *_ints(op.OutputsAsNumpy())):
                if not -1 <= tensor_index < tensors:
                    raise _damaged(path, "LiteRT flatbuffer", f"operator {index} names no tensor")
    graph = model.Subgraphs(0)

    def tensor_facts(index: int) -> TensorFacts:
        if not 0 <= index < graph.TensorsLength():
            raise _damaged(path, "LiteRT flatbuffer", "an input or output names no tensor")
        tensor = graph.Tensors(index)
        name = (tensor.Name() or b"").decode("utf-8", "replace")
        return TensorFacts(name, _tflite_shape(tensor), types.get(tensor.Type(), "unknown"))

    inputs = [tensor_facts(i) for i in _ints(graph.InputsAsNumpy())]
    outputs = tuple(tensor_facts(i) for i in _ints(graph.OutputsAsNumpy()))
    return _one_image_input(path, inputs), outputs, quantized


def _ints(values: Any) -> list[int]:
    return [] if isinstance(values, int) else [int(v) for v in values]


# ONNX ----------------------------------------------------------------------------------------
# The operator sets ONNX Runtime implements itself; any other domain needs a custom op
# library, which is code segdiff never loads.
_ONNX_BUILTIN_DOMAINS = frozenset({"", "ai.onnx", "ai.onnx.ml", "com.microsoft"})


def _graphs(graph: Any) -> Iterator[Any]:
    """``graph`` and every subgraph of its nodes' attributes (If, Loop, Scan bodies)."""
    yield graph
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("g"):
                yield from _graphs(attribute.g)
            for sub in attribute.graphs:
                yield from _graphs(sub)


def _tensors(graph: Any) -> Iterator[Any]:
    """Every tensor a graph holds: initializers, sparse ones' parts, node attributes."""
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield from (sparse.values, sparse.indices)
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("t"):
                yield attribute.t
            yield from attribute.tensors
            for sparse in (attribute.sparse_tensor, *attribute.sparse_tensors):
                yield from (sparse.values, sparse.indices)


def _onnx_refusal(model: Any) -> str:
    """What in a parsed ONNX model would make ONNX Runtime read a file or load code, as the
    end of a sentence ("" when nothing)."""
    import onnx

    known = _ONNX_BUILTIN_DOMAINS | {function.domain for function in model.functions}
    nodes = [node for function in model.functions for node in function.node]
    for graph in _graphs(model.graph):
        for tensor in _tensors(graph):
            if tensor.data_location == onnx.TensorProto.EXTERNAL or len(tensor.external_data):
                return f"keeps tensor {tensor.name[:80]!r} as external data (a file outside it)"
        nodes.extend(graph.node)
    for node in nodes:
        if node.domain not in known:
            return f"uses operator domain {node.domain[:80]!r}, which needs a custom op library"
    return ""


def _parsed_onnx(data: bytes) -> Any:
    import onnx

    try:
        return onnx.load_model_from_string(data)
    except Exception:  # noqa: BLE001 - protobuf raises its own DecodeError types
        return None


def self_contained(data: bytes) -> str:
    """What in an ONNX model would make ONNX Runtime read a file or load code ("" when
    nothing): a tensor kept as external data (a path, resolved from the working folder) or
    an operator of a domain it does not implement itself."""
    model = _parsed_onnx(data)
    return "is not an ONNX model" if model is None else _onnx_refusal(model)


def _onnx_shape(value: Any) -> Shape:
    dims = value.type.tensor_type.shape.dim
    return tuple(int(d.dim_value) if d.HasField("dim_value") else None for d in dims)


def _onnx_dtype(value: Any) -> str:
    import onnx

    try:
        return str(onnx.helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type))
    except (KeyError, ValueError, TypeError):
        return "unknown"


def _onnx_facts(path: Path, data: bytes) -> tuple[TensorFacts, tuple[TensorFacts, ...], bool]:
    model = _parsed_onnx(data)
    if model is None or not model.HasField("graph"):
        raise InputError(path, "is not an ONNX model (its protobuf does not parse as one)")
    if refusal := _onnx_refusal(model):
        raise InputError(path, refusal)
    graph = model.graph
    initialised = {tensor.name for tensor in graph.initializer}
    inputs = [
        TensorFacts(value.name, _onnx_shape(value), _onnx_dtype(value))
        for value in graph.input
        if value.name not in initialised
    ]
    outputs = tuple(
        TensorFacts(value.name, _onnx_shape(value), _onnx_dtype(value)) for value in graph.output
    )
    quantized = any(
        node.op_type in ("QuantizeLinear", "DequantizeLinear", "QLinearConv", "MatMulInteger")
        for node in graph.node
    )
    return _one_image_input(path, inputs), outputs, quantized


# OpenVINO IR ---------------------------------------------------------------------------------
_OPSET = re.compile(r"opset\d{1,3}")


def _ir_dims(text: str) -> Shape:
    dims = []
    for part in text.split(","):
        part = part.strip()
        dims.append(int(part) if part.isdigit() else None)  # "?", "-1", "1..8": free
    return tuple(dims)


def _port_dims(port: Any) -> Shape:
    return tuple(
        int(text) if (text := (dim.text or "").strip()).isdigit() else None
        for dim in port.iter("dim")
    )


def _check_weights(path: Path, declared: int) -> None:
    """The ``.bin`` beside an IR's ``.xml``: a plain file (never a link) of exactly the size
    its constants declare."""
    weights = artefact_files(path)[1]
    try:
        status = weights.lstat()
    except FileNotFoundError:
        raise InputError(
            path, f"needs its weights {weights.name} beside it, which is missing"
        ) from None
    if stat.S_ISLNK(status.st_mode):
        raise InputError(
            path, f"has weights {weights.name} that are a symbolic link; segdiff reads an IR's "
            ".bin only as a plain file beside it",
        )  # fmt: skip
    if not stat.S_ISREG(status.st_mode):
        raise InputError(path, f"has weights {weights.name} that are not a plain file")
    if status.st_size != declared:
        raise InputError(
            path,
            f"declares {declared:,} bytes of weights, but {weights.name} holds "
            f"{status.st_size:,}: the two files are not one IR",
        )


def _ir_facts(path: Path, data: bytes) -> tuple[TensorFacts, tuple[TensorFacts, ...], bool]:
    import xml.etree.ElementTree as ElementTree

    if b"<!DOCTYPE" in data or b"<!ENTITY" in data:
        raise InputError(path, "is not an OpenVINO IR: it declares a DTD, which an IR has not")
    try:
        root = ElementTree.fromstring(data)
    except ElementTree.ParseError as error:
        raise _damaged(path, "OpenVINO IR", f"its XML does not parse ({error})") from None
    if root.tag != "net":
        raise InputError(path, "is not an OpenVINO IR (its XML is not a <net>)")
    declared = 0
    inputs, outputs, quantized = [], [], False
    for layer in root.iter("layer"):
        kind, version = layer.get("type", ""), layer.get("version", "")
        name = layer.get("name", "")
        if not _OPSET.fullmatch(version):
            raise InputError(
                path,
                f"has layer {name[:80]!r} of type {kind[:40]!r} from {version[:40]!r}, not an "
                "OpenVINO operation set: an extension, whose code segdiff never loads",
            )
        found = layer.find("data")
        attributes = found.attrib if found is not None else {}
        if kind == "Const":
            try:
                offset, size = int(attributes["offset"]), int(attributes["size"])
            except (KeyError, ValueError):
                raise _damaged(
                    path, "OpenVINO IR", f"constant {name[:80]!r} has no offset and size"
                ) from None
            if offset < 0 or size < 0:
                raise _damaged(path, "OpenVINO IR", f"constant {name[:80]!r} has a negative size")
            declared = max(declared, offset + size)
            quantized |= attributes.get("element_type", "") in ("i8", "u8", "f16")
        elif kind == "Parameter":
            element = attributes.get("element_type", "")
            dtype = "float32" if element == "f32" else element
            inputs.append(TensorFacts(name, _ir_dims(attributes.get("shape", "")), dtype))
        elif kind == "Result":
            port = layer.find("input/port")
            shape = _port_dims(port) if port is not None else ()
            outputs.append(TensorFacts(name, shape, "float32"))
    _check_weights(path, declared)
    return _one_image_input(path, inputs), tuple(outputs), quantized


# every format --------------------------------------------------------------------------------
def _one_image_input(path: Path, inputs: list[TensorFacts]) -> TensorFacts:
    if len(inputs) != 1:
        raise InputError(path, f"takes {len(inputs)} inputs; segdiff feeds one image")
    (single,) = inputs
    if len(single.shape) != 4:
        raise InputError(
            path, f"takes an input of shape {list(single.shape)}; segdiff feeds images N×H×W×C"
        )
    return single


_READERS = {"tflite": _tflite_facts, "onnx": _onnx_facts, "openvino-ir": _ir_facts}


def read_artefact(path: str | Path) -> ArtefactFacts:
    """What the artefact at ``path`` takes and gives, from its own bytes, or an
    :class:`InputError` naming it: what would make its runtime read outside it or run code,
    and damage a bounded reading sees."""
    return artefact_facts_of(Path(path), read_artefact_bytes(path))


def read_artefact_bytes(path: str | Path) -> bytes:
    """The artefact's own file's bytes (an IR's ``.xml``), bounded."""
    found = artefact_format(path)
    assert found is not None, f"{path} is not an artefact"
    limit = MAX_MODEL_CONFIG_BYTES if found.companion else MAX_MODEL_BYTES
    return _read_bounded(Path(path), limit, "model")


def read_weights(path: str | Path) -> bytes:
    """An IR's ``.bin``, read as a plain file never through a link (b"" for an artefact of
    one file)."""
    files = artefact_files(path)
    if len(files) == 1:
        return b""
    weights = files[1]
    if weights.is_symlink():
        raise InputError(path, f"has weights {weights.name} that are a symbolic link")
    return _read_bounded(weights, MAX_MODEL_BYTES, "weights")


def artefact_facts_of(path: Path, data: bytes) -> ArtefactFacts:
    """:func:`read_artefact` of bytes already read (a child's, checked against the hash the
    runs were planned with)."""
    found = artefact_format(path)
    assert found is not None, f"{path} is not an artefact"
    try:
        single, outputs, quantized = _READERS[found.name](path, data)
    except InputError:
        raise
    except Exception as error:  # noqa: BLE001 - the flatbuffer reader's struct.error, …
        # An offset or a length pointing outside the file, read by a generated reader.
        what = found.title.split(" ", 1)[1]
        raise _damaged(path, what, f"{type(error).__name__}: {str(error)[:120]}") from None
    if not outputs:
        raise InputError(path, "gives no output")
    return ArtefactFacts(path, found, single, outputs, quantized)


# the graph, for matching its tensors to the source's layers ------------------------------------
@dataclass(frozen=True)
class GraphTensor:
    """A tensor of an artefact's graph: its key (a LiteRT tensor's index, an ONNX value's
    name), its name as the converter gave it (never relied on), its shape (None where free),
    its dtype and, for a quantized one, its scale and zero point (one per tensor)."""

    key: str
    name: str
    shape: Shape
    dtype: str
    scale: float = 0.0
    zero_point: int = 0


@dataclass(frozen=True)
class GraphOp:
    """An operator: its node id as Model Explorer numbers it (a LiteRT operator's index in its
    subgraph; an ONNX node's name, or ``<node_{index}>`` as model-explorer-onnx names an unnamed
    one, its index among all the graph's nodes), its type as the format names it (``CONV_2D``,
    ``Conv``), the keys of the tensors it computes on (constants left out) and of its
    outputs, the activation a LiteRT operator fuses into its output (``RELU``; "" none), and
    an ONNX ``Transpose``'s permutation (() where it has none or is not one)."""

    node: str
    type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    fused: str = ""
    perm: tuple[int, ...] = ()


@dataclass(frozen=True)
class ArtefactGraph:
    """An artefact's main graph as data, in execution order (what the layer matching walks:
    engine/graph_matching.py)."""

    format: str  # "tflite", "onnx"
    ops: tuple[GraphOp, ...]
    tensors: dict[str, GraphTensor]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


def _tflite_graph(path: Path, data: bytes) -> ArtefactGraph:
    _tflite_facts(path, data)  # every declared size checked first
    schema = _tflite_schema(path)
    types = _tflite_type_names(schema)
    ops_by_code = {v: k for k, v in vars(schema.BuiltinOperator).items() if isinstance(v, int)}
    options = {v: k for k, v in vars(schema.BuiltinOptions).items() if isinstance(v, int)}
    functions = {v: k for k, v in vars(schema.ActivationFunctionType).items() if isinstance(v, int)}
    model = schema.Model.GetRootAs(data, 0)
    codes = []
    for index in range(model.OperatorCodesLength()):
        code = model.OperatorCodes(index)
        codes.append(max(int(code.BuiltinCode()), int(code.DeprecatedBuiltinCode())))
    graph = model.Subgraphs(0)
    inputs = tuple(str(i) for i in _ints(graph.InputsAsNumpy()))
    tensors: dict[str, GraphTensor] = {}
    for index in range(graph.TensorsLength()):
        tensor = graph.Tensors(index)
        quantization = tensor.Quantization()
        scale, zero = 0.0, 0
        if quantization is not None and quantization.ScaleLength() == 1:
            scale = float(quantization.Scale(0))
            zero = int(quantization.ZeroPoint(0)) if quantization.ZeroPointLength() else 0
        name = (tensor.Name() or b"").decode("utf-8", "replace")
        dtype = types.get(tensor.Type(), "unknown")
        tensors[str(index)] = GraphTensor(
            str(index), name, _tflite_shape(tensor), dtype, scale, zero
        )
    produced = {
        str(i)
        for n in range(graph.OperatorsLength())
        for i in _ints(graph.Operators(n).OutputsAsNumpy())
    }
    computed = produced | set(inputs)  # the rest are constants (weights, shapes)
    ops = []
    for index in range(graph.OperatorsLength()):
        op = graph.Operators(index)
        fused = ""
        kind = options.get(op.BuiltinOptionsType(), "")
        table = op.BuiltinOptions()
        if kind and table is not None and hasattr(schema, kind):
            decoded = getattr(schema, kind)()
            decoded.Init(table.Bytes, table.Pos)
            if hasattr(decoded, "FusedActivationFunction"):
                fused = functions.get(decoded.FusedActivationFunction(), "")
        ops.append(
            GraphOp(
                str(index),
                ops_by_code.get(codes[op.OpcodeIndex()], "UNKNOWN"),
                tuple(str(i) for i in _ints(op.InputsAsNumpy()) if str(i) in computed),
                tuple(str(i) for i in _ints(op.OutputsAsNumpy())),
                "" if fused == "NONE" else fused,
            )
        )
    outputs = tuple(str(i) for i in _ints(graph.OutputsAsNumpy()))
    return ArtefactGraph("tflite", tuple(ops), tensors, inputs, outputs)


def _perm(node: Any) -> tuple[int, ...]:
    """An ONNX ``Transpose``'s permutation (() for any other node, or one left implicit)."""
    if node.op_type != "Transpose":
        return ()
    return next((tuple(int(i) for i in a.ints) for a in node.attribute if a.name == "perm"), ())


def _onnx_graph(path: Path, data: bytes) -> ArtefactGraph:
    import onnx

    _onnx_facts(path, data)  # refused here what would read outside it or load code
    model = _parsed_onnx(data)
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - an inference it cannot do: the declared shapes only
        inferred = model
    graph = inferred.graph
    constant = {tensor.name for tensor in graph.initializer}
    constant |= {out for node in graph.node if node.op_type == "Constant" for out in node.output}
    values = [*graph.input, *graph.value_info, *graph.output]
    tensors = {
        value.name: GraphTensor(value.name, value.name, _onnx_shape(value), _onnx_dtype(value))
        for value in values
    }
    inputs = tuple(value.name for value in graph.input if value.name not in constant)
    ops = []
    for index, node in enumerate(graph.node):
        if node.op_type == "Constant":
            continue
        for name in node.output:
            tensors.setdefault(name, GraphTensor(name, name, (), "unknown"))
        ops.append(
            GraphOp(
                node.name or f"<node_{index}>",  # as Model Explorer's ONNX adapter names it
                node.op_type,
                tuple(name for name in node.input if name and name not in constant),
                tuple(node.output),
                perm=_perm(node),
            )
        )
    outputs = tuple(value.name for value in graph.output)
    return ArtefactGraph("onnx", tuple(ops), tensors, inputs, outputs)


_GRAPH_READERS = {"tflite": _tflite_graph, "onnx": _onnx_graph}


def artefact_graph(path: str | Path, data: bytes) -> ArtefactGraph:
    """The artefact's main graph as data (its operators in execution order, the tensors each
    computes on and gives), read from its bytes as :func:`read_artefact` reads them; an
    OpenVINO IR's is not read (InputError)."""
    path = Path(path)
    found = artefact_format(path)
    assert found is not None, f"{path} is not an artefact"
    reader = _GRAPH_READERS.get(found.name)
    if reader is None:
        raise InputError(
            path,
            f"is {found.title}: its layers are not compared with its source's yet (a .tflite "
            "or an .onnx is)",
        )
    try:
        graph = reader(path, data)
    except InputError:
        raise
    except Exception as error:  # noqa: BLE001 - the generated reader's struct.error, …
        what = found.title.split(" ", 1)[1]
        raise _damaged(path, what, f"{type(error).__name__}: {str(error)[:120]}") from None
    _refuse_cycles(path, graph)
    return graph


def _refuse_cycles(path: Path, graph: ArtefactGraph) -> None:
    """A graph whose operators, in its execution order, read only tensors computed before
    them (or its inputs) and compute each tensor once; anything else (a tensor computed from
    itself, a cycle a runtime may still invoke) is refused in one line: walking it would
    never end."""
    computed = set(graph.inputs)
    for index, op in enumerate(graph.ops):
        if any(key not in computed for key in op.inputs):
            raise InputError(
                path,
                f"has a cycle in its graph: its operator {index} reads a tensor no operator "
                "before it computes; its layers cannot be compared",
            )
        if any(key in computed for key in op.outputs):
            raise InputError(
                path,
                f"has a cycle in its graph: its operator {index} computes a tensor computed "
                "before it; its layers cannot be compared",
            )
        computed.update(op.outputs)
