"""The ``segdiff`` command line's parser: every subcommand, its options and their help."""

from __future__ import annotations

import argparse
from functools import cache

from segdiff_gui.cli.layers_parser import add_layers, add_repair
from segdiff_gui.cli.parser_parts import (
    EPILOG,
    RUN_NAME,
    Parser,
    bound_float,
    bound_int,
    common,
    cutoff,
    output_quantile,
    output_tolerance,
    parse_shard,
    two_sides,
)
from segdiff_gui.core.defaults import DEFAULT_CUTOFF
from segdiff_gui.runner.arguments import (
    add_configs,
    add_model_settings,
    add_repeats_and_timeout,
    add_source,
    add_timeout,
)
from segdiff_gui.version import __version__

__all__ = ["build_parser", "command_flags", "command_options"]

# What --ref means in every command that has it.
_REF_HELP = f"reference: {RUN_NAME}; default: this machine's run with every knob at its default"


def _matrix_options(parser: argparse.ArgumentParser) -> None:
    add_repeats_and_timeout(parser)
    parser.add_argument(
        "--cutoff",
        type=cutoff,
        default=DEFAULT_CUTOFF,
        metavar="T",
        help="class cutoff for the flip counts of sigmoid maps: class = p >= T (default "
        f"{DEFAULT_CUTOFF:g})",
    )


