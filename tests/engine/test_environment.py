"""A child's start-up skips what its runtime would import unused: TensorFlow's import
of JAX and Keras's of pandas and IPython, about a second of every TensorFlow child's start-up.
Only while the runtime is imported: a user's trusted preprocessing file may import pandas."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from segdiff_gui.storage import ResultCache
from tests.conftest import segdiff

pytestmark = pytest.mark.slow

_CHILD = """
import sys
from segdiff_gui.engine.environment import apply_common_settings, unused_imports_skipped
apply_common_settings(sys.argv[1])
with unused_imports_skipped(sys.argv[1]):
    import keras, tensorflow
print(sorted(name for name in ("jax", "pandas", "IPython") if sys.modules.get(name) is not None))
print(keras.backend.backend())
"""


def _loaded_in_child(runtime: str) -> tuple[str, str]:
    result = subprocess.run(
        [sys.executable, "-c", _CHILD, runtime], capture_output=True, text=True, check=True
    )
    loaded, backend = result.stdout.strip().splitlines()[-2:]
    return loaded, backend


def test_a_tensorflow_child_imports_neither_jax_nor_pandas():
    # Both are installed here (the test extras): without the skip, TensorFlow and Keras
    # import them at ``import tensorflow``.
    assert _loaded_in_child("tensorflow") == ("[]", "tensorflow")


_MARKER = """
import os, sys
with open(os.environ["SEGDIFF_TEST_IMPORTED"], "a") as said:
    said.write(__name__ + " " + sys.argv[0] + "\\n")
raise ImportError(__name__ + " stands in for the real one here")
"""


def test_the_engine_child_skips_them_where_it_imports_its_runtime(models, small_images, tmp_path):
    """The skip once wrapped only the worker's import, and the runtime came later, in
    ``run_job``: every TensorFlow child imported JAX (0.3-1 s of its start-up). Stand-ins on
    the path say who imports them: neither the real child nor its parent does."""
    stand_ins = tmp_path / "stand_ins"
    for name in ("jax", "pandas", "IPython"):
        (stand_ins / name).mkdir(parents=True)
        (stand_ins / name / "__init__.py").write_text(_MARKER)
    # Every process started with the stand-ins on its path says so: the child was one.
    started = tmp_path / "started.txt"
    (stand_ins / "sitecustomize.py").write_text(
        f"import sys\nopen({str(started)!r}, 'a').write(' '.join(sys.orig_argv) + '\\n')\n"
    )
    imported = tmp_path / "imported.txt"
    path = os.pathsep.join([str(stand_ins), *filter(None, [os.environ.get("PYTHONPATH")])])
    ran = segdiff("run", models / "tiny.keras", small_images[0], "--cache", tmp_path / "cache",
                  "--config", "batch=1", "--repeats", "1",
                  env={"PYTHONPATH": path, "SEGDIFF_TEST_IMPORTED": str(imported)})  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert len(list(ResultCache(tmp_path / "cache").records())) == 1  # the run was computed
    assert "segdiff_gui.engine run" in started.read_text()
    assert not imported.exists(), imported.read_text()


_PANDAS_PREPARE = """
import numpy as np
import pandas as pd


def prepare(image):
    scale = pd.Series([255.0], dtype="float32").iloc[0]
    return image.astype(np.float32) / scale
"""


def test_a_trusted_preprocessing_file_may_import_pandas(models, small_images, tmp_path):
    """The skip once lasted the child's whole life: a trusted ``--preprocess`` file that
    imported pandas failed with "import of pandas halted; None in sys.modules"."""
    code = tmp_path / "prepare.py"
    code.write_text(_PANDAS_PREPARE)
    ran = segdiff("run", models / "tiny.keras", small_images[0], "--cache", tmp_path / "cache",
                  "--config", "batch=1", "--repeats", "1", "--preprocess", f"{code}:prepare",
                  "--trust-preprocess", "--json")  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    (run,) = json.loads(ran.stdout)["runs"]
    stored = ResultCache(tmp_path / "cache").read_run(run["key"])
    assert stored.provenance.to_dict()["target_input"] == "your function prepare.py:prepare"
    pixels = np.asarray(Image.open(small_images[0]))
    assert stored.probabilities.shape == pixels.shape[:2]


def test_a_jax_child_still_has_jax():
    pytest.importorskip("jax")
    loaded, backend = _loaded_in_child("jax")
    assert backend == "jax" and "jax" in loaded and "pandas" not in loaded


_UNKNOWN = """
import os
from segdiff_gui.core.config import RunConfig
from segdiff_gui.core.errors import InputError
from segdiff_gui.engine.environment import apply_process_settings
config = RunConfig(determinism=True)
object.__setattr__(config, "runtime", "mxnet")  # past the knob's check: no entry of it
try:
    apply_process_settings(config, False)
except InputError as error:
    print(error, "|", os.environ.get("CUBLAS_WORKSPACE_CONFIG"))
"""


def test_a_runtime_without_an_entry_is_an_error_not_pytorchs_path():
    """engine/environment.py sent any runtime it did not know down PyTorch's path
    (here: CUBLAS_WORKSPACE_CONFIG set for determinism). Each runtime's variables are now its
    entry's (core/runtimes.py), which no entry can leave out."""
    done = subprocess.run(
        [sys.executable, "-c", _UNKNOWN], capture_output=True, text=True, timeout=120,
        env={k: v for k, v in os.environ.items() if k != "CUBLAS_WORKSPACE_CONFIG"},
    )  # fmt: skip
    assert done.stdout.strip() == ("runtime: 'mxnet' is not a runtime this engine knows | None"), (
        done.stderr[-2000:]
    )


_SEEN_AT_EXIT = """
import atexit, json, os, sys
atexit.register(lambda: open(os.environ["MODULES_SEEN"], "w").write(json.dumps(
    sorted(name for name in ("numpy", "tensorflow", "keras") if name in sys.modules))))
"""


@pytest.mark.parametrize("runtime", ["litert", "onnxruntime"])
def test_a_converted_runtimes_probe_imports_no_tensorflow(runtime, tmp_path):
    # ``segdiff devices`` asks each runtime in a child: a converted runtime's has no model to
    # convert, so it says its devices and versions without TensorFlow's seconds of import.
    # What the child imported is written as it exits (a sitecustomize of this test's).
    (tmp_path / "sitecustomize.py").write_text(_SEEN_AT_EXIT)
    seen = tmp_path / "seen.json"
    path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    result = subprocess.run(
        [sys.executable, "-m", "segdiff_gui.engine", "probe", runtime],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": path, "MODULES_SEEN": str(seen)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.splitlines()[-1])["facts"]["runtime"] == runtime
    assert json.loads(seen.read_text()) == ["numpy"]
