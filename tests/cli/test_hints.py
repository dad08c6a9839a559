"""A hint joins its message as one sentence, and names only an option the command has."""

from segdiff_gui.api.hints import hinted
from segdiff_gui.cli.hints import with_flag


def test_a_hint_is_one_sentence_and_names_only_an_option_the_command_has():
    """A hint joins its sentence, not "it needs RGB input (colour conversion) (add --color
    rgb)", and names only an option the command has."""
    message = (
        "camera.png: model expects 3 channel(s), image has 1; it needs RGB input (colour "
        "conversion)"
    )
    assert with_flag(message, "color=rgb", "run") == f"{message} — add --color rgb"
    assert hinted(message, "color=rgb") == f'{message} — pass preprocess={{"color": "rgb"}}'
    assert with_flag("x: is ambiguous: a, b", "group", "explain").endswith(" — add --group ID")
    assert with_flag("x: is ambiguous: a, b", "group", "bundle") == "x: is ambiguous: a, b"
