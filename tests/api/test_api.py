"""The Python API on real runs of the demo: the same figures as the CLI, maps bit for bit from
HDF5, bundles read in place, HTML that loads nothing, and tables with or without pandas."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from html.parser import HTMLParser

import h5py
import numpy as np
import pytest
from PIL import Image

import segdiff_gui
from segdiff_gui import api
from segdiff_gui.api.arguments import configuration, preprocessing
from segdiff_gui.core.analysis import compare_maps
from segdiff_gui.core.config import parse_config_spec, parse_preprocessing
from segdiff_gui.storage import ResultCache
from tests.conftest import TESTS, copy_labelled, segdiff
from tests.fake_engine import FAKE_VERSION

pytestmark = pytest.mark.slow

SEED = ["device=cpu,batch=1", "device=cpu,batch=64"]


@pytest.fixture(scope="module")
def made(tmp_path_factory, demo, demo_cache):
    """The seed's CPU half on the demo (batch 1 and 64, two repeats), asked of the API in a
    cache that holds just those runs of the demo's matrix (``demo_cache``, whose real child
    computed them): served from it, with no child of its own. The API's runs in a real child
    are the hostile names' and the kernel's below."""
    seed = {f"cpu b{batch} r{repeat}" for batch in (1, 64) for repeat in (0, 1)}
    root = tmp_path_factory.mktemp("api-cache") / "cache"
    cache = copy_labelled(demo_cache, root, seed)
    model, images = demo
    study = api.run(model, images, SEED, repeats=2, cache=root, progress=False)
    assert {run.label for run in study.runs} == seed
    return study, cache


def cli_json(*args, fake=False):
    result = segdiff(*args, fake=fake)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def as_json(value):
    return json.loads(json.dumps(value, default=str))


def test_run_then_compare_is_segdiff_compare_json_figure_for_figure(made):
    study, cache = made
    assert [run.label for run in study.runs] == [
        "cpu b1 r0",
        "cpu b1 r1",
        "cpu b64 r0",
        "cpu b64 r1",
    ]
    for cutoff in (0.5, 0.3):  # the second is the study's analysis moved to another cutoff
        (group,) = cli_json("compare", "--json", "--cache", cache.root, "--cutoff", cutoff)
        assert group["image"] == "cell_00.png"
        mine = study.compare(cutoff)
        assert as_json(mine.to_dict()) == group
        rows = {row["label"]: row for row in group["comparisons"]}
        # As many as the maps say: the demo's batch moves it with oneDNN on, and with it off
        # on some CPUs only.
        direct = compare_maps(study.map("cpu b1 r0"), study.map("cpu b64 r0"), cutoff)
        assert rows["cpu b64 r0"]["differing_pixels"] == direct.differing_pixels
        table = mine.table  # pandas is installed in the test environment
        for label, row in rows.items():
            for figure in ("differing_pixels", "max_ulp", "max_abs", "flips", "bitwise_equal"):
                assert table.loc[label, figure] == row[figure]


def test_map_is_bit_identical_to_the_hdf5_dataset(made):
    study, cache = made
    for run in study.runs:
        with h5py.File(cache.run_path(run.key), "r") as handle:
            stored = handle["probabilities"][()]
        mine = study.map(run.label)
        assert mine.dtype == np.float32 and mine.shape == stored.shape
        assert mine.tobytes() == stored.astype("<f4").tobytes()
    # A configuration names its first repeat, a Run and an id prefix name themselves.
    first = study.runs[2]
    assert study.map("cpu b64").tobytes() == study.map(first).tobytes()
    assert study.map(first.id).tobytes() == study.map(first.key).tobytes()


@pytest.fixture(scope="module")
def bf16_made(tmp_path_factory, demo, demo_cache):
    """The demo at batch 1 in float32 and in bfloat16 (which moves its map on every CPU, where
    the batch may not), asked of the API in a cache holding those runs of the demo's matrix."""
    labels = {"cpu b1 r0", "cpu b1 bf16 r0"}
    root = tmp_path_factory.mktemp("api-bf16") / "cache"
    copy_labelled(demo_cache, root, labels)
    model, images = demo
    specs = ["device=cpu,batch=1", "device=cpu,batch=1,precision=mixed_bfloat16"]
    study = api.run(model, images, specs, repeats=1, cache=root, progress=False)
    assert {run.label for run in study.runs} == labels
    return study


