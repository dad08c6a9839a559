"""Layer names from a model reach the terminal as text through the commands that print them:
``layers`` and ``repair`` on a model whose layers are named with a
window-title escape and a newline that would forge the next line of output."""

import numpy as np
import pytest
from PIL import Image

from tests.conftest import segdiff
from tests.hostile.names import TERMINAL_CONTROLS

pytestmark = pytest.mark.slow


def test_hostile_layer_names_reach_the_terminal_as_text(models, tmp_path):
    model = models / "hostile_names.keras"  # built with the session's test models
    rng = np.random.default_rng(1)
    images = []
    for index in range(2):
        images.append(tmp_path / f"cell_{index}.png")
        Image.fromarray(rng.integers(0, 255, (16, 16), dtype=np.uint8)).save(images[-1])
    cache = ("--cache", tmp_path / "cache")
    # TensorFlow refuses such names as scope names: the run fails with that reason, said as
    # text (the line once was "ValueError: • kwargs=<class 'inspect._empty'>").
    refused = segdiff("run", model, *images, *cache, "--config", "batch=1", "--repeats", "1")
    assert "is not a valid scope name" in refused.stderr, refused.stderr
    assert "kwargs=" not in refused.stderr
    # JAX takes them: the layer table, the sentences and the repair print them as text.
    said = [refused.stdout + refused.stderr]
    for command in (
        ("layers", model, *images, *cache, "--from", "runtime=jax",
         "--to", "runtime=jax,precision=bf16"),
        ("repair", model, *images, *cache, "--config", "runtime=jax,precision=bf16",
         "--bound", "0"),
    ):  # fmt: skip
        result = segdiff(*command)
        assert result.returncode in (0, 1), result.stderr
        assert "pool" in result.stdout, command[0]  # the layers are named in what it printed
        said.append(result.stdout + result.stderr)
    for text in said:
        assert not any(control in text for control in TERMINAL_CONTROLS)
        assert not any(line.lstrip("│ ").startswith("FAIL forged") for line in text.splitlines())
