"""Layer names from a model reach the terminal as text through the commands that print them
(issue 33, case 6): ``layers`` and ``repair`` on a model whose layers are named with a
window-title escape and a newline that would forge the next line of output."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from PIL import Image

from tests.conftest import segdiff
from tests.hostile.names import TERMINAL_CONTROLS

pytestmark = pytest.mark.slow

_BUILD = textwrap.dedent(
    """
    import sys
    import keras
    inputs = keras.Input((16, 16, 1))
    x = keras.layers.Conv2D(4, 3, padding="same", activation="relu",
                            name="conv\\x1b]0;pwned\\x07")(inputs)
    x = keras.layers.Conv2D(4, 3, padding="same", activation="relu",
                            name="pool\\nFAIL forged line")(x)
    outputs = keras.layers.Conv2D(1, 1, activation="sigmoid", name="out\\u202egnp.exe")(x)
    keras.Model(inputs, outputs).save(sys.argv[1])
    """
)


def test_hostile_layer_names_reach_the_terminal_as_text(tmp_path):
    model = tmp_path / "hostile.keras"
    subprocess.run([sys.executable, "-c", _BUILD, str(model)], check=True, timeout=300)
    rng = np.random.default_rng(1)
    images = []
    for index in range(2):
        images.append(tmp_path / f"cell_{index}.png")
        Image.fromarray(rng.integers(0, 255, (16, 16), dtype=np.uint8)).save(images[-1])
    cache = ("--cache", tmp_path / "cache")
    # TensorFlow refuses such names as scope names: the run fails with that reason, said as
    # text (before issue 33 the line was "ValueError: • kwargs=<class 'inspect._empty'>").
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
