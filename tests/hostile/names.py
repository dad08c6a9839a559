"""Names a file, a model or a bundle can carry, each of which once reached a terminal or Qt
as something other than text: markup nested deep enough to freeze a layout,
terminal escapes that set a window's title or clear the screen, a newline that forges the next
line of output, a bidirectional override, and sheer length."""

NESTED_TABLES = "<table><tr><td>" * 22 + "x" + "</td></tr></table>" * 22
WINDOW_TITLE = "conv\x1b]0;pwned\x07"
SCREEN_CLEAR = "dense\x1b[2J\x1b[H"
FORGED_LINE = "pool\nFAIL forged line"
RIGHT_TO_LEFT = "out\u202egnp.exe"
LONG = "c" * 10_000

HOSTILE_NAMES = (NESTED_TABLES, WINDOW_TITLE, SCREEN_CLEAR, FORGED_LINE, RIGHT_TO_LEFT, LONG)
# What none of them may bring into a terminal's output.
TERMINAL_CONTROLS = ("\x1b", "\x07", "\u202e")
