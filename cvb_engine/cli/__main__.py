"""``python -m cvb_engine.cli`` is ``cvb``."""

from cvb_engine.cli import program

if __name__ == "__main__":  # not when a test walks the package and imports this module
    program()
