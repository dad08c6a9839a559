"""What the Runs tab shows stays in view and apart: a typo in the matrix said whole under the
line typed, and the images' captions each in a cell of its own."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect
from PySide6.QtGui import QIcon, QPixmap


def test_a_typo_in_the_matrix_is_said_whole_in_view_under_the_line_typed(
    window_for, fake_demo_cache, qtbot
):
    """The message for ``xlaa=on`` / ``batch=two`` was right, but sat below the
    fold of the editors' scroll area, cut off after its first words. It is scrolled into
    view, every wrapped line of it."""
    window = window_for("--cache", fake_demo_cache.root, "--no-run")
    window.docks[0].raise_()  # the Runs tab, in front of the inspector on a narrow window
    panel = window.run_panel
    panel.editors.verticalScrollBar().setValue(0)  # the matrix's top in view, as opened
    panel.editor.extra.setPlainText("xlaa=on\nbatch=two")
    label = panel.editor.extra_problem
    qtbot.waitUntil(lambda: label.isVisible(), timeout=5000)
    assert "unknown config key 'xlaa'" in label.text() and "'two'" in label.text()
    assert not panel.run_button.isEnabled()
    viewport = panel.editors.viewport()

    def in_view() -> bool:
        top_left = label.mapTo(viewport, QPoint(0, 0))
        return viewport.rect().contains(QRect(top_left, label.size()))

    qtbot.waitUntil(in_view, timeout=5000)
    assert label.height() >= label.heightForWidth(label.width())  # wrapped, none cut


def test_image_captions_never_touch(window_for, fake_demo_cache, tmp_path):
    """The captions ``ihc.png`` and ``chelsea.png`` ran together. Each caption
    keeps to a cell of its own, long names cut in the middle (the whole name its tooltip)."""
    window = window_for("--cache", fake_demo_cache.root, "--no-run")
    window.docks[0].raise_()  # the Runs tab, in front of the inspector on a narrow window
    panel = window.run_panel
    names = ["ihc.png", "chelsea.png", "astronaut.png", "a_much_longer_image_name_than_fits.png"]
    picture = QPixmap(56, 56)
    picture.fill()
    panel.set_images(names, [QIcon(picture)] * len(names), 1)
    images = panel.images
    metrics = images.fontMetrics()
    captions = [images.item(i).text() for i in range(images.count())]
    spans = []  # each caption's pixels, centred in its item
    for index, caption in enumerate(captions):
        centre = images.visualItemRect(images.item(index)).center().x()
        half = metrics.horizontalAdvance(caption) / 2
        spans.append((centre - half, centre + half))
    for (_, left_end), (right_start, _) in zip(spans, spans[1:], strict=False):
        assert right_start - left_end >= 8, spans
    # The gap is around each item, above and below too: the captions are not cut at the
    # list's bottom (the reread: the row grew by the gap, the list did not).
    bottoms = [images.visualItemRect(images.item(i)).bottom() for i in range(images.count())]
    assert max(bottoms) < images.viewport().height(), (bottoms, images.viewport().height())
    assert captions[:3] == ["ihc.png", "◎ chelsea.png", "astronaut.png"]
    assert "…" in captions[3] and captions[3].endswith(".png")
    assert images.item(3).toolTip().startswith(names[3])
