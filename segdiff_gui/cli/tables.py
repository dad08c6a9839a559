"""Every table the command line prints, fitted to the terminal by one rule: figures are never
cut. A column of figures is as wide as its widest figure; text wraps between its words; a
name (a run's label, a model or an image file, a host) wraps anywhere and, past a few lines,
is shortened in the middle, so that its start and its end (a file's extension, a label's
distinguishing tail) stay. Where even that does not fit, each row is shown as a record of
its own, a line per column (as ``psql``'s expanded display does). ``--json`` is never
shortened: it is not a table."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import Enum

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, JustifyMethod, RenderResult
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from segdiff_gui.core.text import printable, terminal_safe

__all__ = ["Column", "FittedTable", "Kind", "middle_shortened", "name_cell"]


class Kind(Enum):
    """What a column holds, which says how it may give up width."""

    FIGURE = "figure"  # numbers, ids, short words: whole, on the lines they were given
    TEXT = "text"  # words with figures among them: wrapped between words only
    NAME = "name"  # one name: wrapped anywhere, and shortened in the middle past NAME_LINES


# A name keeps at least this many columns before the table turns into records, and shows on
# at most NAME_LINES lines (a longer one is shortened in the middle to fill them).
NAME_FLOOR = 16
NAME_LINES = 3
# A header's word longer than this is folded rather than widening its column.
_HEADER_WORD = 12
# A column of names this many columns short of whole or fewer is made whole by another's.
_NEARLY = 3


@dataclass(frozen=True)
class _Frame:
    """How a table is drawn, and what that costs beside its cells' widths."""

    boxed: bool

    def cost(self, columns: int) -> int:
        # Boxed (rich's default): a space either side of each cell and a rule between and
        # around the columns. Plain: two spaces between columns, nothing around them.
        return 3 * columns + 1 if self.boxed else 2 * (columns - 1)

    def table(self, title: Text | None, caption: Text | None, show_lines: bool) -> Table:
        if self.boxed:
            return Table(title=title, caption=caption, show_lines=show_lines)
        return Table(
            title=title,
            caption=caption,
            show_lines=show_lines,  # a blank line between rows: this box's row rule is blank
            box=box.SIMPLE_HEAD,
            show_edge=False,
            padding=(0, 1),
            collapse_padding=True,
            pad_edge=False,
        )


# The frames tried in turn: the boxed table, then the plain one, which leaves more room.
_FRAMES = (_Frame(boxed=True), _Frame(boxed=False))


@dataclass(frozen=True)
class Column:
    """A column's header, what it holds and how its cells line up."""

    header: str
    kind: Kind
    justify: JustifyMethod
    last: bool = False  # gives up width only once every other column has given all it can


def _lines(text: str) -> list[str]:
    return text.split("\n")


def _widest_line(text: str) -> int:
    return max(cell_len(line) for line in _lines(text))


def _widest_word(text: str) -> int:
    return max((cell_len(word) for line in _lines(text) for word in line.split()), default=0)


def _header_width(header: str, lines: int) -> int:
    """The least width that wraps ``header`` between its words onto at most ``lines``."""
    words = [cell_len(word) for word in header.split()] or [0]
    width = max(words)
    while True:
        used, count = 0, 1
        for word in words:
            if used and used + 1 + word > width:
                count, used = count + 1, word
            else:
                used += word + (1 if used else 0)
        if count <= lines:
            return width
        width += 1


def _take(text: str, cells: int, from_end: bool = False) -> str:
    """The first (or last) characters of ``text`` that fill at most ``cells`` columns."""
    taken: list[str] = []
    used = 0
    for character in reversed(text) if from_end else text:
        used += cell_len(character)
        if used > cells:
            break
        taken.append(character)
    return "".join(reversed(taken) if from_end else taken)


def middle_shortened(text: str, cells: int) -> str:
    """``text`` in at most ``cells`` columns: whole where it fits, else its start and its end
    with ``…`` between (the end gets the odd column: a file's extension, a label's tail)."""
    if cell_len(text) <= cells:
        return text
    keep = max(cells - 1, 0)
    head = keep // 2
    return _take(text, head) + "…" + _take(text, keep - head, from_end=True)


