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
    from attn_sink_circuits.report.draw import save_figure
    from attn_sink_circuits.runs.io import atomic_folder, write_csv, write_json
    from attn_sink_circuits.runs.provenance import provenance, stamped
    from attn_sink_circuits.studies.kv.plots import budget_figure
    from attn_sink_circuits.studies.kv.run import policy_table, pooled
    from attn_sink_circuits.studies.kv.sinks import kept_by_layers

    texts, kinds = read_kinded_texts(args.texts)
    texts, kinds = texts[: config.n_texts], kinds[: config.n_texts]
    model = loading.load(args)
    rows = [model.to_tokens(t, truncate=False, move_to_device=False)[0] for t in texts]
    short = [i for i, r in enumerate(rows) if len(r) <= config.kv.score_from]
    if short:
        raise ValueError(f"texts {short} have no tokens after --score-from {config.kv.score_from}")
    table = policy_table(model, rows, config, kinds)
    record = provenance(model, texts, kinds, settings=config.to_dict(), source=args.texts)
    kept = {t: kept_by_layers(sinks) for t, sinks in table.attrs.get("sinks", {}).items()}
    summary = {"pooled": pooled(table).to_dict(orient="records"),
               "sinks_kept": [{"text": t, "by_layers": runs} for t, runs in kept.items()]}  # fmt: skip
    with atomic_folder(out, {"measured": "kv", "model": args.model}, record) as tmp:
        write_csv(tmp / "policies.csv", table)
        write_json(tmp / "summary.json", stamped(summary, record))
        save_figure(budget_figure(table, f"{args.model}: {len(texts)} texts"), tmp / "kv.png")
    print(pooled(table).to_string(index=False))
    for t, runs in kept.items():
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