def test_flips_at_risk_and_pixels_agree_with_the_maps(bf16_made):
    study, moved = bf16_made, "cpu b1 bf16 r0"
    reference, other = study.map("cpu b1 r0"), study.map(moved)
    # The seed's situation, made exact: a cutoff between the two values of the pixel that
    # moved most flips that pixel, and the table gives both float32 values.
    row, col = np.unravel_index(np.argmax(np.abs(reference - other)), reference.shape)
    low, high = sorted((reference[row, col], other[row, col]))
    cutoff = float(np.float32((float(low) + float(high)) / 2))
    assert low < cutoff <= high
    flips = study.flips(moved, cutoff=cutoff)
    assert flips.dtype == bool and flips[row, col]
    assert np.array_equal(flips, (reference >= cutoff) != (other >= cutoff))
    pixels = study.pixels(moved, cutoff=cutoff)
    assert len(pixels) == int(flips.sum()) * len(study.runs)  # a row per pixel and run
    hit = pixels[(pixels["row"] == row) & (pixels["column"] == col)].set_index("run")
    assert hit.loc["cpu b1 r0", "value"] == reference[row, col]
    assert hit.loc[moved, "value"] == other[row, col]
    assert np.float32(hit.loc[moved, "exact"]) == other[row, col]
    assert hit.loc[moved, "bits"] == f"0x{other[row, col].view(np.uint32):08x}"
    assert hit.loc["cpu b1 r0", "ulp"] == 0 and hit.loc[moved, "ulp"] > 0
    assert set(hit["why"]) == {"flip"}
    assert study.at_risk(cutoff)[row, col]
    # At a cutoff of 0 every pixel is foreground in both: no flip, and the empty table keeps
    # its columns.
    empty = study.pixels(moved, cutoff=0.0)
    assert len(empty) == 0 and "ulp" in empty.columns
    curve = study.curve(moved, cutoffs=[cutoff, 0.0])
    assert list(curve[moved]) == [int(flips.sum()), 0]


def test_diagnose_and_explain_are_the_cli_s(made):
    study, cache = made
    (group,) = cli_json("diagnose", "--json", "--cache", cache.root)
    diagnosis = study.diagnose()
    assert as_json(diagnosis.to_dict()) == group
    assert [heading for heading, _ in diagnosis.topics()][0] == "Is it repeatable?"
    # Named: which run differs most from the reference is the CPU's kernels' to say.
    explanation = study.explain("cpu b1 r0", "cpu b64 r0")
    expected = cli_json(
        "explain", "--from", "cpu b1 r0", "--to", "cpu b64 r0", "--json", "--cache", cache.root
    )
    assert as_json(explanation.to_dict()) == expected
    assert "batch" in repr(explanation)


def test_open_cache_groups_and_open_bundle_reads_without_merging(made, tmp_path, monkeypatch):
    study, cache = made
    runs = api.open_cache(cache.root)
    assert len(runs) >= 1 and runs.damaged == []
    bundle = tmp_path / "results.h5"
    assert segdiff("bundle", bundle, "--cache", cache.root).returncode == 0
    before = bundle.read_bytes()
    empty = tmp_path / "default-cache"
    monkeypatch.setenv("SEGDIFF_CACHE", str(empty))
    opened = api.open_bundle(bundle)
    from_bundle = opened.study(image="cell_00.png", ref="cpu b1 r0")
    assert from_bundle.compare().rows == runs.study(image="cell_00.png").compare().rows
    assert from_bundle.map("cpu b64 r0").tobytes() == study.map("cpu b64 r0").tobytes()
    assert bundle.read_bytes() == before
    assert not empty.exists()  # nothing merged, no cache made


