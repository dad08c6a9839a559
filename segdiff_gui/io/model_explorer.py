"""A layer comparison as Google Model Explorer's node data: each matched layer's
error on the node of the user's artefact whose output is the layer's tensor, so that Model
Explorer colours the artefact's own graph by where it departs from its Keras source.

The file is one ``GraphNodeData`` in JSON, as ``model_explorer.node_data_builder`` documents it
(``results`` by node id, each ``{"value": …}``, and a ``gradient`` whose stops 0 and 1 are the
least and the largest value), and no other key: Model Explorer loads it for the graph on show,
and ``model_explorer.visualize(node_data={"name": …, "node_data_path": …})`` hands it over. Node
ids are the artefact's graph's as Model Explorer's adapters number them: a ``.tflite``
operator's index in its main subgraph (its flatbuffer adapter's node id), an ``.onnx`` node's
name. The value is the layer's relative error ‖Δ‖/‖ref‖ (0: bit for bit the source's); a node
whose output is two layers' tensor (a dropout after it) gives the later layer's.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from segdiff_gui.core.errors import InputError
from segdiff_gui.core.layer_stats import LayerComparison

__all__ = ["NODE_DATA_VALUE", "node_data", "write_node_data"]

NODE_DATA_VALUE = "relative error ‖Δ‖/‖ref‖"
# Low error green, high red: Model Explorer's gradient stops from the least value to the most.
_GRADIENT = [
    {"stop": 0, "bgColor": "#e8f5e9"},
    {"stop": 0.5, "bgColor": "#ffb74d"},
    {"stop": 1, "bgColor": "#e53935"},
]


def node_data(comparison: LayerComparison) -> dict[str, Any]:
    """The comparison's node data (``GraphNodeData`` as JSON): every layer with a node of the
    artefact's graph, its relative error there."""
    results: dict[str, dict[str, float]] = {}
    for layer in comparison.layers:
        if layer.node and math.isfinite(layer.relative_error):  # a zero reference: no ratio
            results[layer.node] = {"value": layer.relative_error}
    return {"results": results, "gradient": _GRADIENT}


def write_node_data(path: Path, comparison: LayerComparison) -> int:
    """Write the node data to ``path`` (a folder that exists); returns how many nodes it
    gives a value. A comparison whose layers name no node of an artefact is refused."""
    data = node_data(comparison)
    if not data["results"]:
        raise InputError(
            path,
            "is not written: this comparison has no layer on a node of an artefact's graph "
            "(Model Explorer's node data is for your own artefact beside its --source)",
        )
    if path.is_dir():
        raise InputError(path, "is a folder; give the file to write, e.g. errors.json")
    if not path.parent.is_dir():
        raise InputError(path.parent, "no such folder for the Model Explorer file")
    try:
        path.write_text(json.dumps(data, indent=1, ensure_ascii=False), encoding="utf-8")
    except OSError as error:
        raise InputError(path, f"cannot be written ({error.strerror})") from None
    return len(data["results"])
