"""The parsers of ``segdiff layers`` and ``segdiff repair``."""

from __future__ import annotations

import argparse

from segdiff_gui.cli.parser_parts import EPILOG, RUN_NAME, bound_int, common, cutoff, two_sides
from segdiff_gui.core.defaults import DEFAULT_CUTOFF
from segdiff_gui.runner.arguments import (
    add_layer_budgets,
    add_model_settings,
    add_source,
    add_timeout,
)

__all__ = ["add_layers", "add_repair"]


def add_layers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    layers = sub.add_parser(
        "layers",
        help="where in the network two configurations part: every layer's output compared",
        description="Run the model layer by layer under --from and under --to, each in the "
        "child its settings need, capture every layer's output for the target image (nested "
        "models flattened, e.g. encoder/block_1), check that the probe's final map equals the "
        "plain run's bit for bit, and report per layer: max and mean |Δ|, max ULP, relative "
        "error, SNR, the share of differing elements and NaN/Inf counts; the first layer that "
        "differs and where the difference grows; and the flips at the output. Served from the "
        "cache when asked again.",
        epilog=EPILOG,
    )
    two_sides(
        layers,
        ".keras or legacy .h5 (functional/Sequential), or your own .tflite or .onnx with its "
        "--source",
        "reference: key=value spec (e.g. device=cpu,batch=1) or a cached run of MODEL (its "
        f"configuration is probed): {RUN_NAME}; with --source, the source's spec (default: "
        "every knob at its default)",
        "the other side: a spec or a cached run, named as --from names one; with --source, "
        "the artefact's spec, from its own runtime (default: its runtime's defaults)",
        required=False,
    )
    add_source(layers, configs=False)
    layers.add_argument(
        "--model-explorer",
        metavar="FILE.json",
        help="with --source: write each matched layer's error (relative error, with max |Δ|, "
        "SQNR and steps of scale in the table) as Google Model Explorer node data on the "
        "artefact's graph",
    )
    layers.add_argument(
        "--show",
        action="store_true",
        help="open Model Explorer on the artefact with that node data (needs segdiff's "
        "explorer extra: ai-edge-model-explorer)",
    )
    layers.add_argument(
        "--cutoff", type=cutoff, default=DEFAULT_CUTOFF, help="class cutoff for the output's flips"
    )
    add_timeout(layers)
    add_layer_budgets(layers)
    add_model_settings(layers)
    common(layers, "print every layer's figures as JSON")


def add_repair(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    repair = sub.add_parser(
        "repair",
        help="the layers to keep in float32 so that a reduced precision stops flipping pixels",
        description="Probe --config (a reduced precision: mixed_bfloat16 or mixed_float16) "
        "against --reference (default: the same configuration in float32) layer by layer, "
        "order the layers by the error each adds, and search for a small set to keep in "
        "float32 so that the flips at --cutoff fall to --bound or fewer: the most blamed "
        "layers first, the smallest such prefix found by rounds of trials, then pruned until no "
        "single layer can go. Every trial is a cached run (keep_float32=A+B in --config). "
        "Prints the layers, the flips and max ULP before and after, and the Keras code that "
        "applies them to your model.",
        epilog=EPILOG,
    )
    repair.add_argument("model", nargs="?", help=".keras or legacy .h5 (functional/Sequential)")
    repair.add_argument("images", nargs="*", help="image files or folders (batch context)")
    repair.add_argument(
        "--config",
        metavar="SPEC",
        default="precision=bf16",
        help="the reduced-precision configuration to repair (default: precision=bf16)",
    )
    repair.add_argument(
        "--reference",
        metavar="SPEC",
        help="what it must agree with (default: --config with precision=float32)",
    )
    repair.add_argument("--demo", action="store_true", help="use the bundled demo model/images")
    repair.add_argument("--target", metavar="NAME", help="the image to study (default: first)")
    repair.add_argument(
        "--cutoff", type=cutoff, default=DEFAULT_CUTOFF, help="class cutoff of the flips"
    )
    repair.add_argument(
        "--bound", type=bound_int, default=0, help="flips allowed after the repair (default 0)"
    )
    repair.add_argument("--code", metavar="FILE", help="write the Keras code that applies it here")
    add_timeout(repair)
    add_layer_budgets(repair)
    add_model_settings(repair)
    common(repair, "print the repair as JSON (the code included)")