def test_a_damaged_map_in_a_bundle_costs_only_its_run(made, tmp_path):
    _, cache = made
    bundle = tmp_path / "results.h5"
    assert segdiff("bundle", bundle, "--cache", cache.root).returncode == 0
    runs = api.open_bundle(bundle)
    victim = runs.study(image="cell_00.png").runs[2]
    with h5py.File(bundle, "r+") as handle:  # one value changed: the checksum no longer holds
        dataset = handle[f"runs/{victim.key}/probabilities"]
        dataset[0, 0] = dataset[0, 0] + 1
    study = api.open_bundle(bundle).study(image="cell_00.png")
    with pytest.warns(UserWarning, match=f"left out {victim.label}"):
        rows = study.compare().rows
    assert victim.label not in {row["label"] for row in rows} and len(rows) == 2
    assert study.damaged[0].startswith(f"{victim.label}: ") and "checksum" in study.damaged[0]
    assert victim.label not in [run.label for run in study.runs]
    with pytest.raises(api.InputError, match="is left out: its stored map cannot be read"):
        study.map(victim.label)
    assert study.at_cutoff(0.3).damaged == study.damaged  # a copy knows it too
    fresh = api.open_bundle(bundle).study(image="cell_00.png")
    with pytest.raises(api.InputError, match="is the reference, and its map cannot be read"):
        fresh.with_reference(victim.label).compare()
    # Listing the runs reads the maps first: the damaged run is never listed.
    with pytest.warns(UserWarning):
        listed = [run.label for run in api.open_bundle(bundle).study(image="cell_00.png").runs]
    assert victim.label not in listed and len(listed) == 3
    swept = api.open_bundle(bundle).study(image="cell_00.png").sweep()  # the others, summed
    assert swept.damaged and "could not be read" in swept.sentences[-1]


def test_html_has_no_script_and_loads_nothing(made, demo, tmp_path):
    study, cache = made
    # Names are the user's (or a crafted bundle's) text: markup in them must stay text.
    hostile = tmp_path / "<img src=x onerror=alert(1)>"
    hostile.mkdir()
    model = hostile / "<b onmouseover=alert(2)>.keras"
    model.write_bytes(demo[0].read_bytes())
    image = hostile / "<svg onload=alert(3)>.png"
    image.write_bytes(demo[1][0].read_bytes())
    # bfloat16 moves the map on one image, where batch 64 would compute 64 of them.
    configs = ["batch=1", "precision=bf16"]
    named = api.run(model, image, configs, repeats=1, cache=tmp_path / "c", progress=False)

    class Tags(HTMLParser):
        def __init__(self):
            super().__init__()
            self.tags, self.sources = [], []

        def handle_starttag(self, tag, attrs):
            self.tags.append(tag)
            for name, value in attrs:
                assert not name.startswith("on"), (tag, name)  # no event handler
                if name in ("src", "href") and tag != "a":
                    self.sources.append(value)

    outputs = [
        study._repr_html_(),
        study.compare()._repr_html_(),
        study.diagnose()._repr_html_(),
        study.explain()._repr_html_(),
        api.open_cache(cache.root)._repr_html_(),
        named._repr_html_(),
        named.compare()._repr_html_(),
        named.diagnose()._repr_html_(),
        named.explain()._repr_html_(),
        api.open_cache(tmp_path / "c")._repr_html_(),
    ]
    for html in outputs:
        parser = Tags()
        parser.feed(html)
        assert not {"script", "link", "iframe", "object", "embed", "style"} & set(parser.tags)
        assert all(source.startswith("data:image/png;base64,") for source in parser.sources)
        assert "url(" not in html and "@import" not in html
    assert outputs[0].count("<img") == 3  # the reference, the largest difference, the flips


def test_reprs_read_plainly(made):
    study, cache = made
    text = repr(study)
    assert text.startswith("<Study unet_sigmoid.keras on cell_00.png: 4 runs against cpu b1 r0")
    assert "cpu b64: bitwise deterministic over 2 repeats" in text
    assert "Is it repeatable?" in repr(study.diagnose())
    assert "unet_sigmoid.keras" in repr(api.open_cache(cache.root))


