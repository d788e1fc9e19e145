"""The ``cvb`` argument parser: defaults shown in ``--help``, typos answered with a suggestion."""

from __future__ import annotations

import argparse
from typing import NoReturn


class HelpFormatter(argparse.HelpFormatter):
    """Shows each option's default in ``--help``, unless its help already states it or
    there is none to state (None, False)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            action.option_strings
            and default is not None
            and default is not False
            and default != argparse.SUPPRESS
            and "default" not in text
        ):
            shown = ",".join(map(str, default)) if isinstance(default, list) else default
            text += f" (default: {shown})"
        return text


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors suggest the command or option meant."""

    def error(self, message: str) -> NoReturn:
        super().error(message + _did_you_mean(self, message))


def _known_options(parser: argparse.ArgumentParser) -> list[str]:
    """Every option string of ``parser`` and of its subcommands."""
    found = list(parser._option_string_actions)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += _known_options(sub)
    return found


def _did_you_mean(parser: argparse.ArgumentParser, message: str) -> str:
    import difflib
    import re

    if m := re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message):
        choices = re.findall(r"'([^']*)'", m.group(2))
        close = difflib.get_close_matches(m.group(1), choices, n=1)
    elif m := re.search(r"unrecognized arguments: (.*)", message):
        options = _known_options(parser)
        close = [
            match[0]
            for word in m.group(1).split()
            if word.startswith("-")
            and (match := difflib.get_close_matches(word.split("=")[0], options, n=1))
        ]
    else:
        return ""
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
