import csv
import json

import numpy as np
import pytest

from segdiff_gui.core.analysis import ulp_distance
from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.errors import InputError
from segdiff_gui.core.study import GroupAnalysis, StudyRun
from segdiff_gui.io.html_report import write_html_report
from segdiff_gui.io.masks import read_mask, write_mask
from segdiff_gui.io.reports import report_data, write_json_report
from segdiff_gui.io.tables import write_pixel_csv
from tests.exact_runs import assert_exact_pixels, bf16_study
from tests.factories import seed_study


@pytest.mark.parametrize("suffix", [".png", ".tif", ".npy"])
def test_mask_round_trip_equals_the_computed_mask(tmp_path, suffix):
    study = seed_study()
    mask = study.flips(study.others[0])
    path = write_mask(tmp_path / f"flips{suffix}", mask)
    assert np.array_equal(read_mask(path), mask) and mask.sum() == 1
    if suffix == ".png":
        from PIL import Image

        with Image.open(path) as image:
            assert image.mode == "L" and set(np.unique(np.asarray(image))) == {0, 255}
    with pytest.raises(InputError, match="mask files end in"):
        write_mask(tmp_path / "flips.jpg", mask)


def test_pixel_csv_holds_exact_values_ulps_and_classes(tmp_path):
    study = seed_study()
    count = write_pixel_csv(tmp_path / "f.csv", study, study.others[0])
    rows = list(csv.DictReader((tmp_path / "f.csv").open()))
    assert count == 1 and len(rows) == 1
    row = rows[0]
    assert (row["row"], row["column"], row["why"]) == ("1", "2", "flip")
    assert row["cpu b1 r0 value"] == "0.549857" and row["gpu:0 b1 r0 value"] == "0.550076"
    assert row["cpu b1 r0 bits"] == "0x3f0cc36e"
    assert np.float32(row["gpu:0 b1 r0 value"]) == np.float32(0.550076)
    expected = ulp_distance(np.float32(0.549857), np.float32(0.550076))
    assert int(row["gpu:0 b1 r0 ulp"]) == int(expected) > 0
    assert (row["cpu b1 r0 class"], row["gpu:0 b1 r0 class"]) == ("0", "1")
    with_risk = write_pixel_csv(tmp_path / "r.csv", study, study.others[0], include_at_risk=True)
    assert with_risk == int((study.flips(study.others[0]) | study.at_risk).sum()) >= 1


def test_json_and_html_reports(tmp_path):
    study = seed_study()
    provenance = {
        "a" * 64: {"device": "cpu:0", "environment": {"TF_ENABLE_ONEDNN_OPTS": "1"}},
        "b" * 64: {"device": "gpu:0", "tf_version": "2.21.0"},
    }
    data = report_data(study, provenance, {"model": "m.keras", "image": "cell.png"})
    write_json_report(tmp_path / "r.json", data)
    loaded = json.loads((tmp_path / "r.json").read_text())
    assert loaded["comparisons"][0]["flips"] == 1 and loaded["cutoff"] == 0.55
    assert loaded["runs"][1]["provenance"]["device"] == "gpu:0"
    assert len(loaded["flip_curves"]["gpu:0 b1 r0"]) == len(loaded["flip_curves"]["cutoffs"])
    assert loaded["pairwise"]["flips"] == [[0, 1], [1, 0]]
    html = write_html_report(tmp_path / "r.html", data, study, np.zeros((4, 5), np.uint8))
    text = html.read_text()
    assert text.count("data:image/png;base64,") == 3 and "<svg" in text
    assert "gpu:0 b1 r0" in text and "http" not in text.replace("http://www.w3.org", "")


