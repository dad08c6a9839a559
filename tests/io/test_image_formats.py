"""Images are opened only as the formats segdiff reads: Pillow picks a
plugin from a file's bytes, and its EPS plugin runs Ghostscript on the PostScript inside a
file named ``.png``. Such a file is refused in one line, and no program is started."""

import os
import subprocess
import sys
import textwrap

EPS = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 8 8\n0 0 moveto 8 8 lineto stroke\nshowpage\n"


def test_a_postscript_file_named_png_is_refused_without_starting_ghostscript(tmp_path):
    image = tmp_path / "cell.png"
    image.write_bytes(EPS)
    bin_folder = tmp_path / "bin"
    bin_folder.mkdir()
    marker = tmp_path / "ghostscript-ran"
    fake = bin_folder / "gs"
    fake.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    fake.chmod(0o755)
    for program in ("truth", "image"):
        script = textwrap.dedent(
            f"""
            from pathlib import Path
            from segdiff_gui.core.errors import InputError
            from segdiff_gui.io.images import read_image
            from segdiff_gui.io.truth import TruthFolder
            try:
                if "{program}" == "image":
                    read_image(Path({str(image)!r}))
                else:
                    TruthFolder({str(tmp_path)!r}).read("cell.png", (8, 8), 2)
            except InputError as error:
                print(error)
            """
        )
        result = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            env={**os.environ, "PATH": f"{bin_folder}:{os.environ['PATH']}"},
            timeout=120,
        )
        assert not marker.exists(), program
        if program == "image":
            assert result.stdout.strip() == (
                f"{image}: not a readable image (PNG, JPEG, TIFF or NPY expected)"
            ), result.stderr
