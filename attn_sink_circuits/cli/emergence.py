"""`circuits emergence`: the P0-sink measurements at every checkpoint of a training run."""

from __future__ import annotations

import argparse

from attn_sink_circuits.cli.checks import check_out, existing
from attn_sink_circuits.cli.options import (
    TEXTS_HELP,
    config_from,
    config_options,
    corpus_option,
    device_option,
    out_option,
    texts_option,
    threads_option,
)
from attn_sink_circuits.cli.parser import command


def run(args: argparse.Namespace) -> int:
    from attn_sink_circuits.studies.emergence.config import EmergenceConfig

    config = config_from(args, EmergenceConfig)
    existing(args.texts, "--texts", f"a {TEXTS_HELP}")
    out = check_out(args.out)
    from attn_sink_circuits.studies import emergence

    result = emergence.run(args.checkpoints, args.texts, config, corpus=args.corpus,
                           device=args.device, cache=args.cache)  # fmt: skip
    result.save(out)
    print(result.text())
    print(f"wrote {out}")
    return 0


def add(sub) -> None:
    from attn_sink_circuits.studies.emergence.config import EmergenceConfig

    p = command(
        sub,
        "emergence",
        "P0-sink metrics, formation, node and edge circuit at each checkpoint of a training run",
        "One row a checkpoint, plots against the step, and the phases of the series.",
    )
    p.add_argument(
        "checkpoints",
        nargs="+",
        metavar="CHECKPOINT",
        help="in training order: a run folder of `circuits train-lm` (all its checkpoints), "
        "model folders, owner/name@revision (hub), model keys",
    )
    out_option(p, "one row a checkpoint, plots, phases")
    texts_option(p, f"{TEXTS_HELP} (default: windows of the held-out part of --corpus)")
    corpus_option(p, "the training corpus whose held-out part gives the default texts")
    p.add_argument(
        "--cache",
        metavar="DIR",
        help="keep each checkpoint's row here; a rerun measures only what is new",
    )
    device_option(p)
    threads_option(p)
    config_options(p, EmergenceConfig)
    p.set_defaults(func=run)