def _folded(text: str, width: int) -> list[str]:
    """``text`` cut into lines of ``width`` columns, anywhere."""
    lines: list[str] = []
    while text:
        line = _take(text, width) or text[0]
        lines.append(line)
        text = text[len(line) :]
    return lines


def _wrapped(text: str | None) -> Text | None:
    """A title or a caption as plain text that wraps to the table's width (sentences printed
    beside the table do not: the console soft-wraps)."""
    return None if text is None else Text(printable(text), no_wrap=False, overflow="fold")


def _shared(room: int, least: Sequence[int], most: Sequence[int]) -> list[int]:
    """Widths between ``least`` and ``most`` that fill at most ``room``, shared as water fills
    a vessel: the widest column gives up width first, none below its least."""

    def at(level: int) -> list[int]:
        return [max(low, min(high, level)) for low, high in zip(least, most, strict=True)]

    low, high = 0, max(most, default=0)
    while low < high:
        middle = (low + high + 1) // 2
        if sum(at(middle)) <= room:
            low = middle
        else:
            high = middle - 1
    widths = at(low)
    # What is left goes to the columns nearest their whole width first: one wraps no more.
    spare = room - sum(widths)
    order = sorted(range(len(widths)), key=lambda i: most[i] - widths[i])
    for index in order:
        given = min(spare, most[index] - widths[index])
        widths[index] += given
        spare -= given
    return widths


def _completed(
    widths: list[int], least: Sequence[int], natural: Sequence[int], names: Sequence[bool]
) -> list[int]:
    """``widths`` where a column of names a few columns short of whole (``unet_sigmoid.kera``
    and ``s``: a name folds anywhere, text wraps between words) has taken them from the
    column that wraps anyway and can best give them."""
    for index in sorted(range(len(widths)), key=lambda i: natural[i] - widths[i]):
        short = natural[index] - widths[index] if names[index] else 0
        donors = [j for j in range(len(widths)) if j != index and widths[j] < natural[j]]
        donor = max(donors, key=lambda j: widths[j] - least[j], default=None)
        if 0 < short <= _NEARLY and donor is not None and widths[donor] - least[donor] >= short:
            widths[donor] -= short
            widths[index] += short
    return widths


def name_cell(console: Console, name: str, width: int) -> str:
    """A name in a column ``width`` wide: wrapped as the table wraps text (between words, a
    word longer than the column folded) where that takes at most :data:`NAME_LINES` lines;
    else shortened in the middle to fill them, cut anywhere."""
    if len(Text(name).wrap(console, width, overflow="fold")) <= NAME_LINES:
        return name
    return "\n".join(_folded(middle_shortened(name, NAME_LINES * width), width))