def _add_run(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    run = sub.add_parser(
        "run",
        help="run a model on images under a configuration matrix",
        description="Run MODEL on the target image under each --config (default: batch 1 and "
        "64 on every device), each configuration in a child process of its runtime (TensorFlow, "
        "or Keras 3's JAX or PyTorch backend: runtime=jax|torch), and cache every probability "
        "map. Then show how each run differs from the reference (the run nearest the defaults).",
        epilog=EPILOG,
    )
    run.add_argument(
        "model",
        help=".keras, legacy .h5, a SavedModel folder, or your own .tflite, .onnx or OpenVINO "
        "IR .xml",
    )
    run.add_argument(
        "images",
        nargs="+",
        help="image files or folders of them (PNG, JPEG, TIFF, NPY; "
        "folders are not searched recursively); they also fill batches as context",
    )
    add_configs(run)
    add_source(run)
    _matrix_options(run)
    run.add_argument(
        "--strict",
        action="store_true",
        help="refuse the whole matrix (exit 2) when the model cannot take one of its "
        "configurations (a SavedModel under precision=float64, say); by default that "
        "configuration is skipped, said in one line, and the others run",
    )
    add_model_settings(run)
    sweep = run.add_argument_group("test-set sweep")
    sweep.add_argument(
        "--sweep",
        action="store_true",
        help="study every image, not one target, and report the whole set",
    )
    sweep.add_argument(
        "--shard",
        type=parse_shard,
        metavar="K/N|slurm|k8s/N",
        help="run only shard K of N of the images (a contiguous, deterministic slice; batches "
        "still draw on the whole set); implies --sweep. Bundle each shard, then merge. "
        "'slurm': K and N from this Slurm array task (SLURM_ARRAY_TASK_ID, _MIN, _MAX, "
        "_COUNT, _STEP); 'k8s/N': K from a Kubernetes indexed Job's JOB_COMPLETION_INDEX",
    )
    sweep.add_argument(
        "--bundle",
        metavar="FILE|FOLDER",
        help="write this sweep's runs, and which shard of which test set they are, to a "
        "bundle: FILE.h5, or in FOLDER as shard-K-of-N.h5; implies --sweep. 'segdiff merge' "
        "then 'segdiff sweep' name any shard or image that is missing",
    )
    _sweep_outputs(sweep)
    run.set_defaults(model_name=None, ref_configuration=None)
    common(run, "print the runs and comparisons as JSON on stdout")


def _sweep_outputs(parser: argparse._ActionsContainer) -> None:
    parser.add_argument(
        "--masks",
        metavar="FOLDER",
        help="ground-truth masks, matched by file name (cell_07.png ↔ FOLDER/cell_07.png or "
        "cell_07_mask.*): Dice and IoU per configuration; implies --sweep",
    )
    parser.add_argument(
        "--csv", metavar="FILE", help="write every image × configuration's figures as CSV"
    )


def _add_explanations(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    explain = sub.add_parser(
        "explain",
        help="attribute a difference to knobs: one at a time, and cumulatively",
        description="Plan the runs that change one knob at a time from --from, and the path "
        "from --from to --to knob after knob; run what is not cached; and report how much each "
        "knob contributes (max ULP, differing pixels, flips at the cutoff, at-risk pixels), "
        "with the spread over repeats on lines of their own. With two cached runs (id or "
        "label) instead of specs, only what is cached is measured.",
        epilog=EPILOG,
    )
    two_sides(
        explain,
        ".keras, legacy .h5, or a SavedModel folder",
        f"base: key=value spec (e.g. device=cpu,batch=1) or a cached run: {RUN_NAME}",
        "target: a spec or a cached run, named as --from names one",
    )
    _matrix_options(explain)
    add_model_settings(explain)
    common(explain, "print the attribution as JSON")

    diagnose = sub.add_parser(
        "diagnose",
        help="is this normal, why, and how to avoid it — from the measured runs",
        description="Plain sentences built only from what the cached runs measured: whether "
        "each configuration is deterministic, which knobs change the maps and by how much, "
        "flips and at-risk pixels at the cutoff, and the ways to avoid them that the "
        "measurements support, with links to TensorFlow's documentation.",
    )
    _selection(diagnose)
    common(diagnose, "print the findings as JSON")

    sweep = sub.add_parser(
        "sweep",
        help="a whole test set from the cache: per-image figures, Dice and IoU",
        description="Summarise every image of one model in the cache (or a bundle): flips, "
        "at-risk pixels and max ULP per configuration against the reference configuration, "
        "and with --masks the mean Dice and IoU, their change between configurations and "
        "over repeats. Run the images first with 'segdiff run --sweep' (or --shard K/N).",
    )
    sweep.add_argument("--model", dest="model_name", metavar="NAME", help="the model file name")
    sweep.add_argument(
        "--ref",
        dest="ref_configuration",
        metavar="RUN",
        help=_REF_HELP + "; the sweep compares every image with that run's configuration",
    )
    sweep.add_argument(
        "--group",
        metavar="ID",
        help="the model file and settings of this group (an id 'segdiff ls' shows), on every image",
    )
    sweep.add_argument("--bundle", metavar="FILE", help="read the runs from a bundle")
    sweep.add_argument(
        "--cutoff",
        type=cutoff,
        default=DEFAULT_CUTOFF,
        metavar="T",
        help=f"class cutoff for sigmoid maps (default {DEFAULT_CUTOFF:g}); softmax maps use argmax",
    )
    _sweep_outputs(sweep)
    common(sweep, "print the test-set and per-image figures as JSON")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="segdiff",
        description="See which pixels of a segmentation model's probability map change with "
        "the device, batch size, precision or the next run.",
        epilog=EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"segdiff {__version__}")
    parser.add_argument("--cache", metavar="PATH", default=None, help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    devices = sub.add_parser(
        "devices",
        help="devices each installed runtime sees, and its build (asked of child processes)",
        description="Start each installed runtime (TensorFlow, JAX, PyTorch) in a child process "
        "and report the devices it sees (GPUs with their name, memory, UUID and driver), its "
        "build (CUDA/cuDNN), the CPU, and, where it sees no GPU, why.",
    )
    common(devices, "print the probe as JSON on stdout")
    _add_run(sub)

    listing = sub.add_parser(
        "ls",
        help="list the runs in the cache",
        description="List every cached run: short id, label, model, image, map shape, the "
        "device it really ran on, the runtime and its version, host and time.",
    )
    common(listing, "print every run with its configuration and provenance as JSON")

    demo = sub.add_parser(
        "demo",
        help="run the bundled demo's matrix and summarise the differences",
        description="Run the bundled U-Net on synthetic cell images under batch 1 and 64, one "
        "intra-op thread, XLA and bfloat16 (two repeats each), plus every GPU present, and show "
        "how the maps differ. Cached runs are not recomputed.",
        epilog=EPILOG,
    )
    _matrix_options(demo)
    common(demo, "print the runs and comparisons as JSON on stdout")

    bundle = sub.add_parser(
        "bundle",
        help="write chosen runs to one portable .h5 file",
        description="Write runs (maps, provenance, target images) to one HDF5 file that "
        "'segdiff merge' adds to another cache, e.g. from a GPU server to a laptop.",
    )
    bundle.add_argument("out", help="bundle file to write (.h5)")
    bundle.add_argument(
        "runs",
        nargs="*",
        help="run id prefixes or labels such as 'cpu b64 r0' (a label takes "
        "every run that has it; a configuration's, 'cpu b64', every repeat of it); default: all "
        "runs",
    )
    common(bundle, "print what was written as JSON")

    merge = sub.add_parser(
        "merge",
        help="add the runs of bundles to the cache",
        description="Add the runs of bundles to the cache. A run already cached is compared bit "
        "for bit; one computed on another machine is kept beside the local one.",
    )
    merge.add_argument("bundles", nargs="+", help="bundle files made by 'segdiff bundle'")
    common(merge, "print what was merged as JSON")
    _add_your_pipeline(sub)
    _add_analysis(sub)
    _add_explanations(sub)
    add_layers(sub)
    add_repair(sub)
    _add_slurm_script(sub)
    return parser


def _add_your_pipeline(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    imports = sub.add_parser(
        "import",
        help="bring maps from your own pipeline into the cache",
        description="Check MAPS (.npy, .npz, float TIFF; one map, or a batch N×H×W[×C] of the "
        "images in order) against the map MODEL gives, and store each as a run marked "
        "imported: compare, diagnose, the window and reports then show it beside segdiff's "
        "runs. What you state (--label, --note) is shown as stated, never as measured.",
        epilog=EPILOG,
    )
    imports.add_argument("maps", help="the map file")
    imports.add_argument("--model", required=True, help="the model that made the maps")
    imports.add_argument(
        "--image", action="append", required=True, metavar="IMAGE",
        help="the image a map was made of (repeat, in the order of a batch's maps)",
    )  # fmt: skip
    imports.add_argument("--label", metavar="TEXT", help="what to call it (default: file name)")
    imports.add_argument(
        "--note", action="append", default=[], metavar="KEY=VALUE",
        help="what you know of where it came from (device=A100 …); repeatable",
    )  # fmt: skip
    add_model_settings(imports)
    common(imports, "print what was imported as JSON")

    again = sub.add_parser(
        "reproduce",
        help="find the configuration that computes your own map bit for bit",
        description="Run MODEL on the images under the configurations your pipeline may "
        "differ in (the runtime: Keras 3 or, for a .h5, Keras 2; each that runs an artefact; "
        "oneDNN, model.predict's batch, "
        "XLA, threads, dividing or multiplying by 255): every runtime's defaults first, then "
        "one knob at a time, then pairs, each an ordinary cached run, until one equals MAP bit "
        "for bit. Exit 0 when one does, 1 when none does.",
        epilog=EPILOG,
    )
    again.add_argument("map", help="your map of the target (.npy, .npz, float TIFF)")
    again.add_argument("model", help="the model that made it")
    again.add_argument("images", nargs="+", help="the images, in your pipeline's order")
    again.add_argument("--target", metavar="NAME", help="the image MAP is of (default: first)")
    again.add_argument(
        "--config",
        metavar="SPEC",
        help="where the search starts (default: the defaults, under every runtime the model "
        "runs under), e.g. runtime=jax for a pipeline on Keras's JAX backend",
    )
    add_model_settings(again)
    add_timeout(again)
    common(again, "print every configuration tried and the answer as JSON")


def _selection(parser: argparse.ArgumentParser, ref_required: bool = False) -> None:
    parser.add_argument("--ref", metavar="RUN", required=ref_required, help=_REF_HELP)
    parser.add_argument("--model", metavar="NAME", help="only runs of this model file name")
    parser.add_argument("--image", metavar="NAME", help="only runs on this image file name")
    parser.add_argument(
        "--group",
        metavar="ID",
        help="only runs of this group (model, image and settings; the id 'segdiff ls' shows)",
    )
    parser.add_argument(
        "--bundle", metavar="FILE", help="read the runs from a bundle instead of the cache"
    )
    parser.add_argument(
        "--cutoff",
        type=cutoff,
        default=DEFAULT_CUTOFF,
        metavar="T",
        help=f"class cutoff for sigmoid maps: class = p >= T (default {DEFAULT_CUTOFF:g}); "
        "softmax maps flip on argmax",
    )


def _add_analysis(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    compare = sub.add_parser(
        "compare",
        help="every run against a reference: differences, flips, determinism",
        description="For each model and image in the cache (or the one --ref belongs to), "
        "compare every run with the reference: bitwise equality, differing pixels, max ULP, "
        "max and mean |Δ|, class flips at the cutoff, determinism over repeats, at-risk pixels.",
    )
    _selection(compare)
    common(compare, "print the comparisons as JSON")

    export = sub.add_parser(
        "export",
        help="write the flip mask and the flipped pixels of two runs",
        description="Write the pixels whose class differs between --ref and --other at the "
        "cutoff: a mask (.png/.tif 0/255, .npy bool) and/or a CSV with every run's exact "
        "values, ULP distances and classes at those pixels (and the exact run's float64 value "
        "and class, where the group has one).",
    )
    _selection(export, ref_required=True)
    export.add_argument(
        "--other",
        metavar="RUN",
        required=True,
        help=f"the run to compare: {RUN_NAME}",
    )
    export.add_argument("--mask", metavar="FILE", help="flip mask: .png, .tif or .npy")
    export.add_argument("--csv", metavar="FILE", help="flipped pixels with every run's values")
    export.add_argument("--at-risk", action="store_true", help="add at-risk pixels to the CSV")
    common(export)

    report = sub.add_parser(
        "report",
        help="a self-contained HTML and/or JSON report for a bug report",
        description="Write one HTML file (tables, pictures, flips-vs-cutoff curve, provenance, "
        "all embedded) and/or the same data as JSON, for one model and image.",
    )
    _selection(report)
    report.add_argument("--html", metavar="FILE", help="the HTML report to write")
    report.add_argument("--json", dest="json_file", metavar="FILE", help="the JSON report")
    common(report)

    check = sub.add_parser(
        "check",
        help="exit 1 when any run exceeds a bound against the reference (CI gate)",
        description="A reproducibility gate: compare every run with its reference and exit 1, "
        "with one line per failure, when any exceeds a bound. With no bound, any flip fails.",
        epilog=EPILOG,
    )
    _selection(check)
    check.add_argument("--max-flips", type=bound_int, metavar="N", help="flipped pixels allowed")
    check.add_argument(
        "--max-ulp", type=bound_int, metavar="U", help="largest ULP distance allowed"
    )
    check.add_argument(
        "--max-abs", type=bound_float, metavar="X", help="largest |difference| allowed"
    )
    check.add_argument(
        "--max-wrong",
        type=bound_int,
        metavar="N",
        help="pixels allowed whose class differs from the exact (float64) run's where float32 "
        "could decide it, in every run, the reference's too (a group without an exact run "
        "fails)",
    )
    tolerances = check.add_argument_group(
        "tolerances, as Polygraphy's",
        "Each output a model's runs stored is a group of its own: a tolerance given as "
        "OUTPUT:X is for that output (its name, or what --output chose), one given as X for "
        "every other. A tolerance not given is 0.",
    )
    tolerances.add_argument(
        "--atol",
        type=output_tolerance,
        nargs="+",
        action="extend",
        metavar="[OUTPUT:]X",
        help="absolute tolerance: a value fails where |Δ| > atol and |Δ|/|reference| > rtol "
        "(Polygraphy's elemwise check), e.g. --atol 1e-5 probs:1e-4",
    )
    tolerances.add_argument(
        "--rtol",
        type=output_tolerance,
        nargs="+",
        action="extend",
        metavar="[OUTPUT:]X",
        help="relative tolerance, a share of |reference| (see --atol)",
    )
    tolerances.add_argument(
        "--error-quantile",
        type=output_quantile,
        nargs="+",
        action="extend",
        metavar="[OUTPUT:]Q",
        help="check the Q-quantile of |Δ| against atol and of |Δ|/|reference| against rtol "
        "instead of every value (Polygraphy's --check-error-stat quantile --error-quantile "
        "Q), e.g. 0.99",
    )
    common(check, "print the bounds, each run's figures and the failures as JSON")


def _add_slurm_script(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    script = sub.add_parser(
        "slurm-script",
        help="write a Slurm array job that sweeps a test set in shards, then merge and sweep",
        description="Print (or write) an sbatch script whose task K of N runs 'segdiff run "
        "MODEL IMAGES … --shard slurm --bundle RESULTS', so that RESULTS fills with "
        "shard-K-of-N.h5; the script ends with the merge and sweep to run once every task "
        "has ended. The options of this command come first; everything from MODEL on is "
        "'segdiff run''s own arguments (configurations, repeats, model settings, --masks, "
        "--trust-model), checked now.",
    )
    script.add_argument("--shards", type=int, required=True, metavar="N", help="array tasks")
    script.add_argument(
        "--results",
        default="segdiff-results",
        metavar="FOLDER",
        help="where each task writes its bundle and log (default: segdiff-results)",
    )
    script.add_argument("--out", metavar="FILE", help="write the script here (default: print)")
    slurm = script.add_argument_group("sbatch options (written as #SBATCH lines)")
    slurm.add_argument("--job-name", default="segdiff", help="default: segdiff")
    slurm.add_argument("--partition", help="e.g. gpu")
    slurm.add_argument("--gres", help="e.g. gpu:1")
    slurm.add_argument("--cpus-per-task", type=int, metavar="N")
    slurm.add_argument("--mem", help="e.g. 16G")
    slurm.add_argument("--time", help="e.g. 01:00:00")
    slurm.add_argument("--account")
    script.add_argument(
        "run_arguments",
        nargs=argparse.REMAINDER,
        metavar="MODEL IMAGES … [run options]",
        help="what 'segdiff run' takes",
    )
    script.add_argument("--debug", action="store_true", help="show tracebacks")


def _subparser(command: str) -> argparse.ArgumentParser | None:
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            parser: argparse.ArgumentParser = action.choices[command]
            return parser
    return None


@cache
def command_options(command: str) -> frozenset[str]:
    """Every option string ``segdiff COMMAND`` takes (``--group``, ``-h``, …)."""
    parser = _subparser(command)
    return frozenset(parser._option_string_actions) if parser else frozenset()


@cache
def command_flags(command: str) -> dict[str, str]:
    """The flag of each option ``segdiff COMMAND`` takes, by its destination (``trust_model``
    → ``--trust-model``): a command written back from a request names options as the
    parser spells them."""
    parser = _subparser(command)
    actions = parser._actions if parser else []
    return {a.dest: max(a.option_strings, key=len) for a in actions if a.option_strings}
