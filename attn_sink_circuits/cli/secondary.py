"""`circuits secondary`: the MLPs that make secondary sinks (Wong et al.), traced on reasoning
traces, with the claims read from its tables, and its report."""

from __future__ import annotations

import argparse

from attn_sink_circuits.cli import loading
from attn_sink_circuits.cli.checks import check_out, existing
from attn_sink_circuits.cli.options import (
    config_from,
    config_options,
    model_options,
    out_option,
    positive_int,
)
from attn_sink_circuits.cli.output import print_summary, writing
from attn_sink_circuits.cli.parser import command
from attn_sink_circuits.studies.secondary.config import SecondaryConfig, check_traces


def run(args: argparse.Namespace) -> int:
    existing(args.traces, "--traces", "a trace file (.jsonl) written by circuits generate")
    out = check_out(args.out)
    config = config_from(args, SecondaryConfig)
    if not args.traces:
        check_traces(args.model)  # before the load
    from attn_sink_circuits.studies import secondary

    model = loading.load(args)
    trace = secondary.run(model, args.traces, config, n_texts=args.n_texts, plain=args.plain)
    from attn_sink_circuits.studies.claims.attach import secondary_with_claims

    trace = secondary_with_claims(trace)  # the claims study composed (claims reads secondary)
    with writing(1) as steps:
        report = steps.run("report", trace.save, out)
    print_summary(trace.summary())
    print(f"report: {report}")
    return 0


def add(sub) -> None:
    p = command(
        sub,
        "secondary",
        "trace the MLPs that make secondary sinks; report",
        "On reasoning traces: the secondary-sink events under a named detection rule, the MLP "
        "that forms each, token swaps, geometry, and the edge circuit fitted on --edge-n-fit "
        "traces and judged on --edge-n-heldout others.",
    )
    model_options(p)
    out_option(p, "report.html, summary.json, tables, graph, plots")
    p.add_argument("--traces", help="trace JSONL (default: data/traces/MODEL.jsonl)")
    p.add_argument("--n-texts", type=positive_int, help="use the first N traces (default: all)")
    p.add_argument(
        "--plain", action="store_true", help="problem + completion as plain text (no template)"
    )
    config_options(p, SecondaryConfig)
    p.set_defaults(func=run)
