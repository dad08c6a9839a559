"""A progress bar while a matrix computes: tqdm's notebook bar in Jupyter (with ipywidgets),
its text bar on a terminal, nothing when asked for none. Failures are written under it as
they happen, one line each."""

from __future__ import annotations

import sys
import warnings
from typing import Any

from segdiff_gui.api.hints import hinted
from segdiff_gui.core.protocol import (
    BatchProgress,
    Message,
    PlanReady,
    RunFailed,
    RunFinished,
    RunStarted,
)
from segdiff_gui.core.text import printable
from segdiff_gui.runner.outcome import RunCount

__all__ = ["ProgressBar"]


class ProgressBar:
    """Shows the messages of :meth:`MatrixRunner.run`; call it with each, then :meth:`close`.
    A matrix served wholly from the cache shows no bar (there is nothing to wait for)."""

    def __init__(self, enabled: bool = True, what: str = "runs") -> None:
        self.enabled = enabled
        self.what = what
        self._bar: Any = None
        self._shown: Any = None  # the notebook bar's display, shown again once finished
        self._labels: dict[str, str] = {}
        self._failed = 0
        self._count = RunCount()  # every run listed: the cached ones done from the start

    def __call__(self, message: Message) -> None:
        if isinstance(message, PlanReady):  # said with a bar or without
            for line in message.skipped_lines():
                warnings.warn(printable(line), RuntimeWarning, stacklevel=2)
        if not self.enabled:
            return
        self._count.add(message)
        if isinstance(message, PlanReady):
            for notice in message.notices:
                warnings.warn(printable(notice), RuntimeWarning, stacklevel=2)
            self._open()
        elif self._bar is None:
            return
        elif isinstance(message, RunStarted):
            self._labels[message.key] = message.label
            self._bar.set_description_str(message.label, refresh=True)
        elif isinstance(message, BatchProgress):
            label = self._labels.get(message.key, "")
            self._bar.set_description_str(f"{label}: {message.what}", refresh=False)
        elif isinstance(message, RunFinished):
            self._bar.set_postfix_str(f"{message.label} on {message.device}", refresh=False)
            self._bar.update(self._count.done - self._bar.n)
        elif isinstance(message, RunFailed):
            self._failed += 1
            self._bar.update(self._count.done - self._bar.n)
            self._bar.write(
                printable(f"failed {message.label}: {hinted(message.error, message.fix)}")
            )

    def _open(self) -> None:
        """A bar of every run listed, where any is to compute."""
        count = self._count
        if not count.to_compute:
            return
        # tqdm.auto picks the notebook bar in Jupyter when ipywidgets is there, else text.
        from tqdm.auto import tqdm

        from_cache = f" ({count.cached} cached)" if count.cached else ""
        bar = {"total": count.total, "initial": count.done, "unit": "run",
               "desc": f"{self.what}{from_cache}"}  # fmt: skip
        if not _is_notebook_bar(tqdm):
            self._bar = tqdm(**bar)
            return
        from IPython.display import display

        self._bar = tqdm(**bar, display=False)
        self._shown = display(self._bar.container, display_id=True)  # type: ignore[no-untyped-call]

    def close(self) -> None:
        if self._bar is not None:
            # A full bar is not a success when runs failed: the description says how many.
            failed = f" ({self._failed} failed)" if self._failed else ""
            self._bar.set_description_str(f"{self.what}{failed}", refresh=False)
            self._bar.close()
            if self._shown is not None:
                # A saved notebook keeps a widget's text as it was when shown ("0%"), which is
                # what a reader without the live widget sees: show the finished bar's again.
                self._shown.update(self._bar.container)
            self._bar = self._shown = None


def _is_notebook_bar(bar: type) -> bool:
    """Whether tqdm.auto chose its notebook bar (a widget: Jupyter with ipywidgets)."""
    notebook = sys.modules.get("tqdm.notebook")
    return notebook is not None and issubclass(bar, notebook.tqdm_notebook)
