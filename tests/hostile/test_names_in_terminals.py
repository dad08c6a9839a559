"""Names are plain text in the terminal: the layer table, the repair
table and every sentence print a layer's name as the text it is, whatever it holds."""

import io
from collections.abc import Iterator
from types import SimpleNamespace

import numpy as np

from segdiff_gui.cli.commands.layers import layer_table
from segdiff_gui.cli.progress_view import drive
from segdiff_gui.cli.text import TerminalConsole, say
from segdiff_gui.core.layer_stats import LayerComparison, compare_layer
from segdiff_gui.core.protocol import Message, RunFailed, RunFinished, RunStarted
from tests.hostile.names import FORGED_LINE, HOSTILE_NAMES, TERMINAL_CONTROLS


def _console() -> tuple[TerminalConsole, io.StringIO]:
    written = io.StringIO()
    return TerminalConsole(file=written, force_terminal=False, width=200, soft_wrap=True), written


def test_a_layer_table_and_its_sentences_print_hostile_names_as_text():
    rng = np.random.default_rng(0)
    layers = []
    for name in HOSTILE_NAMES:
        values = rng.standard_normal((4, 4)).astype(np.float32)
        layers.append(compare_layer(name, values, values + np.float32(1e-3)))
    comparison = LayerComparison(tuple(layers))
    console, written = _console()
    console.print(layer_table(comparison, f"{HOSTILE_NAMES[1]} → {HOSTILE_NAMES[2]}"))
    for name in HOSTILE_NAMES:
        say(console, f"Born in {name}: the first layer whose output differs.")
    console.print(f"markup is allowed, names are not: {HOSTILE_NAMES[2]}")
    text = written.getvalue()
    assert not any(control in text for control in TERMINAL_CONTROLS)
    assert not any(line.startswith("FAIL forged") for line in text.splitlines())
    assert "pool\ufffdFAIL forged line" in text  # shown, not executed
    assert "<table><tr><td>" in text  # markup of a name is text too


def test_the_console_keeps_its_own_lines_and_styles():
    console, written = _console()
    console.print("two\nlines")
    assert written.getvalue() == "two\nlines\n"
    styled = io.StringIO()
    console = TerminalConsole(file=styled, force_terminal=True, color_system="standard")
    console.print("[bold]b[/]", markup=True)  # markup only where a call asks for it
    assert "\x1b[1m" in styled.getvalue()  # rich's own escape codes still reach a terminal
    console, written = _console()
    say(console, FORGED_LINE)
    assert written.getvalue() == FORGED_LINE.replace("\n", "\ufffd") + "\n"


def test_a_run_label_naming_layers_forges_no_line_of_progress():
    """A repair's trial is labelled by the layers it keeps in float32 (``… f32:pool\\nFAIL
    forged line r0``): the line saying it finished, or failed, printed the layer's newline."""

    class Trials:
        plan = SimpleNamespace(targets=(0,), jobs=())  # one target: a line per run

        def run(self) -> Iterator[Message]:
            label = f"torch cpu b1 bf16 f32:{FORGED_LINE} r0"
            yield RunStarted("k0", label)
            yield RunFinished("k0", label, 0.13, "cpu:0")
            yield RunFailed("k1", label, f"{FORGED_LINE} would not compile")

        def cancel(self) -> None:
            raise AssertionError("nothing to cancel")

    console, written = _console()
    drive(Trials(), console)  # type: ignore[arg-type]
    lines = written.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert (
        lines[0]
        == "finished torch cpu b1 bf16 f32:pool\ufffdFAIL forged line r0 on cpu:0 in 0.13 s"
    )
    assert not any(line.startswith("FAIL forged") for line in lines)
