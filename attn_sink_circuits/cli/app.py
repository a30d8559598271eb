"""The `circuits` program: builds the parser from the command modules, parses, runs the checks
that need no model, calls the command, and turns errors and interrupts into one line."""

from __future__ import annotations

import argparse
import signal
import sys

from attn_sink_circuits.cli import (
    claims,
    discover,
    emergence,
    export,
    faithfulness,
    generate,
    kv,
    models,
    p0,
    secondary,
    sinks,
    train_lm,
    trigger,
)
from attn_sink_circuits.cli.checks import check_model_args
from attn_sink_circuits.cli.parser import CommandParser
from attn_sink_circuits.cli.renames import renamed_in
from attn_sink_circuits.runs.owned import writing_as

COMMANDS = (
    p0, sinks, discover, faithfulness, export, secondary, claims, kv, trigger, generate, train_lm,
    emergence, models,
)  # fmt: skip
"""The command modules, in the order `circuits --help` lists them, as a newcomer uses them: the
P0-sink circuit first (`p0 --quick`), then sinks, circuits of one's own pairs, judging and
exporting a circuit, the further studies, and last the tools; each has `add(sub)`."""
START = (
    "Start with `circuits p0 --quick` (a rough P0-sink circuit of the default model in a few "
    "minutes; `circuits p0` for the documented run), `circuits discover --pairs FILE` for the "
    "circuit of your own counterfactual pairs, and `circuits faithfulness` to judge a saved "
    "circuit on new texts or pairs. `circuits COMMAND --help` for each command."
)
"""What `circuits --help` says below the list of commands."""


class Version(argparse.Action):
    """--version: the package version and the commit of the code (read only when asked)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, **kw) -> None:
        super().__init__(option_strings, dest, default=argparse.SUPPRESS, nargs=0, **kw)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        from attn_sink_circuits.runs.provenance import code_identity

        code = code_identity()
        changes = ", with uncommitted changes" if code["dirty"] else ""
        print(f"circuits {code['version']} (commit {code['commit'][:12]}{changes})")
        parser.exit()


def build_parser() -> CommandParser:
    """The parser of every command, with its renamed flags; imports no model code."""
    parser = CommandParser(
        prog="circuits",
        description="Mechanistic circuit analysis of attention sinks.",
        epilog=START,
    )
    parser.add_argument("--version", action=Version, help="print the version and the commit")
    sub = parser.add_commands()
    for module in COMMANDS:
        module.add(sub)
    for name, command in parser.commands.items():
        for old, new in renamed_in(name).items():
            command.rename(old, new)
    return parser


class Interrupted(BaseException):
    """SIGTERM, raised in the main thread so that temp outputs are cleaned up."""


def _terminate(signum, frame) -> None:
    raise Interrupted


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The arguments; an unknown flag exits with its subcommand's usage and "did you mean"."""
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras:
        parser.commands[args.command].unknown(extras)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    previous = signal.signal(signal.SIGTERM, _terminate)
    where = f"; {args.out} was left as it was" if getattr(args, "out", None) else ""
    try:
        check_model_args(args)  # before torch: an unknown model key is refused at once
        if hasattr(args, "threads"):  # commands that load a model
            from attn_sink_circuits.threads import set_threads

            set_threads(args.threads)
        with writing_as(f"circuits {args.command}", force=getattr(args, "force", False)):
            return args.func(args)
    except (KeyboardInterrupt, Interrupted):
        # On a line of its own: a progress bar may be half-drawn. A command that keeps its
        # finished parts says where (`args.kept`).
        kept = getattr(args, "kept", "")
        print(f"\ncircuits {args.command}: interrupted{where}{kept}", file=sys.stderr)
        return 130
    except (ValueError, OSError, RuntimeError) as err:
        # Library errors say what was wrong and how to fix it (every line: a graph's validation
        # lists its reasons one a line); OSErrors name their file.
        message = str(err) or type(err).__name__
        print(f"circuits {args.command}: error: {message}", file=sys.stderr)
        return 2
    finally:
        signal.signal(signal.SIGTERM, previous)


__all__ = ["COMMANDS", "build_parser", "main", "parse"]
