"""``segdiff layers``: where in the network two configurations part, every layer's output
compared."""

from __future__ import annotations

import argparse
import importlib.util
import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from segdiff_gui.cli import parser_parts
from segdiff_gui.cli.exit_codes import EXIT_OK
from segdiff_gui.cli.parser_parts import (
    RUN_NAME,
    common,
    cutoff,
    two_sides,
)
from segdiff_gui.cli.progress_view import drive
from segdiff_gui.cli.running import (
    exit_code,
    follow_matrix,
    model_and_images,
    open_cache,
    request_of,
)
from segdiff_gui.cli.tables import FittedTable
from segdiff_gui.cli.text import print_json, say
from segdiff_gui.core.artefacts import artefact_format, base_config
from segdiff_gui.core.config import (
    ModelSettings,
    OutputSelection,
    Preprocessing,
    RunConfig,
)
from segdiff_gui.core.defaults import DEFAULT_CUTOFF
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.layer_stats import (
    LAYER_COLUMNS,
    LayerComparison,
    layer_cells,
    layer_columns,
)
from segdiff_gui.core.text import format_size
from segdiff_gui.io.model_explorer import NODE_DATA_VALUE, write_node_data
from segdiff_gui.runner.arguments import (
    add_layer_budgets,
    add_model_settings,
    add_source,
    add_timeout,
    configs_of,
    model_settings,
)
from segdiff_gui.runner.layers import LayerProbeSession
from segdiff_gui.runner.plan import artefact_facts, check_source
from segdiff_gui.storage.cache import ResultCache
from segdiff_gui.storage.records import RunRecord
from segdiff_gui.storage.selection import select_pair
from segdiff_gui.storage.studies import comparable_groups

DESCRIPTION = (
    "Run the model layer by layer under --from and under --to, each in the "
    "child its settings need, capture every layer's output for the target image (nested "
    "models flattened, e.g. encoder/block_1), check that the probe's final map equals the "
    "plain run's bit for bit, and report per layer: max and mean |Δ|, max ULP, relative "
    "error, SNR, the share of differing elements and NaN/Inf counts; the first layer that "
    "differs and where the difference grows; and the flips at the output. Served from the "
    "cache when asked again."
)
EPILOG = parser_parts.EPILOG


def arguments(parser: argparse.ArgumentParser) -> None:
    two_sides(
        parser,
        ".keras or legacy .h5 (functional/Sequential), or your own .tflite or .onnx with its "
        "--source",
        "reference: key=value spec (e.g. device=cpu,batch=1) or a cached run of MODEL (its "
        f"configuration is probed): {RUN_NAME}; with --source, the source's spec (default: "
        "every knob at its default)",
        "the other side: a spec or a cached run, named as --from names one; with --source, "
        "the artefact's spec, from its own runtime (default: its runtime's defaults)",
        required=False,
    )
    add_source(parser, configs=False)
    parser.add_argument(
        "--model-explorer",
        metavar="FILE.json",
        help="with --source: write each matched layer's error (relative error, with max |Δ|, "
        "SQNR and steps of scale in the table) as Google Model Explorer node data on the "
        "artefact's graph",
    )
    parser.add_argument(
        "--show",
        action="store_true",
        help="open Model Explorer on the artefact with that node data (needs segdiff's "
        "explorer extra: ai-edge-model-explorer)",
    )
    parser.add_argument(
        "--cutoff", type=cutoff, default=DEFAULT_CUTOFF, help="class cutoff for the output's flips"
    )
    add_timeout(parser)
    add_layer_budgets(parser)
    add_model_settings(parser)
    common(parser, "print every layer's figures as JSON")


_BAR_WIDTH = 16


_BAR_FLOOR = -10.0  # log10 of the smallest relative error the bar shows


_EIGHTHS = " ▏▎▍▌▋▊▉"


def error_bar(relative_error: float, width: int = _BAR_WIDTH) -> str:
    """A relative error on a log scale from 1e-10 (empty) to 1 (full), in eighths of a cell."""
    if relative_error <= 0.0:
        return ""
    if math.isinf(relative_error):
        return "█" * width + "∞"
    share = (math.log10(relative_error) - _BAR_FLOOR) / -_BAR_FLOOR
    eighths = round(min(max(share, 0.0), 1.0) * width * 8)
    full, rest = divmod(max(eighths, 1), 8)
    return "█" * full + (_EIGHTHS[rest] if rest else "")


