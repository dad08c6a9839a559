"""Command-line options both front ends share (``segdiff run`` and ``segdiff-gui``): a model's
settings are written once, with the same names and help in both."""

from __future__ import annotations

import argparse

from segdiff_gui.core.config import ModelSettings, OutputSelection, parse_preprocessing

__all__ = ["TRUST_WARNING", "add_model_settings", "model_settings"]

# What trusting a model means, for the --trust-model help and the window's checkbox.
TRUST_WARNING = (
    "allow code in the model (Lambda layers, SavedModel graphs) to run: Keras safe mode off. "
    "Such code can read, write or send any of your files; trust only models whose source you "
    "trust"
)


def add_model_settings(parser: argparse.ArgumentParser) -> None:
    """How images become the model's input, which output is the map, and trust."""
    group = parser.add_argument_group("model settings (part of the cache key)")
    group.add_argument("--scale", metavar="X", help="input scale, e.g. 1/255 (default: by dtype)")
    group.add_argument(
        "--mean", metavar="M[,M,M]", help="per-channel mean subtracted after scaling"
    )
    group.add_argument("--std", metavar="S[,S,S]", help="per-channel std divided after the mean")
    group.add_argument(
        "--color",
        choices=("keep", "gray", "rgb"),
        default="keep",
        help="convert channels only when asked (default keep)",
    )
    group.add_argument(
        "--resize",
        choices=("refuse", "bilinear"),
        default="refuse",
        help="what to do when the image size differs from the model's (default refuse)",
    )
    group.add_argument(
        "--output", metavar="NAME|INDEX", help="which output of a multi-output model"
    )
    group.add_argument(
        "--activation",
        choices=("none", "sigmoid", "softmax"),
        default="none",
        help="apply to raw logits (default none: outputs must already be probabilities)",
    )
    group.add_argument("--trust-model", action="store_true", help=TRUST_WARNING)


def model_settings(args: argparse.Namespace) -> ModelSettings:
    """The settings the options of :func:`add_model_settings` name (a ConfigError if not)."""
    return ModelSettings(
        preprocessing=parse_preprocessing(args.scale, args.mean, args.std, args.color, args.resize),
        output=OutputSelection(output=args.output, activation=args.activation),
        trust_model=args.trust_model,
    )
