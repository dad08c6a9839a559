"""The model-settings registry: every setting of how a model runs at all, written once.

A model setting is the same under every configuration (unlike a knob, core/knobs.py): how an
image becomes the model's input (divide or scale, mean, std, colour, resize, or the user's own
function), which output is the map and its activation, and trust. Its entry here says what
every front end needs to know about it: its name (the option's destination, the name an
error's fix gives it, the API's argument or ``preprocess`` key), the CLI flag and its argparse
details, the window's field (kind, label, placeholder, tooltip), the text of the option that
makes a setting back (:func:`option_values`) and the remedy each front end offers where a
failure's fix names it (:class:`Remedy`). ``segdiff run``'s options, the three hint tables,
the API's and the window's settings all read this registry: a new setting is one entry here
plus the code that applies it (its field on ``Preprocessing`` or ``OutputSelection``).

The order of the registry is the order of the options in ``--help``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from segdiff_gui.core.config import (
    ACTIVATIONS,
    ModelSettings,
    OutputSelection,
    Preprocessing,
    parse_preprocessing,
)
from segdiff_gui.core.floatfmt import fraction_text

__all__ = [
    "MODEL_SETTINGS",
    "PREPROCESS_KEYS",
    "REMEDIES",
    "SETTINGS",
    "STEPS",
    "TRUST_PREPROCESS_WARNING",
    "TRUST_WARNING",
    "ModelSetting",
    "Remedy",
    "option_values",
    "preprocessing_of",
    "settings_of",
]

# What trusting a preprocessing function means (--trust-preprocess, the window's checkbox).
TRUST_PREPROCESS_WARNING = (
    "allow your preprocessing function (--preprocess) to run in segdiff's child: it is Python "
    "code with your permissions and can read, write or send any of your files; trust only code "
    "you wrote or whose source you trust"
)
# What trusting a model means, for the --trust-model help and the window's checkbox.
TRUST_WARNING = (
    "allow code in the model (Lambda layers, SavedModel graphs) to run: Keras safe mode off. "
    "Such code can read, write or send any of your files; trust only models whose source you "
    "trust"
)

# The window's controls: a text field, a list of choices, the model's outputs (editable, filled
# from its inspection), a checkbox.
FieldKind = Literal["text", "choice", "output", "check"]
# What a setting's value is, for the API's ``preprocess`` mapping: a number (or text like
# "1/255"), one number per channel, one of ``choices``, or anything else as it is.
ValueKind = Literal["number", "numbers", "choice", "other"]
Value = str | bool | None


@dataclass(frozen=True)
class Remedy:
    """How each front end names the control that mends a failure whose fix (``InputError.fix``,
    ``setting=value``) names this setting; ``{}`` is the fix's value, ``""`` none there."""

    flag: str = ""  # the option of `segdiff run` (and segdiff-gui): "--color {}"
    argument: str = ""  # how a call of segdiff_gui.run sets it: 'activation="{}"'
    control: str = ""  # the window's field: "colour"
    place: str = "Model settings"  # where the window shows that field
    tick: bool = False  # the field is a checkbox

    def __bool__(self) -> bool:
        return bool(self.flag or self.argument or self.control)


@dataclass(frozen=True)
class ModelSetting:
    """One model setting; see the module's docstring."""

    name: str
    flag: str
    help: str
    label: str  # the window's field: its row's label, or its checkbox's text
    tooltip: str
    field: FieldKind = "text"
    value: ValueKind = "other"
    metavar: str | None = None
    choices: tuple[str, ...] = ()
    default: Value = None
    placeholder: str = ""
    exclusive: str = ""  # the settings that share it exclude each other (--divide, --scale)
    # What of ModelSettings it sets: a preprocessing step (a key of the API's preprocess={...}
    # and an argument of parse_preprocessing), the user's function in place of the steps, a
    # field of OutputSelection, or one of its trusts.
    part: Literal["step", "function", "output", "trust"] = "output"
    remedy: Remedy = Remedy()
    # The option's text that gives the setting back (None: at its default).
    option: Callable[[ModelSettings], Value] = lambda _settings: None

    @property
    def switch(self) -> bool:
        return self.field == "check"

    @property
    def step(self) -> bool:
        return self.part == "step"


def _fraction(number: float | None) -> str | None:
    return None if number is None else fraction_text(number)


def _floats(floats: tuple[float, ...]) -> str | None:
    return ",".join(map(repr, floats)) or None


def _unless(value: str, default: str) -> str | None:
    return None if value == default else value


