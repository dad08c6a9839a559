"""What a diagnosis says about converted models (issue 16): the model that ships is the LiteRT
or ONNX Runtime conversion, not the Keras model, so its own difference from the Keras model is
the figure to act on, with the runtime's documentation of the conversion."""

from __future__ import annotations

from dataclasses import dataclass

from segdiff_gui.core.attribution import Effect
from segdiff_gui.core.findings import Finding, plural
from segdiff_gui.core.runtimes import RUNTIMES

__all__ = ["Conversion", "deployment_advice", "is_conversion"]


@dataclass(frozen=True)
class Conversion:
    """A run that differs from the reference in its runtime alone, a converted one."""

    runtime: str
    label: str
    effect: Effect


def is_conversion(reference_runtime: str, runtime: str) -> bool:
    """From the Keras model to its conversion (not between two conversions)."""
    return RUNTIMES[reference_runtime].conversion is None and bool(RUNTIMES[runtime].conversion)


def _measured(conversion: Conversion) -> str:
    effect = conversion.effect
    return f"{plural(effect.flips, 'flip')} (max |Δ| {effect.max_abs:.3g})"


def deployment_advice(conversions: list[Conversion], cutoff_text: str) -> list[Finding]:
    """One sentence over every conversion measured: the one that moves the map most, the one
    that moves it least, and what to do before shipping it."""
    if not conversions:
        return []
    order = sorted(conversions, key=lambda c: (c.effect.flips, c.effect.max_abs))
    best, worst = order[0], order[-1]
    # Two runs of one runtime (full int8 calibrated on other images) are told by their labels.
    same = best.runtime == worst.runtime and best is not worst

    def named(conversion: Conversion) -> str:
        title = RUNTIMES[conversion.runtime].title
        return f"{title} ({conversion.label})" if same else title

    worst_title = named(worst)
    sentence = (
        f"The converted model is what ships, so measure it, not the Keras model: converting "
        f"to {worst_title} alone gives {_measured(worst)} {cutoff_text} here"
    )
    if best is not worst:
        sentence += f", {named(best)} {_measured(best)}"
    sentence += (
        ". Check the converted model's accuracy against ground truth on a test set (the "
        "test-set sweep with masks) before shipping it"
    )
    quantization = RUNTIMES[worst.runtime].conversion
    if worst.effect.flips and quantization and quantization.quantization != "float32":
        sentence += (
            "; where its change matters, calibrate on more representative images or keep "
            "float weights"
            if quantization.calibrated
            else "; where its change matters, keep float weights or quantize fully with a "
            "representative dataset and compare again"
        )
    return [
        Finding(
            "advice",
            sentence + ".",
            f"{worst.effect.flips:,} flips, max |Δ| {worst.effect.max_abs:.3g}",
            RUNTIMES[worst.runtime].link,
        )
    ]
