"""The exact reference in the Python API: a study whose matrix holds a float64 run
compares its float32 runs as ever, keeps the exact run apart (never counted, compared or read
as one of them), and names it in one line where it is asked for as one. Engine children are
the fake engine's (its exact map is float64, as the real one's)."""

from __future__ import annotations

import pytest

from segdiff_gui import api
from segdiff_gui.core.errors import InputError
from segdiff_gui.resources import demo_images, demo_model


def test_a_study_with_an_exact_run_compares_its_float32_runs(fake_engine, tmp_path):
    specs = ["batch=1", "batch=4,context=copies", "precision=fp64"]
    study = api.run(demo_model(), demo_images()[:1], specs, repeats=1, cache=tmp_path / "c",
                    progress=False)  # fmt: skip
    assert repr(study).startswith("<Study unet_sigmoid.keras on cell_00.png: 2 runs against")
    assert [row["label"] for row in study.compare().rows] == ["cpu b4 copies r0"]
    with pytest.raises(InputError, match="cpu b1 fp64 r0: names no run of this study"):
        study.map("cpu b1 fp64 r0")
    (opened,) = api.open_cache(tmp_path / "c")
    assert [run.label for run in opened.runs] == ["cpu b1 r0", "cpu b4 copies r0"]
