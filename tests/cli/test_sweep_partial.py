"""A sweep read from a cache that holds one configuration on 1 of 4 images beside the
reference on all 4 (what a run on one image followed by a sweep leaves):
"Δ Dice +0.00" stood beside a mean Dice other than the reference's. The change is over the
images both cover, and the command line and the API say how many that is."""

from __future__ import annotations

import json

from segdiff_gui import api
from segdiff_gui.cli.main import main
from tests.factories import partial_sweep

OVER = "+0.00e+00 over 1 of 4 images"


def test_the_command_line_compares_over_the_images_both_cover_and_says_so(tmp_path, capsys):
    cache, masks = partial_sweep(tmp_path)
    args = ["sweep", "--cache", str(cache.root), "--masks", str(masks)]
    assert main(args) == 0
    out = capsys.readouterr().out
    # In the table, Δ Dice and Δ IoU, each cell on lines of its own (the table fits 160
    # columns): "+0.00e+00", "over 1 of 4", "images".
    (row,) = [line for line in out.splitlines() if line.startswith("│ cpu b64 ")]
    assert row.count("+0.00e+00") == 2 and out.count("over 1 of 4") == 2
    assert max(len(line) for line in out.splitlines()) <= 160
    assert "cpu b64 (1 image)" in " ".join(out.split())  # the partial one, named as such
    assert main([*args, "--json"]) == 0
    rows = {r["configuration"]: r for r in json.loads(capsys.readouterr().out)["configurations"]}
    partial, reference = rows["cpu b64"], rows["cpu b1"]
    assert partial["delta_images"] == 1 and partial["delta_mean_dice"] == 0.0
    assert partial["mean_dice"] == 1.0 and reference["mean_dice"] < 1.0
    assert reference["delta_images"] == 4


def test_the_api_s_sweep_says_how_many_images_a_change_is_over(tmp_path):
    cache, masks = partial_sweep(tmp_path)
    sweep = api.open_cache(cache.root).study(image="a.png").sweep(masks=masks)
    assert OVER in repr(sweep) and OVER in sweep._repr_html_()
    assert sweep.to_dict()["configurations"][1]["delta_images"] == 1
