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
from attn_sink_circuits.cli.output import write_report
from attn_sink_circuits.cli.parser import command
from attn_sink_circuits.studies.secondary.config import SecondaryConfig


def run(args: argparse.Namespace) -> int:
    existing(args.traces, "--traces", "a trace file (.jsonl) written by circuits generate")
    out = check_out(args.out)
    config = config_from(args, SecondaryConfig)
    from attn_sink_circuits.core.traces import read_traces
    from attn_sink_circuits.studies.secondary import plain_texts, project_traces, trace_secondary

    if args.traces:
        traces = read_traces(args.traces)[: args.n_texts]
    else:
        traces = project_traces(args.model, args.n_texts)
    model = loading.load(args)
    trace = trace_secondary(model, plain_texts(traces) if args.plain else traces, config)
    from attn_sink_circuits.studies.claims import ClaimsConfig, secondary_claims
    from attn_sink_circuits.studies.claims.attach import with_claims

    write_report(with_claims(trace, secondary_claims(trace.tables(), ClaimsConfig())), out)
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
