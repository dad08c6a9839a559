"""Bundled demo: two small U-Nets and synthetic cell images with ground truth.

``resources/make_demo.py`` at the top of the repository regenerates everything
deterministically (it trains the models, so it imports TensorFlow; the package does not).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["demo_dir", "demo_images", "demo_model"]


def demo_dir() -> Path:
    return Path(str(resources.files(__name__) / "demo"))


def demo_model(kind: str = "sigmoid") -> Path:
    """``sigmoid`` (1-channel foreground) or ``softmax3`` (background/cytoplasm/nucleus)."""
    return demo_dir() / f"unet_{kind}.keras"


def demo_images() -> list[Path]:
    return sorted((demo_dir() / "images").glob("*.png"))