def layer_table(comparison: LayerComparison, title: str) -> FittedTable:
    table = FittedTable(
        title=title,
        caption="▶ the first layer whose output differs; rel. error ‖Δ‖/‖ref‖ drawn on a log "
        "scale from 1e-10 to 1; ULPs are float32 steps (large near zero, where steps are tiny)",
    )
    table.figure(LAYER_COLUMNS[0], justify="left")
    table.name(LAYER_COLUMNS[1])
    table.figure(LAYER_COLUMNS[2], justify="left")
    for header in LAYER_COLUMNS[3:-1]:
        table.figure(header)
    table.text(LAYER_COLUMNS[-1], justify="right")  # NaN/Inf: "1/0 NaN, 0/2 Inf"
    quantized = comparison.quantized
    for header in layer_columns(comparison)[len(LAYER_COLUMNS) :]:
        table.figure(header)
    table.figure("rel. error (log)", justify="left")
    first = comparison.first_differing
    for index, layer in enumerate(comparison.layers):
        cells = layer_cells(index, layer, layer is first, quantized)
        table.add_row(*cells, error_bar(layer.relative_error))
    return table


def _configs_of(
    args: argparse.Namespace,
    cache: ResultCache,
    model: Path,
    images: Sequence[Path],
    settings: ModelSettings,
) -> tuple[RunConfig, RunConfig]:
    """The two sides: key=value specs, or the configurations of two cached runs of ``model``,
    named as ``--ref`` names a run, on ``--image`` (or the ``--target``; else on an image
    named on the command line: runs of other images are not candidates) and in ``--group``
    where given; the first looked up among the runs made with the model settings the command
    gives (those it probes with) before the others."""
    if ("=" in args.from_) != ("=" in args.to):
        raise InputError(
            "layers", "--from and --to are both key=value specs, or both name cached runs"
        )
    if "=" in args.from_:  # an artefact's from its own runtime
        specs = configs_of([args.from_, args.to], model)
        return specs[0], specs[1]
    records = cache.records()
    image = args.image or _target_name(args.target, images)
    groups = comparable_groups(records, model.name, image, args.group)
    named = {path.name for path in images}
    candidates = [r for group in groups for r in group if image or r.target_name in named]
    if not candidates:
        raise InputError(
            model, f"has no run in the cache on {_listed(sorted(named))} (see 'segdiff ls')"
        )
    alike = [record for record in candidates if _made_with(record, settings)]
    first, second, _ = select_pair(records, candidates, args.from_, args.to, preferred=alike)
    if args.target is None:
        args.target = first.target_name
    return first.run_config, second.run_config


def _listed(names: Sequence[str]) -> str:
    return ", ".join(names[:3]) + (f" or {len(names) - 3} more images" if len(names) > 3 else "")


def _target_name(target: str | None, images: Sequence[Path]) -> str | None:
    """The file name of the image ``--target`` names: by its name, path or stem, as planning
    reads it (``runner.plan.index_of_target``); a stored run knows its image by name."""
    if target is None:
        return None
    for path in images:
        if target in (path.name, str(path), path.stem):
            return path.name
    return Path(target).name


def _made_with(record: RunRecord, settings: ModelSettings) -> bool:
    """Whether ``record`` was run with ``settings``' preprocessing and output."""
    return (
        Preprocessing.from_dict(record.preprocessing) == settings.preprocessing
        and OutputSelection.from_dict(record.output) == settings.output
    )


