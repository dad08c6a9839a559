"""The frozen app's entry point. One executable plays three parts, because in a PyInstaller
bundle ``sys.executable`` is the app itself and there is no ``python -m``:

- ``segdiff-gui [ARGS]``            the desktop tool (the default);
- ``segdiff-gui --engine COMMAND``  an engine child, started by the app's own runner
  (see ``segdiff_gui.runner.child.engine_command``);
- ``segdiff-gui --cli ARGS``        the ``segdiff`` command line.
"""

import sys


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--engine":
        # Only this path imports TensorFlow, and only in the child.
        from segdiff_gui.engine.__main__ import main as engine_main

        return engine_main(sys.argv[2:])
    if len(sys.argv) > 1 and sys.argv[1] == "--cli":
        from segdiff_gui.cli.main import main as cli_main

        return cli_main(sys.argv[2:])
    from segdiff_gui.ui.app import main as gui_main

    return gui_main()


if __name__ == "__main__":
    sys.exit(main())
