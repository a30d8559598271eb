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
from attn_sink_circuits.core.texts import DATA
from attn_sink_circuits.studies.kv.config import KVRunConfig, check_plan

DEFAULT_TEXTS = str(DATA / "long.jsonl")
"""The bundled long texts (found from any working folder, as p0's default texts are)."""


def run(args: argparse.Namespace) -> int:
    existing(args.texts, "--texts", TEXTS_HELP)
    out = check_out(args.out)  # before torch is imported, so a bad --out is refused at once
    config = config_from(args, KVRunConfig)
    check_plan(config)
    from attn_sink_circuits.core.texts import read_kinded_texts
    from attn_sink_circuits.models.registry import display_name
    from attn_sink_circuits.studies.kv.run import pooled
    from attn_sink_circuits.studies.kv.study import run_kv

    texts, kinds = read_kinded_texts(args.texts)
    texts, kinds = texts[: config.n_texts], kinds[: config.n_texts]
    model = loading.load(args)
    result = run_kv(model, texts, kinds, config, source=args.texts)
    identity = {"measured": "kv", "model": args.model}
    result.save(out, identity, f"{display_name(args.model)}: {len(texts)} texts")
    print(pooled(result.table).to_string(index=False))
    for t, runs in result.kept().items():
        shown = "; ".join(f"layers {a}-{b}: {p}" for (a, b), p in
                          ((r["layers"], r["positions"]) for r in runs))  # fmt: skip
        print(f"text {t}, sinks kept (positions per layer): {shown}")
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
        default=DEFAULT_TEXTS,
        help=f"{TEXTS_HELP} (default: the bundled data/texts/long.jsonl)",
    )
    out_option(p, "policies.csv, summary.json, kv.png")
    config_options(p, KVRunConfig)
    p.set_defaults(func=run)
