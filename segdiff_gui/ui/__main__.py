import sys

from segdiff_gui.ui.app import main

sys.exit(main())
