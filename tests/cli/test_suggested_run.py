"""A command segdiff suggests is the request its runs were made by. ``reproduce``'s
"the same run again", run as printed, is served from the cache; and every request written
back as words (cli/run_words.py) parses into the same request."""

import json
import shlex
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from segdiff_gui.cli.parser import build_parser
from segdiff_gui.cli.run_words import run_command, run_words
from segdiff_gui.cli.running import checked_run_inputs, request_of
from segdiff_gui.core.config import (
    ModelSettings,
    OutputSelection,
    Preprocessing,
    RunConfig,
    parse_config_spec,
)
from segdiff_gui.core.defaults import DEFAULT_REPEATS, DEFAULT_TIMEOUT_S
from segdiff_gui.runner.arguments import preprocessing_function
from segdiff_gui.runner.request import MatrixRequest
from segdiff_gui.storage import ResultCache
from tests.conftest import segdiff_here


def _rgba(path: Path, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    Image.fromarray(rng.integers(0, 256, (24, 24, 4), dtype=np.uint8), "RGBA").save(path)
    return path


def test_reproduces_same_run_again_is_served_from_the_cache_as_printed(
    models, tmp_path, capsys, fake_engine, monkeypatch
):
    """An RGBA target under ``--color rgb`` and a mean, in a cache of the user's: the printed
    command must carry every setting and the cache, or its run is another key."""
    monkeypatch.setenv("SEGDIFF_CACHE", str(tmp_path / "default cache"))
    model = models / "tiny.keras"
    images = [_rgba(tmp_path / "a photo.png", 1), _rgba(tmp_path / "other.png", 2)]
    cache = tmp_path / "my cache"
    settings = ["--color", "rgb", "--mean", "0.25", "--cache", cache]
    first = segdiff_here(capsys, "run", model, *images, "--config", "batch=1",
                         "--repeats", "1", *settings)  # fmt: skip
    assert first.returncode == 0, first.stderr
    (key,) = ResultCache(cache).keys()
    mine = tmp_path / "mine.npy"
    np.save(mine, ResultCache(cache).read_run(key).probabilities)

    answer = segdiff_here(capsys, "reproduce", mine, model, *images, *settings)
    assert answer.returncode == 0, answer.stderr
    assert "your map is cpu b1 bit for bit" in answer.stdout
    command = answer.stdout.split("The same run again (from the cache): ", 1)[1].strip()
    words = shlex.split(command)
    assert words[:2] == ["segdiff", "run"]
    again = segdiff_here(capsys, *words[1:], "--json")
    assert again.returncode == 0, again.stderr
    (run,) = json.loads(again.stdout)["runs"]
    assert run["status"] == "cached" and run["key"] == key


def _parsed_back(request: MatrixRequest) -> MatrixRequest:
    """``segdiff run``'s parse of the request's words, made into its request."""
    words = shlex.split(run_command(request))
    assert words[:2] == ["segdiff", "run"]
    args = build_parser().parse_args(words[1:])
    checked = checked_run_inputs(args)
    cache = ResultCache(args.cache) if args.cache else ResultCache()
    return request_of(
        args, checked.model, checked.images, cache, configs=checked.configs,
        target=args.target, settings=checked.settings, sweep=args.sweep, shard=args.shard,
    )  # fmt: skip


def _function(tmp_path: Path) -> Preprocessing:
    source = tmp_path / "my prep.py"
    source.write_text("def prepare(image):\n    return image\n")
    return preprocessing_function(f"{source}:prepare")


@pytest.mark.parametrize(
    "settings",
    [
        ModelSettings(),
        ModelSettings(
            Preprocessing(
                color="rgb",
                resize="bilinear",
                mean=(0.5, 0.25, 0.125),
                std=(0.1, 0.2, 0.3),
                divisor=255.0,
            )
        ),  # fmt: skip
        ModelSettings(Preprocessing(scale=1 / 255, color="gray")),
        ModelSettings(Preprocessing(scale=0.003921568), OutputSelection("logits", "softmax")),
        ModelSettings(Preprocessing(divisor=65535.0), OutputSelection("1", "sigmoid"), True),
        "function",
    ],
)
def test_a_request_written_back_as_words_parses_into_the_same_request(
    models, small_images, tmp_path, settings
):
    if settings == "function":
        settings = ModelSettings(_function(tmp_path), trust_preprocess=True)
    request = MatrixRequest(
        models / "tiny.keras",
        tuple(small_images[:3]),
        ResultCache(tmp_path / "a cache; with 'quotes'"),
        configs=(
            RunConfig(),
            parse_config_spec("batch=2,xla=on"),
            parse_config_spec("precision=float64"),
        ),  # fmt: skip
        repeats=3,
        target=str(small_images[1]),
        settings=settings,
        timeout_s=12.5,
    )
    back = _parsed_back(request)
    for name in ("model", "images", "configs", "repeats", "target", "settings", "timeout_s",
                 "sweep", "shard"):  # fmt: skip
        assert getattr(back, name) == getattr(request, name), name
    assert back.cache.root == request.cache.root
    if settings.preprocessing.function:  # not compared: where the child loads it from
        assert back.settings.preprocessing.function_file == settings.preprocessing.function_file


def test_defaults_are_left_out_and_a_shard_or_sweep_is_said(models, small_images, monkeypatch):
    monkeypatch.delenv("SEGDIFF_CACHE", raising=False)
    plain = MatrixRequest(models / "tiny.keras", tuple(small_images[:2]), ResultCache())
    assert run_words(plain) == ["segdiff", "run", str(models / "tiny.keras"),
                                *map(str, small_images[:2])]  # fmt: skip
    assert plain.repeats == DEFAULT_REPEATS and plain.timeout_s == DEFAULT_TIMEOUT_S
    for request in (
        MatrixRequest(models / "tiny.keras", tuple(small_images), ResultCache(), sweep=True),
        MatrixRequest(
            models / "tiny.keras", tuple(small_images), ResultCache(), sweep=True, shard=(2, 3)
        ),  # fmt: skip
    ):
        back = _parsed_back(request)
        assert (back.sweep, back.shard) == (request.sweep, request.shard)
