"""``python -m socialsim``: the same command line as ``socialsim``."""

import sys

from socialsim.cli import main

sys.exit(main())
