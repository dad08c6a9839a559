"""The model-settings registry is where a model setting is written: `segdiff run`'s options,
the API's arguments, the remedies a failure offers and the suggested command that makes the
same runs all read it, and one setting's entry reaches each of them."""

from __future__ import annotations

import inspect
from pathlib import Path

import segdiff_gui
from segdiff_gui.api.hints import argument_for
from segdiff_gui.cli.hints import flag_for
from segdiff_gui.cli.parser import build_parser, command_flags
from segdiff_gui.core.config import ModelSettings, OutputSelection, Preprocessing
from segdiff_gui.core.model_settings import (
    MODEL_SETTINGS,
    PREPROCESS_KEYS,
    REMEDIES,
    option_values,
)
from segdiff_gui.runner.arguments import model_settings, preprocessing_function
from segdiff_gui.ui.hints import with_control


def test_every_setting_is_an_option_of_segdiff_run_and_an_argument_of_the_api():
    flags = command_flags("run")
    for setting in MODEL_SETTINGS:
        assert flags[setting.name] == setting.flag
        # a preprocessing step is a key of preprocess={...}; any other setting an argument
        where = "preprocess" if setting.name in PREPROCESS_KEYS else setting.name
        for function in (segdiff_gui.run, segdiff_gui.sweep):
            assert where in inspect.signature(function).parameters, (function, setting.name)
    assert PREPROCESS_KEYS == ("divide", "scale", "mean", "std", "color", "resize")


def _parsed(settings: ModelSettings) -> ModelSettings:
    flags = command_flags("run")
    words = ["run", "model.keras", "image.png"]
    for name, value in option_values(settings).items():
        words += [flags[name]] if value is True else [flags[name], str(value)]
    return model_settings(build_parser().parse_args(words))


def test_the_options_a_setting_writes_give_it_back_through_the_parser(tmp_path: Path):
    steps = Preprocessing(scale=1 / 255, mean=(0.485, 0.456), std=(0.229,), color="rgb",
                          resize="bilinear")  # fmt: skip
    stepped = ModelSettings(steps, OutputSelection("edge", "softmax"), trust_model=True)
    assert _parsed(stepped) == stepped
    divided = ModelSettings(Preprocessing(divisor=65535.0))
    assert _parsed(divided) == divided
    assert _parsed(ModelSettings()) == ModelSettings() and option_values(ModelSettings()) == {}
    code = tmp_path / "prepare.py"
    code.write_text("def prepare(image):\n    return image\n")
    function = ModelSettings(
        preprocessing_function(f"{code}:prepare"), trust_preprocess=True, trust_model=True
    )
    assert _parsed(function) == function
    assert next(iter(option_values(function))) == "preprocess"  # it stands for every step


def test_each_remedy_names_its_settings_flag_argument_and_field():
    for setting in MODEL_SETTINGS:
        remedy = REMEDIES.get(setting.name)
        if remedy is None:
            continue
        fix = f"{setting.name}={setting.choices[-1] if setting.choices else 'on'}"
        assert flag_for(fix, "run").split()[0] == setting.flag
        argument = argument_for(fix)
        assert argument.startswith("preprocess=" if setting.step else f"{setting.name}=")
        assert remedy.control in with_control("fails", fix)
    assert flag_for("color=rgb", "run") == "--color rgb"
    assert argument_for("color=rgb") == 'preprocess={"color": "rgb"}'
    assert with_control("fails", "color=rgb") == "fails — in Model settings, colour: rgb"
