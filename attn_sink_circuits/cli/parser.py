"""The parser every `circuits` command is built on: argparse's without abbreviations (a prefix of
a flag is an unknown flag, with "did you mean"), plus renamed flags (hidden, still working, with
a note naming the new flag), "did you mean" for an unknown flag or choice (with the
subcommand's own usage), and a description on every subcommand."""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from typing import NoReturn

CHOICE = re.compile(r"invalid choice: '(?P<given>[^']*)' \(choose from (?P<known>.*)\)")
"""argparse's message for a value outside `choices` (a subcommand name included)."""


class RenamedFlag(argparse.Action):
    """A flag's old spelling: does what the `new` flag does and says, once, that it is renamed."""

    def __init__(self, option_strings, dest, *, new: str, value=None, **kw) -> None:
        super().__init__(option_strings, dest, **kw)
        self.new = new
        self.value = value  # the value of a flag that takes none (--no-x / --x)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        setattr(namespace, self.dest, self.value if self.nargs == 0 else values)
        if option_string not in parser.noted:
            parser.noted.add(option_string)
            print(
                f"{parser.prog}: note: {option_string} is now {self.new} (the old name still "
                "works; CHANGELOG.md lists the renamed flags)",
                file=sys.stderr,
            )


class CommandParser(argparse.ArgumentParser):
    """An ArgumentParser whose subcommands are CommandParsers too; `commands` maps each
    subcommand's name to its parser once `add_commands` made them."""

    def __init__(self, *args, **kw) -> None:
        kw.setdefault("allow_abbrev", False)  # a prefix (--budget for --budgets) is unknown
        super().__init__(*args, **kw)
        self.commands: dict[str, CommandParser] = {}
        self.noted: set[str] = set()

    def add_commands(self) -> argparse.Action:
        """The subcommands' action (one of them required); its parsers land in `commands`."""
        sub = self.add_subparsers(dest="command", required=True, metavar="COMMAND")
        self.commands = sub.choices
        return sub

    def rename(self, old: str, new: str) -> None:
        """Accept `old` as a hidden spelling of the existing flag `new`."""
        target = self._option_string_actions[new]
        kw = {"dest": target.dest, "default": argparse.SUPPRESS, "help": argparse.SUPPRESS}
        if target.nargs == 0:  # a switch: --x stores True, --no-x False
            kw.update(nargs=0, value=not new.startswith("--no-"))
        else:
            kw.update(type=target.type, nargs=target.nargs, choices=target.choices,
                      metavar=target.metavar)  # fmt: skip
        # In the new flag's mutually exclusive group, if it has one (a required input).
        groups = [g for g in self._mutually_exclusive_groups if target in g._group_actions]
        (groups[0] if groups else self).add_argument(old, action=RenamedFlag, new=new, **kw)

    def spellings(self) -> dict[str, str]:
        """Every long flag, shown or renamed, -> the flag `--help` shows for it."""
        return {
            s: getattr(action, "new", s)
            for action in self._actions
            for s in action.option_strings
            if s.startswith("--")
        }

    def unknown(self, extras: list[str]) -> NoReturn:
        """Exit with this parser's usage, naming the unrecognized arguments and the nearest
        known flag of each unknown one."""
        flags = [arg.split("=", 1)[0] for arg in extras if arg.startswith("-")]
        spellings = self.spellings()
        guesses = []
        for flag in flags:
            close = difflib.get_close_matches(flag, spellings, n=1, cutoff=0.6)
            if close:
                guess = spellings[close[0]]
                guesses.append(guess if len(flags) == 1 else f"{guess} for {flag}")
        hint = f" (did you mean {', '.join(guesses)}?)" if guesses else ""
        self.error(f"unrecognized arguments: {' '.join(extras)}{hint}")

    def error(self, message: str) -> NoReturn:
        """argparse's error (usage, then one line), with "did you mean" for a bad choice."""
        found = CHOICE.search(message)
        if found:
            known = re.findall(r"'([^']*)'", found["known"])
            close = difflib.get_close_matches(found["given"], known, n=1, cutoff=0.5)
            message += f" (did you mean {close[0]}?)" if close else ""
        super().error(message)


def command(sub, name: str, summary: str, details: str = "") -> CommandParser:
    """A subcommand's parser: `summary` in the list of commands; summary and `details` as the
    description its --help shows."""
    text = f"{summary[0].upper()}{summary[1:]}." + (f" {details}" if details else "")
    return sub.add_parser(name, help=summary, description=text)


__all__ = ["CommandParser", "RenamedFlag", "command"]
