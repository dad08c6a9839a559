"""thread_map: the results of a plain loop, computed side by side, never stuck behind
another caller's work in the shared pool, and nothing of the caller's let go of in a pool
thread."""

import threading
import time
import weakref

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


class _Noted:
    """Stands for a Qt object: it must be let go of in the thread that made it."""


@pytest.mark.parametrize("fails", [False, True], ids=["returns", "raises"])
def test_what_a_caller_hands_over_is_let_go_of_in_the_callers_thread(pool_that_holds_on, fails):
    # The window's grid hands thread_map a function that holds the grid: let go of last in a
    # pool thread, a widget and its scene are destroyed there, under the GUI thread's feet.
    made: list[str] = []
    released: list[tuple[str, str]] = []

    def noted(name: str) -> _Noted:
        thing = _Noted()
        made.append(name)
        weakref.finalize(thing, lambda: released.append((name, threading.current_thread().name)))
        return thing

    def call() -> None:  # its function and items are let go of as it returns, here
        held = noted("held by the function")
        items = [noted(f"item {n}") for n in range(3)]

        def function(item: _Noted) -> _Noted:
            assert held is not None
            if item is items[0]:  # the caller's own: the pool starts the next meanwhile
                time.sleep(0.05)
            elif fails:
                raise ValueError("no")
            return noted("result")

        if fails:
            with pytest.raises(ValueError, match="no"):
                thread_map(function, items)
        else:
            assert len(thread_map(function, items)) == 3

    call()
    # All of it let go of at once, here: the pool holds nothing of it, and no cycle does.
    here = threading.current_thread().name
    assert sorted(name for name, _ in released) == sorted(made)
    assert [name for name, thread in released if thread != here] == []