def test_exports_and_report_write_the_cli_s_files(made, tmp_path):
    study, cache = made
    mask = study.export_mask(tmp_path / "flips.png", "cpu b64 r0", cutoff=0.3)
    assert np.array_equal(np.asarray(Image.open(mask)) > 0, study.flips("cpu b64 r0", 0.3))
    csv = study.export_pixels(tmp_path / "flips.csv", "cpu b64 r0", cutoff=0.3, at_risk=True)
    assert csv.read_text().splitlines()[0].startswith("row,column,why")
    html, report = study.report(html=tmp_path / "r.html", json=tmp_path / "r.json")
    data = json.loads(report.read_text())
    cli = tmp_path / "cli.json"
    result = segdiff("report", "--json", cli, "--cache", cache.root, "--image", "cell_00.png")
    assert result.returncode == 0, result.stderr
    expected = json.loads(cli.read_text())
    for made_at in (data, expected):
        made_at.pop("created")
    assert data == expected  # the same report as segdiff report's, but for when it was made
    assert "<script" not in html.read_text()


def test_a_run_served_from_the_cache_shows_no_bar_and_starts_no_child(made, demo, capsys):
    study, cache = made
    again = api.run(*demo, SEED, repeats=2, cache=cache.root)
    assert capsys.readouterr().err == ""  # nothing to wait for: no bar
    assert [run.key for run in again.runs] == [run.key for run in study.runs]
    assert "tensorflow" not in sys.modules and "keras" not in sys.modules


def test_bad_input_is_one_line_naming_what_is_wrong(made, demo, tmp_path):
    study, cache = made
    with pytest.raises(api.InputError, match="missing.keras: no such model file"):
        api.run(tmp_path / "missing.keras", cache.root, progress=False)
    with pytest.raises(api.InputError) as error:
        study.map("gpu:0 b1 r0")
    assert str(error.value) == (
        "gpu:0 b1 r0: names no run of this study (runs: cpu b1 r0, cpu b1 r1, cpu b64 r0, "
        "cpu b64 r1; see study.runs_table())"
    )
    with pytest.raises(api.InputError, match="cutoff: is 55: give a cutoff between 0 and 1"):
        study.compare(55)
    with pytest.raises(api.InputError, match="has no setting 'scales'"):
        api.run("model.keras", "images", preprocess={"scales": 2})
    (tmp_path / "mine.txt").write_text("the user's file")
    with pytest.raises(api.InputError):
        api.open_cache(tmp_path)
    assert (tmp_path / "mine.txt").read_text() == "the user's file"
    with pytest.raises(api.InputError, match="stored runs only"):
        api.open_cache(cache.root).study(image="cell_00.png").explain(*SEED)
    with pytest.raises(api.InputError, match="bacth=2: unknown config key 'bacth'"):
        study.explain("batch=1", "bacth=2")
    with pytest.raises(api.InputError, match="no such cache folder"):
        api.open_cache(tmp_path / "nowhere")
    with pytest.raises(api.InputError, match="is not a segdiff cache"):
        api.open_cache(tmp_path)
    with pytest.raises(api.InputError, match="cutoff: is 2"):
        study.curve(cutoffs=[0.5, 2])
    model, images = demo
    before = cache.keys()
    for wrong, message in [
        (dict(configs=[]), "configs: is empty"),
        (dict(images=np.zeros((256, 256), np.uint8)), "images: is an array"),
        (dict(repeats="two"), "repeats: is 'two': give a whole number of at least 1"),
        (dict(timeout=-5), "timeout: is -5: give a positive number of seconds"),
        (dict(configs=8), "8: is not a configuration"),
    ]:
        arguments = {"model": model, "images": images, "cache": cache.root, **wrong}
        with pytest.raises(api.InputError, match=message):
            api.run(**arguments)
    assert cache.keys() == before  # refused before any run


def test_a_setting_that_mends_an_error_is_named_as_the_api_s_argument(demo, tmp_path):
    """The lower rooms name the setting; the API adds its argument (the CLI its flag)."""
    from segdiff_gui.api.hints import with_argument

    small = tmp_path / "small.png"
    Image.fromarray(np.zeros((40, 40), np.uint8)).save(small)
    with pytest.raises(api.InputError) as error:
        api.run(demo[0], small, "batch=1", repeats=1, cache=tmp_path / "cache", progress=False)
    assert str(error.value).endswith(
        'it needs resizing (bilinear) — pass preprocess={"resize": "bilinear"}'
    )
    assert error.value.fix == "resize=bilinear"
    for fix, argument in [
        ("activation=sigmoid", 'activation="sigmoid"'),
        ("color=rgb", 'preprocess={"color": "rgb"}'),
        ("trust_model=on", "trust_model=True"),
        ("output", "output=NAME or INDEX"),
    ]:
        assert str(with_argument(api.InputError("m.keras", "…", fix))).endswith(
            f"… — pass {argument}"
        )


