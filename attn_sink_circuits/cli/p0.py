"""`circuits p0`: trace the P0-sink circuit (node level, then the edge circuit fitted on some
texts and judged on others) and write its report; resumable from its step checkpoints."""

from __future__ import annotations

import argparse

from attn_sink_circuits.cli import loading
from attn_sink_circuits.cli.checks import check_checkpoints, check_out, existing
from attn_sink_circuits.cli.options import (
    DEFAULT_TEXTS_HELP,
    TEXTS_HELP,
    config_from,
    config_options,
    given_options,
    model_options,
    out_option,
    texts_option,
)
from attn_sink_circuits.cli.output import print_summary, writing
from attn_sink_circuits.cli.parser import command
from attn_sink_circuits.studies.p0.config import QUICK, P0Config, check_texts, quick


def _config(args: argparse.Namespace) -> P0Config:
    config = config_from(args, P0Config)
    if args.quick:
        config = quick(config, keep=given_options(args, P0Config))
        flat = config.to_flat()
        settings = ", ".join(f"{k.replace('_', '-')} {flat[k]}" for k in QUICK)
        print(f"quick run (a rough first result, not the documented one): {settings}")
    return config


def run(args: argparse.Namespace) -> int:
    existing(args.texts, "--texts", f"a {TEXTS_HELP}")
    out = check_out(args.out)
    steps = check_checkpoints(args.checkpoints, f"{out}.steps", args.resume)
    config = _config(args)
    check_texts(args.texts, config)  # before the load
    from attn_sink_circuits.studies import p0

    model = loading.load(args)
    args.kept = f"; finished steps are kept in {steps}: add --resume to continue"
    trace = p0.run(model, args.texts, config, checkpoint=steps)
    if args.claims:  # the claims study composed onto the trace (claims reads p0, not back)
        from attn_sink_circuits.studies.claims.attach import p0_with_claims

        trace = p0_with_claims(model, trace)
    if trace.resumed:
        print(
            f"resumed: {len(trace.resumed)} of {len(p0.STEPS)} steps loaded from {steps} "
            f"({', '.join(trace.resumed)})"
        )
    with writing(1) as bar:
        report = bar.run("report", trace.save, out, model)
    print_summary(trace.summary())
    print(f"report: {report}")
    print(f"removed the step checkpoints {steps}")
    return 0


def add(sub) -> None:
    p = command(
        sub,
        "p0",
        "trace the P0-sink circuit and write a report (start here: p0 --quick)",
        "First-token variants, position vs content, where the P0 state forms, which heads and "
        "MLPs make it, causal confirmation; then the edge circuit, fitted on --edge-n-fit texts "
        "and judged on --edge-n-heldout others. Each finished step is checkpointed (--resume).",
    )
    model_options(p)
    out_option(p, "report.html, summary.json, tables, graphs, plots")
    texts_option(p, DEFAULT_TEXTS_HELP)
    p.add_argument(
        "--checkpoints",
        metavar="DIR",
        help="each finished step is saved here as it ends; the folder is removed once the "
        "report is written (OUT.steps)",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="load the steps already in --checkpoints (same model, settings and texts), run the "
        "rest",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="a rough first result in about 2 minutes on 2 cores: "
        + ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in QUICK.items())
        + " (options given explicitly win)",
    )
    p.add_argument(
        "--claims",
        action="store_true",
        help="add the P0 claims table (circuits claims, default settings) to the report",
    )
    config_options(p, P0Config)
    p.set_defaults(func=run)
