import sys

from segdiff_gui.cli.main import main

sys.exit(main())
