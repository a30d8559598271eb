"""Counterfactual text pairs on the command line (`discover`, `faithfulness`): a JSONL file of
{clean, corrupt, answer, wrong} or a standard task's generated pairs (IOI with the corrupted
partner of --partner), read and checked before the model loads, tokenized after as a protocol
says (`attn_sink_circuits.discovery.protocol.Protocol`: partner, padding, BOS)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from attn_sink_circuits.cli.options import count_int, positive_int
from attn_sink_circuits.studies.ioi import PARTNER_NAMES, TASKS

if TYPE_CHECKING:
    from attn_sink_circuits.discovery.protocol import Protocol

PARTNERS = PARTNER_NAMES
"""The IOI partners (`attn_sink_circuits.studies.ioi.PARTNER_NAMES`)."""
PAIRS_HELP = (
    "JSONL file, one pair a line: {'clean', 'corrupt', 'answer', 'wrong'} (answer / wrong: one "
    "token each, e.g. ' Mary'; clean and corrupt of one token length)"
)


PROTOCOL_PARTNER = "the protocol's: abc, s2_io_flip with --protocol mib"
"""--partner's default in `discover`: the protocol's partner."""


def pair_options(
    group, p: argparse.ArgumentParser, n_pairs: bool = True, partner_default: str = PROTOCOL_PARTNER
) -> None:
    """--pairs FILE or --task NAME in `group` (mutually exclusive), --partner (IOI's corrupted
    prompt; `partner_default` says what it defaults to), --pair-seed and (with `n_pairs`)
    --n-pairs, the number of task pairs, on `p`."""
    group.add_argument("--pairs", metavar="PATH", help=PAIRS_HELP)
    group.add_argument("--task", choices=TASKS, help="a standard task's generated pairs (ioi)")
    p.add_argument(
        "--partner",
        choices=PARTNERS,
        help="the corrupted prompt of --task ioi: abc (three other names, Wang et al.), "
        "s2_io_flip (the second S replaced by IO, MIB's) or abc_before_s2 (a control: the IO "
        f"and S1 names replaced, S2 kept) (default: {partner_default})",
    )
    p.add_argument(
        "--pair-seed", type=count_int, default=0, help="seed of the split / task (%(default)s)"
    )
    if n_pairs:
        p.add_argument(
            "--n-pairs", type=positive_int, default=32, help="pairs of --task (%(default)s)"
        )


def read_pair_rows(args: argparse.Namespace, need: int | None = None) -> list[dict] | None:
    """The rows of --pairs (None for --task), checked before any model loads: each a pair, and
    at least `need` of them (named by --edge-n-fit and --edge-n-heldout). Whether the file
    exists is checked before, at once (`attn_sink_circuits.cli.checks.existing`)."""
    if args.pairs is None:
        return None
    if getattr(args, "partner", None) is not None:
        raise ValueError(
            f"--partner {args.partner} makes the corrupted prompts of --task ioi; a --pairs file "
            "gives each pair's corrupt text: leave out --partner"
        )
    from attn_sink_circuits.discovery.pairs import read_rows

    rows = read_rows(args.pairs)
    if need is not None and len(rows) < need:
        raise ValueError(
            f"{args.pairs} holds {len(rows)} pairs; --edge-n-fit {args.edge_n_fit} + "
            f"--edge-n-heldout {args.edge_n_heldout} = {need} are needed (add pairs or lower "
            "them)"
        )
    return rows


def partner(args: argparse.Namespace, proto: Protocol) -> str:
    """The IOI partner: --partner, else the protocol's."""
    return getattr(args, "partner", None) or proto.partner


def make_pairs(
    model,
    args: argparse.Namespace,
    rows: list[dict] | None,
    n: int,
    shuffle: bool,
    proto: Protocol | None = None,
):
    """`n` pairs: the task's (seeded by --pair-seed, with `partner`), else the file's rows
    tokenized (errors name the file's pair numbers), all of them in file order, or with
    `shuffle` the first `n` in an order seeded by --pair-seed. Padding and BOS as `proto` says
    (default: the library's protocol)."""
    from attn_sink_circuits.discovery.protocol import protocol
    from attn_sink_circuits.studies.ioi.data import pairs_of

    proto = proto or protocol("library")
    source = str(args.pairs) if rows is not None else "ioi"
    return pairs_of(model, rows, n, proto, seed=args.pair_seed, partner=partner(args, proto),
                    shuffle=shuffle, source=source)  # fmt: skip


__all__ = ["PAIRS_HELP", "PARTNERS", "make_pairs", "pair_options", "partner", "read_pair_rows"]
