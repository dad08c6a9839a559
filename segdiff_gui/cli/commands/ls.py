"""``segdiff ls``: every cached run, grouped as people compare them."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from rich.console import Console

from segdiff_gui.cli.parser_parts import (
    common,
)
from segdiff_gui.cli.running import (
    open_cache,
    report_damaged,
)
from segdiff_gui.cli.tables import FittedTable
from segdiff_gui.cli.text import plural as _plural
from segdiff_gui.cli.text import print_json as _json
from segdiff_gui.cli.text import say
from segdiff_gui.core.runtime_defaults import on_off
from segdiff_gui.core.runtimes import RUNTIMES
from segdiff_gui.core.text import shape_text
from segdiff_gui.storage.listing import ListedRun
from segdiff_gui.storage.provenance import Provenance
from segdiff_gui.storage.records import RunRecord
from segdiff_gui.storage.studies import (
    distinguish_batches,
    group_id,
    settings_text,
)

if TYPE_CHECKING:
    pass


DESCRIPTION = (
    "List every cached run: short id, label, model, image, map shape, the device it really ran "
    "on, the runtime and its version, host and time."
)
EPILOG = None


def arguments(parser: argparse.ArgumentParser) -> None:
    common(parser, "print every run with its configuration and provenance as JSON")


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    cache = open_cache(args)
    scan = cache.scan(with_maps=True)  # every map's checksum too: ls tells what is damaged
    # Grouped as people compare them: model, image, settings group, then the runs in order.
    groups = {r.key: group_id(r) for r in scan.records}
    by_group: dict[str, list[RunRecord]] = {}
    for record in scan.records:
        by_group.setdefault(groups[record.key], []).append(record)
    # A configuration run with two batches (another image set) is named with each.
    named = [r for group in by_group.values() for r in distinguish_batches(group)]
    records = sorted(named, key=lambda r: (r.model_name, r.target_name, groups[r.key], r.label))
    status = report_damaged(err, scan.damaged)
    if args.json:
        _json([ListedRun(r).to_dict() for r in records])
        return status
    if not records:
        say(out, f"no runs in {cache.root}")
        return status
    table = FittedTable(title=f"{_plural(len(records), 'run')} in {cache.root}")
    # Runs of one model and image that differ in their settings must not look alike: the
    # settings column names what is not the default, and the group tells the groups apart.
    with_settings = any(settings_text(r) for r in records)
    table.figure("id", justify="left")
    table.name("label")
    table.figure("group", justify="left")
    table.name("model")
    table.name("image")
    if with_settings:
        table.text("settings")
    table.text("map")
    table.name("device")
    table.text("runtime")
    # The host says where a merged run came from: kept whole while the others can wrap.
    table.name("host", last=True)
    table.figure("when", justify="left")
    for r in records:
        p = r.provenance
        cells = (
            r.short_id,
            r.label,
            groups[r.key],
            r.model_name,
            r.target_name,
            *((settings_text(r) or "defaults",) * with_settings),
            shape_text(r.map_shape) + f" {r.kind}",
            p.device or "",
            _runtime_text(p),
            (p.hostname or "")
            + (f" (merged from {p.merged_from_bundle or 'a bundle'})" if p.merged else ""),
            (p.timestamp or "")[:19].replace("T", " "),
        )
        table.add_row(*cells)
    out.print(table)
    return status


def _runtime_text(provenance: Provenance) -> str:
    """``TF 2.21.0``, ``jax 0.10.2``: what computed a stored run, as narrow as the column
    of TensorFlow versions it replaces (a table must fit a terminal of 80 columns)."""
    runtime = provenance.runtime
    text = f"{'TF' if runtime == 'tensorflow' else runtime} {provenance.version}".strip()
    onednn = provenance.onednn_enabled
    known = RUNTIMES.get(runtime)
    # TensorFlow's kernels (Keras 3's or Keras 2's): the default depends on the CPU
    if known is not None and known.tensorflow_kernels and onednn is not None:
        text += f", oneDNN {on_off(onednn)}"
    if provenance.defaults_in_effect.xla:  # model.predict's choice; the label shows a set one
        text += ", XLA"
    if (precision := provenance.inference_precision) is not None:  # OpenVINO's, by the CPU
        text += f", {precision}"
    if (xnnpack := provenance.xnnpack) is not None:  # each session's own, read back
        text += f", XNNPACK {on_off(xnnpack)}"
    if (level := provenance.graph_optimization) is not None:
        text += f", opt {level}"
    return text