class FittedTable:
    """A table of columns of a :class:`Kind` each, laid out at render time for the width the
    console gives it (see the module's rule). Cells, headers and titles are plain text: the
    console shows them as the text they are (``cli/text.TerminalConsole``); a newline in a
    header, a name or a text shows as U+FFFD, only figures (segdiff's own) have lines of their
    own."""

    def __init__(self, title: str | None = None, caption: str | None = None) -> None:
        self.title = title
        self.caption = caption
        self._columns: list[Column] = []
        self._rows: list[list[str]] = []
        self._sections: set[int] = set()  # row indices that start a new section

    def figure(self, header: str, justify: JustifyMethod = "right") -> None:
        self._columns.append(Column(printable(header), Kind.FIGURE, justify))

    def text(self, header: str, justify: JustifyMethod = "left") -> None:
        self._columns.append(Column(printable(header), Kind.TEXT, justify))

    def name(self, header: str, last: bool = False) -> None:
        """A column of names; ``last``: kept whole while any other column can still give up
        width."""
        self._columns.append(Column(printable(header), Kind.NAME, "left", last))

    def add_row(self, *cells: str) -> None:
        if len(cells) != len(self._columns):
            raise ValueError(f"{len(cells)} cells for {len(self._columns)} columns")
        self._rows.append(
            [
                terminal_safe(cell) if column.kind is Kind.FIGURE else printable(cell)
                for column, cell in zip(self._columns, cells, strict=True)
            ]
        )

    def add_section(self) -> None:
        """A rule before the next row (between the rows of two kinds)."""
        if self._rows:
            self._sections.add(len(self._rows))

    @property
    def columns(self) -> list[Column]:
        return list(self._columns)

    @property
    def rows(self) -> list[list[str]]:
        return [list(row) for row in self._rows]

    # Layout ----------------------------------------------------------------------------------

    def _cells(self, index: int) -> list[str]:
        return [row[index] for row in self._rows]

    def _natural(self, index: int) -> int:
        cells = self._cells(index)
        return max(_widest_line(self._columns[index].header), *map(_widest_line, cells), 1)

    def _snug(self, index: int) -> int:
        """The width that wraps the header onto two lines at most and no cell: a figure's,
        a text's or a name's widest line."""
        header = min(_header_width(self._columns[index].header, 2), _HEADER_WORD)
        return max(header, *map(_widest_line, self._cells(index)), 1)

    def _least(self, index: int) -> int:
        column = self._columns[index]
        if column.kind is Kind.FIGURE:
            return self._snug(index)
        header = min(_widest_word(column.header), _HEADER_WORD)
        if column.kind is Kind.TEXT:
            return max(header, *map(_widest_word, self._cells(index)), 1)
        return min(self._snug(index), max(NAME_FLOOR, header))

    def layout(self, width: int) -> tuple[_Frame, list[int]] | None:
        """The frame and each column's width for a table ``width`` columns wide, or ``None``
        where the figures and the narrowest names fit no frame (the rows are then shown as
        records). Headers wrap first, onto two lines at most; then text, names and headers
        give up width together, the widest first (a column kept for last after the others).
        The boxed frame is tried before the plain."""
        count = len(self._columns)
        natural = [self._natural(i) for i in range(count)]
        snug = [self._snug(i) for i in range(count)]
        least = [self._least(i) for i in range(count)]
        names = [column.kind is Kind.NAME for column in self._columns]
        for frame in _FRAMES:
            room = width - frame.cost(count)
            if sum(natural) <= room:
                return frame, natural
            if sum(snug) <= room:
                return frame, _completed(_shared(room, snug, natural), snug, natural, names)
            # The columns kept for last give up width once the others have given all.
            first = [
                high if column.last else low
                for column, high, low in zip(self._columns, snug, least, strict=True)
            ]
            if sum(first) <= room:
                return frame, _completed(_shared(room, first, snug), least, natural, names)
            if sum(least) <= room:
                return frame, _completed(_shared(room, least, first), least, natural, names)
        return None

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        layout = self.layout(options.max_width) if self._columns else None
        if layout is None:
            yield from self._records(options.max_width)
            return
        yield self._table(console, *layout)

    def _table(self, console: Console, frame: _Frame, widths: Sequence[int]) -> Table:
        shown = [
            [
                name_cell(console, cell, width) if column.kind is Kind.NAME else cell
                for column, cell, width in zip(self._columns, row, widths, strict=True)
            ]
            for row in self._rows
        ]
        # Rows of several lines are told apart by a rule between every two rows.
        several = any(
            "\n" in cell or cell_len(cell) > width
            for row in shown
            for cell, width in zip(row, widths, strict=True)
        )
        table = frame.table(_wrapped(self.title), _wrapped(self.caption), several)
        for column, width in zip(self._columns, widths, strict=True):
            table.add_column(column.header, justify=column.justify, width=width, overflow="fold")
        for index, row in enumerate(shown):
            if index in self._sections:
                table.add_section()
            table.add_row(*row)
        return table

    def _records(self, width: int) -> Iterator[Table | Rule | Text]:
        """Each row as a record of its own: a header and its cell per line (empty cells left
        out), the cell wrapping as its column would."""
        if title := _wrapped(self.title):
            yield title
        header_width = min(max((cell_len(c.header) for c in self._columns), default=1), width // 3)
        for number, row in enumerate(self._rows, 1):
            yield Rule(f"{number} of {len(self._rows)}", align="left")
            record = Table.grid(padding=(0, 2))
            record.add_column(width=header_width, overflow="fold", style="bold")
            record.add_column(overflow="fold")
            for column, cell in zip(self._columns, row, strict=True):
                if cell:
                    record.add_row(column.header, cell)
            yield record
        if caption := _wrapped(self.caption):
            yield caption