def _function(settings: ModelSettings) -> str | None:
    prep = settings.preprocessing
    if prep.function is None:
        return None
    file = prep.function_file  # where the child loads it from
    name = prep.function.rpartition(":")[2]
    return f"{file}:{name}" if file else prep.function


def _sentence(text: str) -> str:
    return text[0].upper() + text[1:] + "."


def _preprocess_argument(key: str, value: str) -> str:
    return f'preprocess={{{{"{key}": {value}}}}}'


MODEL_SETTINGS: tuple[ModelSetting, ...] = (
    ModelSetting(
        "divide",
        "--divide",
        "divide the pixels by D in float32, as img.astype(np.float32) / 255.0 does (the "
        "default: by the image's dtype, 255 for 8-bit and 65535 for 16-bit images)",
        label="divide by",
        tooltip="Divide the pixels by this in float32, as img.astype(np.float32) / 255.0 does; "
        "empty: by the image's dtype (255 for 8-bit, 65535 for 16-bit, float images as they "
        "are)",
        value="number",
        metavar="D",
        placeholder="by dtype (255 for 8-bit)",
        exclusive="scaling",
        part="step",
        # by_dtype="multiply" without a number is an older stored run's (before ``divide``):
        # no option makes it, and no front end asks for it.
        option=lambda settings: _fraction(settings.preprocessing.divisor),
    ),
    ModelSetting(
        "scale",
        "--scale",
        "multiply the pixels by float32(X) instead, e.g. 1/255, as Keras's Rescaling layer "
        "does (it rounds differently from dividing)",
        label="or multiply by",
        tooltip="Multiply the pixels by float32(this) instead, e.g. 1/255, as Keras's Rescaling "
        "layer does: it rounds differently from dividing (leave 'divide by' empty)",
        value="number",
        metavar="X",
        placeholder="none",
        exclusive="scaling",
        part="step",
        remedy=Remedy("--scale {}", _preprocess_argument("scale", "..."), "scale"),
        option=lambda settings: _fraction(settings.preprocessing.scale),
    ),
    ModelSetting(
        "mean",
        "--mean",
        "per-channel mean subtracted after scaling",
        label="mean",
        tooltip="Per-channel mean subtracted after scaling: one value or one each",
        value="numbers",
        metavar="M[,M,M]",
        placeholder="none",
        part="step",
        remedy=Remedy("--mean M[,M,M]", _preprocess_argument("mean", "[...]"), "mean"),
        option=lambda settings: _floats(settings.preprocessing.mean),
    ),
    ModelSetting(
        "std",
        "--std",
        "per-channel std divided after the mean",
        label="std",
        tooltip="Per-channel standard deviation divided after the mean",
        value="numbers",
        metavar="S[,S,S]",
        placeholder="none",
        part="step",
        remedy=Remedy("--std S[,S,S]", _preprocess_argument("std", "[...]"), "std"),
        option=lambda settings: _floats(settings.preprocessing.std),
    ),
    ModelSetting(
        "color",
        "--color",
        "convert channels only when asked (default keep)",
        label="colour",
        tooltip="Colour conversion: keep the image's channels, or convert to gray or RGB (an "
        "RGBA image loses its alpha)",
        field="choice",
        value="choice",
        choices=("keep", "gray", "rgb"),
        default="keep",
        part="step",
        remedy=Remedy("--color {}", _preprocess_argument("color", '"{}"'), "colour"),
        option=lambda settings: _unless(settings.preprocessing.color, "keep"),
    ),
    ModelSetting(
        "resize",
        "--resize",
        "what to do when the image size differs from the model's (default refuse)",
        label="resize",
        tooltip="An image of another size than the model's input: refuse it (an error naming "
        "both sizes), or resize it bilinearly",
        field="choice",
        value="choice",
        choices=("refuse", "bilinear"),
        default="refuse",
        part="step",
        remedy=Remedy("--resize {}", _preprocess_argument("resize", '"{}"'), "resize"),
        option=lambda settings: _unless(settings.preprocessing.resize, "refuse"),
    ),
    ModelSetting(
        "output",
        "--output",
        "which output of a multi-output model",
        label="output",
        tooltip="Which output of a model with several is the probability map",
        field="output",
        metavar="NAME|INDEX",
        remedy=Remedy("--output NAME|INDEX", "output=NAME or INDEX", "output"),
        option=lambda settings: settings.output.output,
    ),
    ModelSetting(
        "activation",
        "--activation",
        "apply to raw logits (default none: outputs must already be probabilities)",
        label="activation",
        tooltip="none: the outputs are probabilities already; sigmoid or softmax: segdiff "
        "applies it to raw logits",
        field="choice",
        choices=ACTIVATIONS,
        default="none",
        remedy=Remedy("--activation {}", 'activation="{}"', "activation"),
        option=lambda settings: _unless(settings.output.activation, "none"),
    ),
    ModelSetting(
        "trust_model",
        "--trust-model",
        TRUST_WARNING,
        label="trust this model (safe mode off)",
        tooltip=_sentence(TRUST_WARNING),
        field="check",
        default=False,
        part="trust",
        remedy=Remedy("--trust-model", "trust_model=True", "trust this model", tick=True),
        option=lambda settings: settings.trust_model or None,
    ),
    ModelSetting(
        "preprocess",
        "--preprocess",
        "your own preprocessing: FUNCTION(image array) gives the model's input, in place of "
        "divide/scale/mean/std/colour/resize (the file's bytes are part of the key; it runs "
        "only with --trust-preprocess)",
        label="or your function",
        tooltip="Your own preprocessing, FILE.py:FUNCTION: FUNCTION(image array) gives the "
        "model's input, in place of the steps above. The file's bytes are part of every run's "
        "key; it runs in segdiff's child only when trusted.",
        metavar="FILE.py:FUNCTION",
        placeholder="none: the steps above",
        part="function",
        option=_function,
    ),
    ModelSetting(
        "trust_preprocess",
        "--trust-preprocess",
        TRUST_PREPROCESS_WARNING,
        label="trust this function",
        tooltip=_sentence(TRUST_PREPROCESS_WARNING),
        field="check",
        default=False,
        part="trust",
        remedy=Remedy(
            "--trust-preprocess", "trust_preprocess=True", "trust this function", tick=True
        ),
        option=lambda settings: settings.trust_preprocess or None,
    ),
)

