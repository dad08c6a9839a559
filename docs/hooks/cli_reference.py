"""MkDocs hook: the CLI reference written from the parsers themselves at build time.

``docs/reference/cli.md`` holds the marker ``<!-- cli-reference -->``; this hook puts in its
place every command's ``--help`` as ``segdiff`` and ``segdiff-gui`` print it, so the page
cannot drift from the code (``tests/test_docs.py`` builds the site with ``--strict``).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

MARKER = "<!-- cli-reference -->"
WIDTH = "88"  # argparse wraps help to $COLUMNS: one width, whatever terminal builds the site


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _section(title: str, anchor: str, parser: argparse.ArgumentParser, summary: str) -> str:
    text = parser.format_help().rstrip()
    lead = f"{summary}\n\n" if summary else ""
    return f"## `{title}` {{#{anchor}}}\n\n{lead}```text\n{text}\n```\n"


def cli_reference() -> str:
    """Every command's help, in the parsers' order: ``segdiff``, its subcommands, the window."""
    from segdiff_gui.cli.parser import build_parser
    from segdiff_gui.ui.app import _parser as gui_parser

    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        top = build_parser()
        summaries = {
            choice.dest: choice.help or ""
            for action in top._actions
            if isinstance(action, argparse._SubParsersAction)
            for choice in action._choices_actions
        }
        sections = [_section("segdiff", "segdiff", top, "")]
        for name, parser in _subcommands(top).items():
            sections.append(_section(f"segdiff {name}", name, parser, summaries.get(name, "")))
        sections.append(_section("segdiff-gui", "segdiff-gui", gui_parser(), ""))
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before
    return "\n".join(sections)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, cli_reference())
