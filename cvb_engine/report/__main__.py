"""``python -m cvb_engine.report``: ``cvb report`` under its module's name.

An entry point, like ``cvb`` itself: it may import the CLI, which imports the
report module (the library never imports the CLI).
"""

import sys

from cvb_engine.cli import main

if __name__ == "__main__":  # not when a test walks the package and imports this module
    sys.exit(main(["report", *sys.argv[1:]]))
