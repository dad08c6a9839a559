"""Bundled data: the demo (two small U-Nets, synthetic cell images with ground truth) and the
app's icons.

``resources/make_demo.py`` at the top of the repository regenerates everything
deterministically (it trains the models, so it imports TensorFlow; the package does not).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["APP_ID", "demo_dir", "demo_images", "demo_model", "icon_path"]

# The reverse-DNS id of the desktop entry, the AppStream metadata and the installed icons.
APP_ID = "io.github.segdiff.Segdiff"


def demo_dir() -> Path:
    return Path(str(resources.files(__name__) / "demo"))


def demo_model(kind: str = "sigmoid") -> Path:
    """``sigmoid`` (1-channel foreground) or ``softmax3`` (background/cytoplasm/nucleus)."""
    return demo_dir() / f"unet_{kind}.keras"


def demo_images() -> list[Path]:
    return sorted((demo_dir() / "images").glob("*.png"))


def icon_path(size: int | None = None) -> Path:
    """The app's icon: the scalable SVG, or the PNG of ``size`` pixels (16 … 512)."""
    icons = Path(str(resources.files(__name__) / "icons"))
    return icons / ("segdiff.svg" if size is None else f"segdiff-{size}.png")
