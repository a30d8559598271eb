"""`circuits train-lm`: a small byte-level Llama trained from scratch, with log-spaced
checkpoints (resumable: the same command again continues the run)."""

from __future__ import annotations

import argparse
import datetime as dt
import time

from attn_sink_circuits.cli.options import (
    config_from,
    config_options,
    corpus_option,
    positive_float,
    positive_int,
    threads_option,
)
from attn_sink_circuits.cli.parser import command


def utc_time(text: str) -> float:
    """An argparse type: a UTC time, 2026-12-07T23:30 (or 23:30 for today), as epoch seconds."""
    try:
        if "T" not in text and "-" not in text:
            today = dt.datetime.now(dt.UTC).date().isoformat()
            text = f"{today}T{text}"
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a UTC time like 2026-12-07T23:30 or 23:30"
        ) from None
    return moment.replace(tzinfo=moment.tzinfo or dt.UTC).timestamp()


def run(args: argparse.Namespace) -> int:
    from attn_sink_circuits.runs.io import check_writable_folder
    from attn_sink_circuits.training.config import LMConfig, TrainConfig

    lm, config = config_from(args, LMConfig), config_from(args, TrainConfig)
    # A run folder is written into (resumable), never replaced as a whole.
    folder = check_writable_folder(args.out)
    from attn_sink_circuits.training import Until, named_corpus, train_lm

    corpus = named_corpus(args.corpus, max_files=args.max_files)
    print(f"corpus: {corpus.manifest()}")
    walls = [w for w in (args.stop_at, args.stop_after and time.time() + 60 * args.stop_after) if w]
    until = Until(wall=min(walls) if walls else None)
    train_lm(folder, lm, config, corpus, until=until)
    if until.reason:
        print(f"stopped ({until.reason}), state saved in {folder / 'state.pt'}: run the same "
              "command again to go on")  # fmt: skip
    print(f"checkpoints: {folder / 'checkpoints'}; log: {folder / 'log.csv'}")
    return 0


def add(sub) -> None:
    from attn_sink_circuits.training.config import LMConfig, TrainConfig

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
    p.add_argument(
        "--stop-at", type=utc_time,
        help="stop at this UTC time (2026-12-07T23:30, or 23:30 for today), the state saved; "
        "SIGTERM and Ctrl-C stop it the same way",
    )  # fmt: skip
    p.add_argument(
        "--stop-after", type=positive_float, help="stop after this many minutes, the state saved"
    )
    threads_option(p)
    config_options(p, LMConfig)
    config_options(p, TrainConfig)
    p.set_defaults(func=run)
