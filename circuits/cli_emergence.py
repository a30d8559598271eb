"""`circuits train-lm` (a small byte-level Llama trained from scratch, resumable) and
`circuits emergence` (the P0-sink measurements over its checkpoints)."""

from __future__ import annotations

import argparse

from circuits._io import check_writable_folder
from circuits.cli_options import check_out, config_from, config_options, positive_int


def _threads_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--threads",
        type=positive_int,
        help="torch CPU threads (default: OMP_NUM_THREADS when set, else the idle cores)",
    )


def _cmd_train_lm(args: argparse.Namespace) -> int:
    from circuits.training.config import LMConfig, TrainConfig

    lm, config = config_from(args, LMConfig), config_from(args, TrainConfig)
    # A run folder is written into (resumable), never replaced as a whole.
    run = check_writable_folder(args.out)
    from circuits.training import named_corpus, train_lm

    corpus = named_corpus(args.corpus, max_files=args.max_files)
    print(f"corpus: {corpus.manifest()}")
    train_lm(run, lm, config, corpus)
    print(f"checkpoints: {run / 'checkpoints'}; log: {run / 'log.csv'}")
    return 0


def _corpus_option(p: argparse.ArgumentParser, what: str) -> None:
    from circuits.training.corpus import CORPORA

    p.add_argument(
        "--corpus",
        choices=CORPORA,
        default="stdlib",
        help=f"{what}: the Python standard library's source, or synthetic letters with "
        "back-copy triggers on which a sink forms in a few hundred steps "
        "(circuits.training.backcopy) (default: %(default)s)",
    )


def add_train_lm(sub) -> None:
    p = sub.add_parser(
        "train-lm",
        help="train a small byte-level Llama on the Python standard library's source (or a "
        "synthetic corpus), with log-spaced checkpoints (resumable: run the same command again)",
    )
    p.add_argument(
        "--out", required=True, help="run folder: run.json, state.pt, log.csv, checkpoints/"
    )
    _corpus_option(p, "training corpus")
    p.add_argument(
        "--max-files", type=positive_int, help="read only the first N corpus files (tests)"
    )
    _threads_option(p)
    from circuits.training.config import LMConfig, TrainConfig

    config_options(p, LMConfig)
    config_options(p, TrainConfig)
    p.set_defaults(func=_cmd_train_lm)


def _cmd_emergence(args: argparse.Namespace) -> int:
    from circuits.emergence.config import EmergenceConfig

    config = config_from(args, EmergenceConfig)
    out = check_out(args.out)
    from circuits.discovery.texts import read_texts
    from circuits.emergence import emergence

    texts = read_texts(args.texts) if args.texts else None
    result = emergence(args.checkpoints, texts, config, corpus=args.corpus, device=args.device,
                       cache=args.cache)  # fmt: skip
    result.save(out)
    print(result.text())
    print(f"wrote {out}")
    return 0


def add_emergence(sub) -> None:
    p = sub.add_parser(
        "emergence",
        help="P0-sink metrics, formation, node and edge circuit at each checkpoint of a "
        "training run; one row a checkpoint, plots against the step, phases",
    )
    p.add_argument(
        "checkpoints",
        nargs="+",
        metavar="CHECKPOINT",
        help="in training order: a run folder of `circuits train-lm` (all its checkpoints), "
        "model folders, owner/name@revision (hub), model keys",
    )
    p.add_argument("--out", required=True, help="output folder (replaced as a whole)")
    p.add_argument(
        "--texts",
        metavar="PATH",
        help="text file, one text a line or JSONL with 'text' (default: windows of the "
        "held-out part of --corpus)",
    )
    _corpus_option(p, "the training corpus whose held-out part gives the default texts")
    p.add_argument(
        "--cache",
        metavar="DIR",
        help="keep each checkpoint's row here; a rerun measures only what is new",
    )
    p.add_argument("--device", default="cpu", help="torch device (%(default)s)")
    _threads_option(p)
    from circuits.emergence.config import EmergenceConfig

    config_options(p, EmergenceConfig)
    p.set_defaults(func=_cmd_emergence)
