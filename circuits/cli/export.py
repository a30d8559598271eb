"""`circuits export`: a circuit graph file in another format."""

from __future__ import annotations

import argparse
from pathlib import Path

from circuits.cli.checks import existing
from circuits.cli.parser import command

FORMATS = ("graphml", "gexf", "json", "dot", "mermaid", "eap-ig")


def run(args: argparse.Namespace) -> int:
    if args.out is not None and Path(args.out).is_dir():
        raise ValueError(f"--out {args.out} is a folder; give a file name such as circuit.dot")
    existing(args.graph, "GRAPH", "a circuit graph file (.graphml, .gexf, .json or .dot)")
    if args.format == "eap-ig":  # EAP-IG / MIB graph JSON (circuits.graph.eap_ig)
        from circuits.graph.eap_ig import export_eap_ig

        print(export_eap_ig(args.graph, args.out, force=args.force))
        return 0
    from circuits.graph.io import convert

    print(convert(args.graph, args.format, args.out, force=args.force))
    return 0


def add(sub) -> None:
    p = command(
        sub,
        "export",
        "convert a circuit graph file to another format",
        "Reads a graph written by circuits (checked as it is read) and writes it as GraphML, "
        "GEXF, JSON, Graphviz dot, Mermaid or EAP-IG / MIB graph JSON.",
    )
    p.add_argument("graph", help="a circuit graph (.graphml, .gexf, .json or .dot)")
    p.add_argument(
        "--format",
        required=True,
        choices=FORMATS,
        help="output format (mermaid is write-only; eap-ig: the graph JSON of EAP-IG and the MIB "
        "evaluator, for circuits of logit metrics)",
    )
    p.add_argument("--out", help="output file (default: GRAPH with the format's suffix)")
    p.add_argument("--force", action="store_true", help="replace the output file if it exists")
    p.set_defaults(func=run)
