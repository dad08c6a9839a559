"""The window's process collects reference cycles on the GUI thread only (ui/gui_collector.py):
Python's automatic collector is off while the collector lives, and its timer collects what
the automatic one would have. Every window test runs under one (tests/ui/conftest.py), as the
app does."""

from __future__ import annotations

import gc
import weakref


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_cycles_are_collected_by_the_gui_threads_timer_not_by_python(qtbot):
    assert not gc.isenabled()
    # Well past the youngest generation's threshold: the count is allocations less frees,
    # and what the event loop frees meanwhile lowers it.
    cycles = [_Cycle() for _ in range(10 * gc.get_threshold()[0])]
    alive = weakref.ref(cycles[0])
    del cycles
    assert alive() is not None  # Python's own collector did not run
    qtbot.waitUntil(lambda: alive() is None, timeout=5000)  # the timer's did
