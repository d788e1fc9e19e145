"""``python -m cvb_engine.cli`` is ``cvb``."""

import sys

from cvb_engine.cli import main

if __name__ == "__main__":  # not when a test walks the package and imports this module
    sys.exit(main())
