"""`circuits claims`: the seed papers' mechanism claims as rows with verdicts (the tracers'
commands are in `circuits.cli`)."""

from __future__ import annotations

import argparse

from circuits.cli_options import (
    check_out,
    config_from,
    config_options,
    load,
    model_options,
    out_option,
    print_summary,
)


def _cmd_claims(args: argparse.Namespace) -> int:
    out = check_out(args.out)
    from circuits.claims.config import ClaimsConfig

    config = config_from(args, ClaimsConfig)
    from circuits._io import atomic_write, write_json
    from circuits.claims import Claims, read_secondary
    from circuits.claims.pipeline import claims
    from circuits.discovery.texts import read_texts
    from circuits.report import write_trace

    secondary = read_secondary(args.secondary) if args.secondary else None  # before the load
    texts = read_texts(args.texts) if args.texts else None
    if args.trigger:
        from circuits.claims.trigger import trigger_claims

        result = Claims("trigger-task", config, trigger_claims(config))
    else:
        result = claims(load(args), texts, config, secondary=secondary)
    report = write_trace(result, out)
    write_json(out / "claims.json", {"model": result.model, "claims": result.table.records()})
    with atomic_write(out / "claims.md") as f:
        f.write(result.text() + "\n")
    print_summary(result.summary())
    print(result.table.markdown())
    print(f"report: {report}")
    return 0


def add_claims(sub) -> None:
    p = sub.add_parser(
        "claims", help="the seed papers' mechanism claims as measured rows with verdicts"
    )
    model_options(p)
    out_option(p, "claims.csv, claims.json, claims.md, figures, report.html")
    p.add_argument(
        "--texts",
        metavar="PATH",
        help="text file: one text a line, or JSONL with a 'text' field (default: the P0 "
        "tracer's texts)",
    )
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
    from circuits.claims.config import ClaimsConfig

    config_options(p, ClaimsConfig)
    p.set_defaults(func=_cmd_claims)
