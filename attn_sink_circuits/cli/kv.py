"""`circuits kv`: perplexity of long texts' continuations when each layer's attention reads only
what a KV-cache policy keeps under a budget (`attn_sink_circuits.studies.kv`)."""

from __future__ import annotations

import argparse

from attn_sink_circuits.cli import loading
from attn_sink_circuits.cli.checks import check_out, existing
from attn_sink_circuits.cli.options import (
    TEXTS_HELP,
    config_from,
    config_options,
    model_options,
    out_option,
)
from attn_sink_circuits.cli.parser import command
from attn_sink_circuits.studies.kv.config import DEFAULT_TEXTS, KVRunConfig, check_plan


def run(args: argparse.Namespace) -> int:
    existing(args.texts, "--texts", TEXTS_HELP)
    out = check_out(args.out)  # before torch is imported, so a bad --out is refused at once
    config = config_from(args, KVRunConfig)
    check_plan(config)
    from attn_sink_circuits.studies import kv

    model = loading.load(args)
    result = kv.run(model, args.texts, config, progress=print)
    result.save(out)
    print(result.text())
    print(f"wrote policies.csv, summary.json (pooled perplexities, sinks kept) and kv.png to {out}")
    return 0


def add(sub) -> None:
    p = command(
        sub,
        "kv",
        "perplexity under KV-cache policies (which cached tokens a query may read)",
        "Each text (cut to --tokens) is scored under the full cache and under each policy at "
        "each budget: window, StreamingLLM's first tokens + window, H2O-style heavy hitters, "
        "SnapKV (with --prefix), and sink-aware (the primary and secondary sinks this library "
        "measures, each at its layers, + a window). Positions are kept, not re-indexed.",
    )
    model_options(p)
    p.add_argument(
        "--texts",
        metavar="PATH",
        default=str(DEFAULT_TEXTS),
        help=f"{TEXTS_HELP} (default: the bundled data/texts/long.jsonl)",
    )
    out_option(p, "policies.csv, summary.json, kv.png")
    config_options(p, KVRunConfig)
    p.set_defaults(func=run)