def test_configurations_and_preprocessing_mean_what_the_cli_s_do():
    spec = parse_config_spec("device=cpu,batch=64,xla=on,threads=1")
    assert configuration({"device": "cpu", "batch": 64, "xla": True, "threads": 1}) == spec
    assert (
        configuration("device=cpu,batch=64,xla=on,threads=1") == spec
        and configuration(spec) == spec
    )
    assert preprocessing({"scale": 1 / 255, "mean": [0.5, 0.25], "color": "rgb"}) == (
        parse_preprocessing("1/255", "0.5,0.25", None, "rgb")
    )
    # One value for every channel, as --mean 0.5 --std 0.1 take it.
    assert preprocessing({"mean": 0.5, "std": 0.1}) == parse_preprocessing(None, "0.5", "0.1")
    for wrong in ("false", 1, None):  # a string must never turn safe mode off
        with pytest.raises(api.InputError, match="trust_model: is .*: give True or False"):
            api.run("m.keras", "images", trust_model=wrong)
    with pytest.raises(api.InputError, match="batch"):
        configuration({"batch": 0})


def test_the_package_re_exports_the_api_lazily():
    assert set(api.__all__) == segdiff_gui._API_NAMES
    assert all(getattr(api, name) is getattr(segdiff_gui, name) for name in api.__all__)
    assert segdiff_gui.run is api.run and "run" in dir(segdiff_gui)
    code = (
        "import sys, segdiff_gui\n"
        "assert not hasattr(segdiff_gui, 'nothing') and not hasattr(segdiff_gui, 'resources')\n"
        "assert 'segdiff_gui.api' not in sys.modules  # an unknown name imports nothing\n"
        "assert segdiff_gui.api.run is segdiff_gui.run  # the module itself, on first access\n"
        "print('ok')"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "ok", result.stderr


NO_PANDAS = """
import sys
sys.modules["pandas"] = None  # importing it now raises ImportError, as where it is missing
import segdiff_gui as segdiff
runs = segdiff.open_cache(sys.argv[1])
study = runs.study(image="cell_00.png")
table = study.compare(0.3).table
assert isinstance(table, list) and table[0]["label"] == "cpu b1 r1", table
assert isinstance(study.pixels("cpu b64 r0", cutoff=0.3), list)
assert isinstance(runs.table(), list) and isinstance(study.curve(), list)
assert "<img" in study._repr_html_()
loaded = {"tensorflow", "keras", "PySide6", "pyqtgraph", "matplotlib"} & set(sys.modules)
assert not loaded, loaded
print("ok")
"""


def test_the_api_works_without_pandas_and_without_a_display(made):
    _, cache = made
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.pop("QT_QPA_PLATFORM", None)
    result = subprocess.run(
        [sys.executable, "-c", NO_PANDAS, str(cache.root)], capture_output=True, text=True, env=env
    )
    assert result.stdout.strip() == "ok", result.stderr


KERNEL = """
import json, os, sys
import tensorflow  # the kernel has its own TensorFlow, set up its own way
os.environ.update(
    TF_DETERMINISTIC_OPS="1", OMP_NUM_THREADS="1",
    TF_NUM_INTRAOP_THREADS="1", KERAS_BACKEND="jax", TF_USE_LEGACY_KERAS="1",
)
import segdiff_gui as segdiff
study = segdiff.run(segdiff.demo_model(), segdiff.demo_images(), "device=cpu,batch=1",
                    repeats=1, cache=sys.argv[1], progress=False)
(run,) = study.runs
p = run.provenance
print(json.dumps(p.environment))
print(run.key, p.runtime, p.onednn_enabled, p.intra_op_threads, p.op_determinism)
"""


def test_a_kernel_s_tensorflow_and_environment_do_not_reach_the_runs(made, tmp_path):
    """The runs of a kernel that imported TensorFlow and set every variable a knob controls
    are the runs of a clean shell, bit for bit (one thread would change the demo's maps;
    KERAS_BACKEND would change the runtime). TF_ENABLE_ONEDNN_OPTS is not among them: at
    oneDNN's default it is the user's own (tests/runner/test_failures.py)."""
    study, _ = made
    clean = study.runs[0]
    result = subprocess.run(
        [sys.executable, "-c", KERNEL, str(tmp_path / "kernel-cache")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    *_, environment, figures = result.stdout.splitlines()
    key, runtime, onednn, threads, determinism = figures.split()
    # What the child ran with, as it recorded it: none of the kernel's variables.
    assert json.loads(environment) == clean.provenance.environment
    assert key == clean.key
    assert (runtime, onednn, determinism) == (
        "tensorflow",
        str(clean.provenance.onednn_enabled),
        "False",
    )
    assert threads == str(clean.provenance.intra_op_threads)
    kernel_map = ResultCache(tmp_path / "kernel-cache").read_run(key).probabilities
    assert kernel_map.tobytes() == study.map(clean).tobytes()


INTERRUPTED = """
import sys
import segdiff_gui as segdiff
from segdiff_gui.runner import child
sys.path.insert(0, sys.argv[2])
from fake_engine import engine_command  # the fake engine's child hangs in its run
child.engine_command = engine_command
try:
    segdiff.run(segdiff.demo_model(), segdiff.demo_images(), "device=cpu,batch=1",
                repeats=1, cache=sys.argv[1], progress=False)
except KeyboardInterrupt as stop:
    print("interrupted:", stop)
"""


def test_an_interrupted_cell_kills_the_children(demo, tmp_path):
    import signal
    import time

    import psutil

    from tests.conftest import engine_children

    script = subprocess.Popen(
        [sys.executable, "-c", INTERRUPTED, str(tmp_path / "cache"), str(TESTS)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "FAKE_ENGINE_HANG_ON": "cpu b1 r0"},
    )
    deadline = time.monotonic() + 120
    while not (children := engine_children(script.pid)):
        assert time.monotonic() < deadline, "no engine child started"
        time.sleep(0.1)
    time.sleep(1.0)
    script.send_signal(signal.SIGINT)  # what a notebook's stop button sends its kernel
    interrupted = time.monotonic()
    out, err = script.communicate(timeout=60)
    # The hung child is killed at once, not after close()'s 5 s grace for a child to finish.
    assert time.monotonic() - interrupted < 4.0
    assert "interrupted: the matrix was interrupted" in out, err
    gone, alive = psutil.wait_procs(children, timeout=10)
    assert alive == []
    assert ResultCache(tmp_path / "cache").keys() == []  # the hung run never finished


def test_sweep_and_explain_specs_compute_what_they_need(demo, tmp_path, fake_engine):
    """On four of the demo's images, in a cache of its own: the sweep adds runs on the other
    three, which the other tests must not see. What the API computes and how it reads it back
    is the point, not the maps: the fake engine computes them (real children do for the same
    workflows in tests/cli/test_explain_commands.py: the sweep's in
    test_sweep_dice_and_shards_merged_equal_the_unsharded_sweep, explain's specs in
    test_explain_reports_what_direct_comparisons_give)."""
    model, images = demo
    cache = ResultCache(tmp_path / "cache")
    study = api.run(model, images[:4], SEED, repeats=2, cache=cache.root, progress=False)
    masks = images[0].parent.parent / "masks"
    sweep = study.sweep(masks=masks)
    assert len(sweep.summary.images) == 4
    expected = cli_json("sweep", "--json", "--cache", cache.root, "--masks", masks, fake=True)
    assert as_json(sweep.to_dict()) == expected
    # A configuration's label names it on every image, here and on the command line.
    against = study.sweep(ref="cpu b64")
    assert against.summary.reference == "cpu b64" and against.failures == []
    expected = cli_json("sweep", "--json", "--cache", cache.root, "--ref", "cpu b64", fake=True)
    assert as_json(against.to_dict()) == expected
    assert sweep.table.loc["cpu b1", "is_reference"]
    assert sweep.table.loc["cpu b64", "mean_dice"] is not None
    before = set(cache.keys())
    explanation = study.explain("device=cpu,batch=1", "device=cpu,batch=1,threads=1")
    assert len(set(cache.keys()) - before) == 2  # threads=1, two repeats, in one child
    assert explanation.to_dict()["target"] == "cpu b1 threads1"
    assert all(record.provenance.version == FAKE_VERSION for record in cache.records())


def test_sweep_computes_the_test_set_alone_as_segdiff_run_sweep_does(demo, tmp_path, fake_engine):
    """``segdiff.sweep`` makes the runs ``segdiff run --sweep`` makes, and no target image's
    own first (``run(…).sweep()`` computes one: a child's start-up more)."""
    model, images = demo
    masks = images[0].parent.parent / "masks"
    cache = tmp_path / "cache"
    swept = api.sweep(model, images[:4], SEED, repeats=2, masks=masks, cache=cache, progress=False)
    assert len(swept.summary.images) == 4 and swept.failures == []
    specs = [word for spec in SEED for word in ("--config", spec)]
    cli_json("run", model, *images[:4], *specs, "--repeats", "2", "--sweep", "--json",
             "--cache", tmp_path / "cli", fake=True)  # fmt: skip
    assert set(ResultCache(cache).keys()) == set(ResultCache(tmp_path / "cli").keys())
    assert len(ResultCache(cache).keys()) == 4 * len(SEED) * 2
    expected = cli_json("sweep", "--json", "--cache", cache, "--masks", masks, fake=True)
    assert as_json(swept.to_dict()) == expected


def test_your_own_map_is_imported_and_reproduced_from_python(made, tmp_path, monkeypatch):
    """``import_maps``, ``reproduce`` and ``Study.reproduce`` over the runner's
    workflows. The demo's own cpu b1 map is found at once; the same map one ULP off in one
    pixel is found by no configuration, and the nearest is named.

    The search that finds nothing runs in a copy of the cache, its trials computed by the fake
    engine: every trial is compared with the map, whatever computed it, and the nearest is the
    real cpu b1 run the copy holds. Real children compute the search's trials in
    tests/cli/test_your_pipeline.py (the plain Keras script's maps, found by ``reproduce``)."""
    study, made_cache = made
    model, images = segdiff_gui.demo_model(), segdiff_gui.demo_images()
    mine = study.map("cpu b1 r0").copy()
    found = study.reproduce(mine)
    assert found.match == "cpu b1" and "bit for bit (the defaults)" in found.sentence
    assert found.run_arguments["configs"] == "batch=1"
    again = segdiff_gui.run(model, **found.run_arguments, cache=made_cache, progress=False)
    assert again.map(again.runs[0].label).tobytes() == mine.tobytes()
    cache = ResultCache(tmp_path / "cache")
    shutil.copytree(made_cache.root, cache.root)
    from segdiff_gui.runner import child
    from tests.fake_engine import engine_command

    monkeypatch.setattr(child, "engine_command", engine_command)
    off = mine.copy()
    off[5, 7] = np.nextafter(off[5, 7], np.float32(1))
    np.save(tmp_path / "off.npy", off)
    missed = segdiff_gui.reproduce(tmp_path / "off.npy", model, images[:1], cache=cache,
                                   progress=False)  # fmt: skip
    assert missed.match is None and missed.run_arguments is None
    assert missed.sentence.startswith("no configuration reproduces it: the nearest is cpu b1")
    assert "at 1 ULP (1 of 65,536 pixels)" in missed.sentence
    assert len(missed.to_dict()["trials"]) > 1  # the singles were tried as well
    keys = segdiff_gui.import_maps(tmp_path / "off.npy", model, images[0], label="one off",
                                   notes={"device": "colab T4"}, cache=cache)  # fmt: skip
    runs = segdiff_gui.open_cache(cache.root)
    mine_group = next(s for s in runs.studies if keys[0] in {run.key for run in s.runs})
    (imported,) = [run for run in mine_group.runs if run.key == keys[0]]
    assert imported.label == "imported: one off r0"
    assert mine_group.reference.label == "cpu b1 r0"  # an imported map is never the reference
    assert imported.provenance.imported.notes == {"device": "colab T4"}