def _beside_source(args: argparse.Namespace, model: Path) -> tuple[Path, RunConfig, RunConfig]:
    """The artefact's Keras source, and the two sides: the source's configuration
    (``--from``, default every knob at its default) and the artefact's (``--to``, from its own
    runtime; default its runtime's defaults at its fixed batch or batch 1)."""
    source = Path(check_source(model, Path(args.source)).path)
    for given in (args.from_, args.to):
        if given is not None and "=" not in given:
            raise InputError(
                given, "with --source, --from and --to are key=value specs (the source's, the "
                "artefact's)",
            )  # fmt: skip
    reference = configs_of([args.from_], None)[0] if args.from_ else RunConfig()
    if args.to:
        return source, reference, configs_of([args.to], model)[0]
    facts = artefact_facts(model)
    assert facts is not None  # check_source: an artefact
    return source, reference, replace(base_config(model), batch=facts.fixed_batch or 1)


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    cache = open_cache(args, writing=True)
    model, images = model_and_images(args, "layers")
    settings = model_settings(args)
    source = None
    if args.source:
        source, reference, other = _beside_source(args, model)
    elif args.model_explorer or args.show:
        flag = "--model-explorer" if args.model_explorer else "--show"
        raise InputError(flag, "is for your own artefact beside its --source")
    elif args.from_ is None or args.to is None:
        raise InputError("layers", "name both sides: --from and --to (or --source)")
    else:
        reference, other = _configs_of(args, cache, model, images, settings)
    if args.show:  # before any probe
        _explorer_extensions(model)
    request = request_of(
        args, model, images, cache, target=args.target, settings=settings, source=source
    )
    session = LayerProbeSession(request, reference, other, args.memory, args.keep)
    status = EXIT_OK
    probe = session.cached_result()
    if probe is None:
        outcome = follow_matrix(args, err, session.plain_runner())
        status = exit_code(outcome)
        probes = drive(
            session.probe_runner(), err, quiet=args.json, debug=args.debug, done="probed"
        )
        if probes.fatal is not None:
            raise InputError(probes.fatal.path, probes.fatal.problem, probes.fatal.fix)
        if probes.failed:
            failure = probes.failed[0]
            raise InputError(failure["label"], f"its probe failed: {failure['error']}")
        status = max(status, exit_code(probes))
        probe = session.compare()
    if args.json:
        if args.model_explorer or args.show:  # said on standard error: the JSON stays JSON
            _model_explorer(args, err, model, probe.comparison, model.name)
        print_json(
            {
                **probe.to_dict(args.cutoff),
                "model": model.name,
                **({"source": source.name} if source is not None else {}),
                "image": session.plan.images[session.plan.target].name,
                "cutoff": args.cutoff,
            }
        )
        return status
    image = session.plan.images[session.plan.target].name
    models = model.name if source is None else f"{model.name} beside its source {source.name}"
    title = (
        f"{models} on {image}: {probe.reference_label} → {probe.other_label}, "
        f"{len(probe.comparison.layers)} layers"
    )
    out.print(layer_table(probe.comparison, title))
    for line in probe.sentences(args.cutoff):
        say(out, line)
    if args.model_explorer or args.show:
        _model_explorer(args, out, model, probe.comparison, title)
    kept = session.store.tensor_bytes()
    if probe.tensors_kept:
        out.print(
            f"Layer tensors kept in the cache ({format_size(kept)} of probes, within "
            f"--keep {format_size(args.keep)}).",
            markup=False,
        )
    else:
        out.print(
            f"Layer tensors not kept (over --keep {format_size(args.keep)}); the figures and "
            "difference maps are.",
            markup=False,
        )
    return status


_ONNX_ADAPTER = "model_explorer_onnx"  # Model Explorer's ONNX adapter (model-explorer-onnx)


_NO_EXPLORER = (
    "needs Google Model Explorer, segdiff's explorer extra (pip install 'segdiff[explorer]'); "
    "--model-explorer FILE.json writes its node data without it"
)


def _explorer_extensions(model: Path) -> list[str]:
    """The Model Explorer extensions that open ``model``: an .onnx needs its ONNX adapter,
    which the explorer extra does not install (InputError where either is missing)."""
    if importlib.util.find_spec("model_explorer") is None:
        raise InputError("--show", _NO_EXPLORER)
    if (found := artefact_format(model)) is None or found.name != "onnx":
        return []
    if importlib.util.find_spec(_ONNX_ADAPTER) is None:
        raise InputError(
            "--show",
            "opens an .onnx in Model Explorer through its ONNX adapter, which is not installed "
            "(pip install model-explorer-onnx); --model-explorer FILE.json writes its node "
            "data without it",
        )
    return [_ONNX_ADAPTER]


def _model_explorer(
    args: argparse.Namespace, out: Console, model: Path, comparison: LayerComparison, title: str
) -> None:
    """Write the comparison as Model Explorer's node data on the artefact's graph
    (``--model-explorer``), and with ``--show`` open Model Explorer on it."""
    path = Path(args.model_explorer or f"{model.stem}.segdiff-errors.json")
    name = f"segdiff: {NODE_DATA_VALUE}, {title}"
    count = write_node_data(path, comparison)
    say(out, f"Model Explorer node data ({NODE_DATA_VALUE}) of {count} nodes written to {path}.")
    if not args.show:
        return
    try:
        import model_explorer  # the explorer extra: a server and a browser window
    except ImportError:
        raise InputError("--show", f"{_NO_EXPLORER}; the node data is in {path}") from None
    model_explorer.visualize(
        model_paths=[str(model)],
        extensions=_explorer_extensions(model),
        node_data={"name": name, "node_data_path": str(path)},
    )
