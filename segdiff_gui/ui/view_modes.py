"""The window's view modes, one row each (Qt-free): everything that makes a mode what it is,
read by every part that shows or chooses one (as napari's ``layer_to_visual`` is its one
table of layer kinds). The toolbar's choices and their tips, the View menu and its shortcuts,
the grid's planes, levels, colours and colour bar, and whether the images follow the cutoff
all come from here: adding a view mode is adding a row."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from segdiff_gui.core.study import StudyRun
from segdiff_gui.ui.view_planes import (
    PlaneSource,
    ViewPlanes,
    difference_planes,
    exact_error_planes,
    flip_planes,
    probability_planes,
    ulp_planes,
)

__all__ = ["VIEW_MODES", "ViewMode", "view_mode"]


@dataclass(frozen=True)
class ViewMode:
    """One view mode of the grid."""

    name: str  # the toolbar's choice (and README's word for the mode)
    menu_text: str  # the View menu's entry, its mnemonic marked with &
    tip: str  # what the mode shows, as the toolbar's choice says it
    shortcut: str  # the View menu entry's key
    planes: Callable[[PlaneSource, StudyRun], ViewPlanes]  # what each view draws, at which levels
    colour_map: str | None  # pyqtgraph's colour map of the values and the bar; None: the
    # class colours, and no colour bar
    scaled: bool = False  # a scale shared by the views or each view's own applies (the
    # toolbar's level box)
    follows_cutoff: bool = False  # its images change with the cutoff (else only the overlays)

    def __repr__(self) -> str:
        return f"ViewMode({self.name!r})"


VIEW_MODES: tuple[ViewMode, ...] = (
    ViewMode(
        name="probability",
        menu_text="&Probability",
        tip="The probability maps on 0 to 1, so runs compare (scale per view: each map on "
        "its own range)",
        shortcut="Ctrl+1",
        planes=probability_planes,
        colour_map="viridis",
        scaled=True,
    ),
    ViewMode(
        name="difference",
        menu_text="&Difference",
        tip="Each run minus the reference (blue below, red above), symmetric levels",
        shortcut="Ctrl+2",
        planes=difference_planes,
        colour_map="CET-D1",
        scaled=True,
    ),
    ViewMode(
        name="ulp",
        menu_text="&Ulp",
        tip="|difference| in float32 ULPs, log scale: 1-ULP changes are visible",
        shortcut="Ctrl+3",
        planes=ulp_planes,
        colour_map="inferno",
        scaled=True,
    ),
    ViewMode(
        name="flips",
        menu_text="&Flips",
        tip="The class of every pixel at the cutoff; flips are highlighted",
        shortcut="Ctrl+4",
        planes=flip_planes,
        colour_map=None,
        follows_cutoff=True,
    ),
    ViewMode(
        name="error against exact",
        menu_text="&Error against exact",
        tip="Each run minus the exact map (the model in float64, precision=float64): its "
        "float32 error, blue below, red above, symmetric levels",
        shortcut="Ctrl+5",
        planes=exact_error_planes,
        colour_map="CET-D1",
        scaled=True,
    ),
)


def view_mode(name: str) -> ViewMode:
    """The mode called ``name``."""
    for mode in VIEW_MODES:
        if mode.name == name:
            return mode
    known = ", ".join(mode.name for mode in VIEW_MODES)
    raise ValueError(f"unknown view mode {name!r} (the modes: {known})")
