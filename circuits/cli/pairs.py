"""Counterfactual text pairs on the command line (`discover`, `faithfulness`): a JSONL file of
{clean, corrupt, answer, wrong} or a standard task's generated pairs, read and checked before
the model loads, tokenized after."""

from __future__ import annotations

import argparse

from circuits.cli.options import count_int, positive_int
from circuits.tasks import TASKS

PAIRS_HELP = (
    "JSONL file, one pair a line: {'clean', 'corrupt', 'answer', 'wrong'} (answer / wrong: one "
    "token each, e.g. ' Mary'; clean and corrupt of one token length)"
)


def pair_options(group, p: argparse.ArgumentParser, n_pairs: bool = True) -> None:
    """--pairs FILE or --task NAME in `group` (mutually exclusive), --pair-seed and (with
    `n_pairs`) --n-pairs, the number of task pairs, on `p`."""
    group.add_argument("--pairs", metavar="PATH", help=PAIRS_HELP)
    group.add_argument("--task", choices=TASKS, help="a standard task's generated pairs (ioi)")
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
    exists is checked before, at once (`circuits.cli.checks.existing`)."""
    if args.pairs is None:
        return None
    from circuits.discovery.pairs import read_rows

    rows = read_rows(args.pairs)
    if need is not None and len(rows) < need:
        raise ValueError(
            f"{args.pairs} holds {len(rows)} pairs; --edge-n-fit {args.edge_n_fit} + "
            f"--edge-n-heldout {args.edge_n_heldout} = {need} are needed (add pairs or lower "
            "them)"
        )
    return rows


def make_pairs(model, args: argparse.Namespace, rows: list[dict] | None, n: int, shuffle: bool):
    """`n` pairs: the task's (seeded by --pair-seed), else the file's rows tokenized (errors
    name the file's pair numbers), all of them in file order, or with `shuffle` the first `n`
    in an order seeded by --pair-seed."""
    if rows is None:
        from circuits.tasks.ioi import ioi_pairs

        return ioi_pairs(model, n, seed=args.pair_seed)[0]
    from circuits.discovery.pairs import tokenize

    pairs = tokenize(model, rows, str(args.pairs))
    if not shuffle:
        return pairs
    import numpy as np

    return pairs[np.random.default_rng(args.pair_seed).permutation(len(rows))[:n].tolist()]


__all__ = ["PAIRS_HELP", "make_pairs", "pair_options", "read_pair_rows"]
