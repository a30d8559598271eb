"""`circuits train-lm`: a small byte-level Llama trained from scratch, with log-spaced
checkpoints (resumable: the same command again continues the run)."""

from __future__ import annotations

import argparse

from circuits.cli.options import (
    config_from,
    config_options,
    corpus_option,
    positive_int,
    threads_option,
)
from circuits.cli.parser import command


def run(args: argparse.Namespace) -> int:
    from circuits._io import check_writable_folder
    from circuits.training.config import LMConfig, TrainConfig

    lm, config = config_from(args, LMConfig), config_from(args, TrainConfig)
    # A run folder is written into (resumable), never replaced as a whole.
    folder = check_writable_folder(args.out)
    from circuits.training import named_corpus, train_lm

    corpus = named_corpus(args.corpus, max_files=args.max_files)
    print(f"corpus: {corpus.manifest()}")
    train_lm(folder, lm, config, corpus)
    print(f"checkpoints: {folder / 'checkpoints'}; log: {folder / 'log.csv'}")
    return 0


def add(sub) -> None:
    from circuits.training.config import LMConfig, TrainConfig

    p = command(
        sub,
        "train-lm",
        "train a small byte-level Llama on the Python standard library's source (or a "
        "synthetic corpus), with log-spaced checkpoints",
        "Seeded; checkpoints at log-spaced steps, held-out loss and tokens/s in log.csv. "
        "Resumable: run the same command again.",
    )
    p.add_argument(
        "--out", required=True, help="run folder: run.json, state.pt, log.csv, checkpoints/"
    )
    corpus_option(p, "training corpus")
    p.add_argument(
        "--max-files", type=positive_int, help="read only the first N corpus files (tests)"
    )
    threads_option(p)
    config_options(p, LMConfig)
    config_options(p, TrainConfig)
    p.set_defaults(func=run)