def test_a_notebook_s_pictures_are_small_and_keep_a_single_flipped_pixel():
    """A 2048² study shown in a notebook cell: thumbnails of at most twice the shown width,
    and the one flipped pixel still red in the reduced flip picture."""
    import base64
    import io
    import re

    from PIL import Image

    from segdiff_gui.io.html_report import study_fragment

    reference = np.full((2048, 2048), 0.2, dtype=np.float32)
    other = reference.copy()
    reference[1001, 7], other[1001, 7] = 0.4999999, 0.5000001  # flips at 0.5
    study = GroupAnalysis(
        [
            StudyRun("a" * 64, "cpu b1 r0", RunConfig(), 0, reference),
            StudyRun("b" * 64, "cpu b64 r0", RunConfig(batch=64), 0, other),
        ],
        cutoff=0.5,
    )
    html = study_fragment(study, None, "big", picture_width=200)
    pictures = [
        np.asarray(Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB"))
        for data in re.findall(r'src="data:image/png;base64,([^"]+)"', html)
    ]
    assert [p.shape[:2] for p in pictures] == [(342, 342)] * 3  # 2048 in blocks of 6 ≤ 400
    flipped = np.all(pictures[2] == [255, 0, 40], axis=-1)
    assert flipped.sum() == 1 and flipped[1001 // 6, 7 // 6]
    assert len(html) < 200_000


def _exact_columns(path):
    return list(csv.DictReader(path.open()))


def test_pixel_csv_gives_the_exact_run_s_value_and_class_at_each_pixel(tmp_path):
    """Beside an exact run, each flipped (and at-risk) pixel's exact value (a
    float64, whole), the exact class at the cutoff and whether float32 can decide it, each
    recomputed here from the exact map."""
    study = bf16_study()
    bf16 = study.others[0]
    count = write_pixel_csv(tmp_path / "f.csv", study, bf16, include_at_risk=True)
    rows = _exact_columns(tmp_path / "f.csv")
    assert count == len(rows) > 3
    assert_exact_pixels(rows, study.exact.probabilities, study.cutoff)
    # The pixel a hair below the cutoff is background, and float32 cannot decide it.
    (hair,) = [r for r in rows if (r["row"], r["column"]) == ("0", "1")]
    assert (hair["exact class"], hair["float32 can decide"]) == ("0", "False")
    without = GroupAnalysis(study.runs, study.cutoff)
    write_pixel_csv(tmp_path / "w.csv", without, without.others[0])
    header = (tmp_path / "w.csv").read_text().splitlines()[0]
    assert "exact class" not in header and "float64" not in header  # no exact run, no columns


def test_pixel_csv_of_a_softmax_map_gives_the_exact_probability_of_the_reference_class(tmp_path):
    rng = np.random.default_rng(4)
    logits = rng.standard_normal((6, 7, 3))
    exact = np.exp(logits) / np.exp(logits).sum(axis=-1, keepdims=True)
    exact[0, 0] = [0.4, 0.4, 0.2]  # tied in the exact map: no decision
    reference = exact.astype(np.float32)
    other = reference.copy()
    other[..., 0] += np.float32(0.05)  # moves class 0 ahead at some pixels
    study = GroupAnalysis(
        [
            StudyRun("a" * 64, "cpu b1 r0", RunConfig(), 0, reference),
            StudyRun("b" * 64, "gpu:0 b1 r0", RunConfig(device="gpu:0"), 0, other),
        ],
        exact=StudyRun("e" * 64, "cpu b1 fp64 r0", RunConfig(precision="float64"), 0, exact),
    )
    write_pixel_csv(tmp_path / "s.csv", study, study.others[0])
    rows = _exact_columns(tmp_path / "s.csv")
    assert len(rows) == int(study.flips(study.others[0]).sum()) > 0
    for row in rows:
        r, c, klass = int(row["row"]), int(row["column"]), int(row["reference class"])
        top_two = np.sort(exact[r, c])[-2:]
        decides = top_two[1] - top_two[0] > np.spacing(np.float32(top_two[1]))
        assert np.float64(row["exact p(reference class) (float64)"]) == exact[r, c, klass]
        assert row["exact class"] == str(int(np.argmax(exact[r, c])))
        assert row["float32 can decide"] == str(bool(decides))