SETTINGS: Mapping[str, ModelSetting] = {setting.name: setting for setting in MODEL_SETTINGS}
# The steps a preprocessing function replaces, in order: the keys of the API's preprocess={}.
STEPS: tuple[ModelSetting, ...] = tuple(setting for setting in MODEL_SETTINGS if setting.step)
PREPROCESS_KEYS: tuple[str, ...] = tuple(setting.name for setting in STEPS)

# Every fix a failure may name (``InputError.fix``) and its remedy in each front end: the model
# settings', and the few other settings a failure names.
REMEDIES: Mapping[str, Remedy] = {
    **{setting.name: setting.remedy for setting in MODEL_SETTINGS if setting.remedy},
    "repeats": Remedy("--repeats {}", "repeats={}", "repeats", place="the Matrix"),
    "group": Remedy("--group ID", "group=ID (see runs.table())"),
    "model": Remedy("--model NAME", "model=NAME"),
    "source": Remedy("--source MODEL", "source=KERAS_MODEL"),
}


def preprocessing_of(texts: Mapping[str, str | None]) -> Preprocessing:
    """The preprocessing the steps' texts name (``{"scale": "1/255", "color": "rgb"}``, one
    missing or ``None`` at its default), as the options give them; a ConfigError if not."""
    given = {step.name: texts.get(step.name) for step in STEPS}
    return parse_preprocessing(**{name: text for name, text in given.items() if text is not None})


def settings_of(preprocessing: Preprocessing, values: Mapping[str, Any]) -> ModelSettings:
    """``preprocessing`` and the other settings by name (``{"activation": "sigmoid",
    "trust_model": True}``), one missing at its default: the settings a front end's controls
    give, each value as that setting takes it (a ConfigError for one it refuses)."""
    output, trusts = (
        {s.name: values[s.name] for s in MODEL_SETTINGS if s.part == part and s.name in values}
        for part in ("output", "trust")
    )
    return ModelSettings(preprocessing, OutputSelection(**output), **trusts)


def option_values(settings: ModelSettings) -> dict[str, str | bool]:
    """The options that give ``settings`` back, by their names (``{"color": "rgb", "scale":
    "1/255", "trust_model": True}``), those at their defaults left out: what a suggested
    command or call must say to make the same runs (the CLI names each by its flag, the API by
    its argument). A scale or divisor is written exactly (``1/255`` where that fraction is the
    float), a mean or std as the shortest text of each float. The user's function comes first:
    it stands for every step."""
    values = {setting.name: setting.option(settings) for setting in MODEL_SETTINGS}
    first = {"preprocess": values.pop("preprocess")}
    return {name: value for name, value in (first | values).items() if value is not None}
