"""The matrix editor offers what the knob registry offers, and reaches every configuration."""

from segdiff_gui.core.config import RunConfig
from segdiff_gui.ui.matrix_editor import MatrixEditor
from tests.core.knob_fixture import REGISTRY, FastConfig


def test_the_editor_offers_a_knob_added_to_its_registry(qtbot):
    editor = MatrixEditor(knobs=REGISTRY, base=FastConfig())
    qtbot.addWidget(editor)
    box = editor.knobs["fast math"]
    assert "Reassociate" in box.toolTip() and "sums in any order" in box.toolTip()
    editor.batches.setText("1")
    box.setChecked(True)
    assert editor.configs() == [FastConfig(), FastConfig(fastmath=True)]
    editor.load([FastConfig(), FastConfig(fastmath=True)], repeats=3)
    assert box.isChecked() and editor.repeats.value() == 3


def test_every_variant_of_segdiffs_registry_is_a_checkbox_and_load_round_trips(qtbot):
    editor = MatrixEditor()
    qtbot.addWidget(editor)
    assert list(editor.knobs) == [
        "JAX", "PyTorch", "LiteRT", "LiteRT fp16", "LiteRT int8 (dynamic)", "LiteRT int8",
        "ONNX Runtime", "OpenVINO", "Keras 2", "determinism", "TF32 off", "oneDNN on",
        "oneDNN off", "1 thread", "XLA", "no XLA", "bfloat16", "float16", "exact (float64)",
        "TF32 emulated", "fresh processes",
    ]  # fmt: skip
    editor.set_devices(["cpu", "gpu:0"])
    configs = [
        RunConfig(),
        RunConfig(batch=64),
        RunConfig(device="gpu:0"),
        RunConfig(device="gpu:0", batch=64),
        RunConfig(device="gpu:0", tf32=False),  # a GPU-only variant: no CPU run is added
        RunConfig(xla=True),
        RunConfig(device="gpu:0", xla=True),
        RunConfig(emulate="tf32"),  # a CPU-only variant: no GPU run is added, none refused
        RunConfig(runtime="jax"),
        RunConfig(runtime="jax", device="gpu:0"),
        RunConfig(runtime="onnxruntime"),
        RunConfig(runtime="onnxruntime", device="gpu:0"),
        RunConfig(repeat_scope="fresh"),
        RunConfig(device="gpu:0", repeat_scope="fresh"),
        RunConfig(batch=8, position=3, threads=2),  # no checkbox makes it: an extra line
        RunConfig(device="gpu:0", batch=8, position=3, threads=2),
    ]
    editor.load(configs, repeats=2)
    assert editor.extra.toPlainText() == "batch=8,position=3,threads=2"
    assert editor.knobs["TF32 off"].isChecked() and editor.knobs["XLA"].isChecked()
    assert editor.knobs["JAX"].isChecked() and editor.knobs["fresh processes"].isChecked()
    assert not editor.knobs["PyTorch"].isChecked()
    assert sorted(editor.configs(), key=RunConfig.to_spec) == sorted(configs, key=RunConfig.to_spec)
    assert editor.knobs["TF32 emulated"].isChecked() and editor.extra_problem.isHidden()


def test_a_configuration_its_checkbox_cannot_make_on_its_device_is_loaded_as_a_line(qtbot):
    """TF32 off on the CPU (a diagnosis's "run them" may add it): its checkbox runs only on
    GPUs, so it is a line of its own, and the matrix read back still holds it."""
    editor = MatrixEditor()
    qtbot.addWidget(editor)
    configs = [RunConfig(), RunConfig(tf32=False)]
    editor.load(configs, repeats=1)
    assert not editor.knobs["TF32 off"].isChecked()
    assert editor.extra.toPlainText() == "batch=1,tf32=off"
    assert editor.configs() == configs


def test_an_extra_line_that_cannot_be_read_is_said_under_the_box(qtbot):
    editor = MatrixEditor()
    qtbot.addWidget(editor)
    editor.extra.setPlainText("batch=8,device=gpu:1\nxla=maybe")
    configs = editor.configs()
    assert RunConfig(device="gpu:1", batch=8) in configs
    assert not editor.extra_problem.isHidden()
    assert editor.extra_problem.text() == "line 2: xla must be default, on or off, not 'maybe'"


def test_a_batch_size_that_is_not_one_is_said_not_dropped_silently(qtbot):
    """The review: typing '1, 0, x' dropped 0 and x without a word (the CLI refuses both)."""
    editor = MatrixEditor()
    qtbot.addWidget(editor)
    editor.batches.setText("1, 0, x, 4")
    assert {c.batch for c in editor.configs()} == {1, 4}
    assert not editor.extra_problem.isHidden()
    assert editor.extra_problem.text() == (
        "batch sizes: batch must be between 1 and 4,096, not 0; "
        "batch sizes: batch must be a whole number, not 'x'"
    )
    editor.batches.setText("1, 4")
    editor.configs()
    assert editor.extra_problem.isHidden()


def test_a_converted_runtime_that_cannot_use_a_chosen_gpu_runs_on_the_cpu_and_says_so(qtbot):
    editor = MatrixEditor()
    qtbot.addWidget(editor)
    editor.set_devices(["cpu", "gpu:0"], ["cpu", "gpu:0"])
    editor.batches.setText("1")
    editor.knobs["LiteRT int8"].setChecked(True)
    editor.knobs["ONNX Runtime"].setChecked(True)
    configs = editor.configs()
    assert RunConfig(runtime="litert-int8") in configs
    assert not any(c.runtime == "litert-int8" and c.is_gpu for c in configs)
    assert RunConfig(runtime="onnxruntime", device="gpu:0") in configs
    assert not editor.extra_problem.isHidden()
    assert editor.extra_problem.text().startswith(
        "LiteRT int8: gpu:0 cannot run LiteRT full int8 here: LiteRT's GPU delegate"
    )
