"""`circuits claims`: the seed papers' mechanism claims as measured rows with verdicts."""

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
    texts_option,
)
from attn_sink_circuits.cli.output import print_summary, writing
from attn_sink_circuits.cli.parser import command


def run(args: argparse.Namespace) -> int:
    existing(args.texts, "--texts", f"a {TEXTS_HELP}")
    existing(args.secondary, "--secondary", "a folder written by circuits secondary")
    out = check_out(args.out)
    from attn_sink_circuits.studies.claims.config import ClaimsConfig, check_secondary

    config = config_from(args, ClaimsConfig)
    if args.secondary:
        check_secondary(args.secondary)  # before the load
    from attn_sink_circuits.studies import claims

    if args.trigger:
        result = claims.run(None, None, config, trigger=True)
    else:
        result = claims.run(loading.load(args), args.texts, config, secondary=args.secondary)
    with writing(1) as steps:
        report = steps.run("report", result.save, out)
    print_summary(result.summary())
    print(result.table.markdown())
    print(f"report: {report}")
    return 0


def add(sub) -> None:
    from attn_sink_circuits.studies.claims.config import ClaimsConfig

    p = command(
        sub,
        "claims",
        "the seed papers' mechanism claims as measured rows with verdicts",
        "Each claim: its wording, what is measured, the number with an interval over texts, "
        "the named threshold and the verdict (holds / does not hold / undecided / not "
        "applicable).",
    )
    model_options(p)
    out_option(p, "claims.csv, claims.json, claims.md, figures, report.html")
    texts_option(p, f"{TEXTS_HELP} (default: the P0 tracer's texts)")
    p.add_argument(
        "--secondary",
        metavar="DIR",
        help="a folder written by `circuits secondary` for this model: adds Wong et al.'s "
        "claims, read from its tables",
    )
    p.add_argument(
        "--trigger",
        action="store_true",
        help="instead of --model: Ran-Milo's theorems on small models trained on the trigger "
        "task (about a minute)",
    )
    config_options(p, ClaimsConfig)
    p.set_defaults(func=run)
