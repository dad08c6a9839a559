"""A child's start-up skips what its runtime would import unused (issue 18): TensorFlow's import
of JAX and Keras's of pandas, about a second of every TensorFlow child's start-up."""

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

_CHILD = """
import sys
from segdiff_gui.engine.environment import apply_common_settings
apply_common_settings(sys.argv[1])
import keras, tensorflow
print(sorted(name for name in ("jax", "pandas") if sys.modules.get(name) is not None))
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
    """Issue 35: engine/environment.py sent any runtime it did not know down PyTorch's path
    (here: CUBLAS_WORKSPACE_CONFIG set for determinism). Each runtime's variables are now its
    entry's (core/runtimes.py), which no entry can leave out."""
    done = subprocess.run(
        [sys.executable, "-c", _UNKNOWN], capture_output=True, text=True, timeout=120,
        env={k: v for k, v in os.environ.items() if k != "CUBLAS_WORKSPACE_CONFIG"},
    )  # fmt: skip
    assert done.stdout.strip() == ("runtime: 'mxnet' is not a runtime this engine knows | None"), (
        done.stderr[-2000:]
    )
