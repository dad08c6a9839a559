"""thread_map: the results of a plain loop, computed side by side, and never stuck behind
another caller's work in the shared pool."""

import threading
import time

import pytest

from segdiff_gui.core import parallel
from segdiff_gui.core.parallel import thread_map


def test_results_come_in_order():
    assert thread_map(lambda n: n * n, range(7)) == [n * n for n in range(7)]
    assert thread_map(str, []) == []


def test_an_exception_reaches_the_caller():
    def fail_on_three(n):
        if n == 3:
            raise ValueError("three")
        return n

    with pytest.raises(ValueError, match="three"):
        thread_map(fail_on_three, range(5))


def test_a_call_does_not_wait_behind_work_queued_by_another(monkeypatch):
    monkeypatch.setattr(parallel, "_cores", lambda: 2)
    # A background worker (a diagnosis, say) fills the shared pool with tasks that hold on
    # until released...
    release = threading.Event()
    background = threading.Thread(target=thread_map, args=(lambda _: release.wait(30), range(6)))
    background.start()
    time.sleep(0.05)
    # ...and a call from the GUI thread still finishes while they are all held.
    answers = []
    caller = threading.Thread(target=lambda: answers.append(thread_map(lambda n: n + 1, range(4))))
    caller.start()
    caller.join(timeout=10)
    finished_while_held = not caller.is_alive()
    release.set()
    background.join()
    caller.join()
    assert finished_while_held
    assert answers == [[1, 2, 3, 4]]


def test_nothing_of_a_call_still_runs_once_it_has_raised(monkeypatch):
    monkeypatch.setattr(parallel, "_cores", lambda: 3)
    running = []

    def slow_unless_first(n):
        if n == 0:
            time.sleep(0.05)  # let the pool start the others
            raise ValueError("first")
        running.append(n)
        time.sleep(0.2)
        running.remove(n)
        return n

    with pytest.raises(ValueError, match="first"):
        thread_map(slow_unless_first, range(4))
    assert running == []  # the caller may free what the items were using
