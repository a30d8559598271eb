"""`circuits export`: a circuit graph file in another format, or what MIB's circuit-track
submission takes (`--format mib`, `attn_sink_circuits.discovery.submission`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from attn_sink_circuits.cli.checks import existing
from attn_sink_circuits.cli.parser import command

FORMATS = ("graphml", "gexf", "json", "dot", "mermaid", "eap-ig", "mib")


def _mib_out(args: argparse.Namespace, src: Path) -> Path:
    """--out, else beside GRAPH: its name without suffixes + "-mib.json" (a folder
    "-mib-sizes" with --mib-sizes); never the file read, an existing file only with --force."""
    graph = Path(args.graph)
    base = graph.name.split(".")[0] or graph.name
    default = graph.with_name(base + ("-mib-sizes" if args.mib_sizes else "-mib.json"))
    out = Path(args.out) if args.out is not None else default
    if out.resolve() == src.resolve():
        raise ValueError(f"{out} is the file read; give --out another path")
    if out.is_file() and not args.mib_sizes and not args.force:
        raise ValueError(f"{out} exists; pass --force to replace it, or give another --out")
    return out


def _export_mib(args: argparse.Namespace) -> str:
    """MIB's importance file when GRAPH scores every edge, else its circuit's binary file; the
    ten circuits at MIB's sizes with --mib-sizes. Returns what was written."""
    from attn_sink_circuits.discovery.submission import (
        mib_dict,
        scores_every_edge,
        source_file,
        write_sizes,
    )
    from attn_sink_circuits.runs.io import write_json

    src = source_file(args.graph)
    out = _mib_out(args, src)
    data = mib_dict(src)
    if args.mib_sizes:
        absolute = args.mib_rank_by == "abs"
        files = write_sizes(data, out, absolute=absolute, progress=True)
        return f"{out} ({len(files)} binary circuits at MIB's sizes, ranked by {args.mib_rank_by} score)"
    kind = "importance scores of every edge" if scores_every_edge(data) else "binary circuit"
    write_json(out, data)
    return f"{out} (MIB: {kind}, from {src})"


def run(args: argparse.Namespace) -> int:
    if args.mib_sizes and args.format != "mib":
        raise ValueError(f"--mib-sizes goes with --format mib, not --format {args.format}")
    if args.out is not None and Path(args.out).is_dir() and not args.mib_sizes:
        raise ValueError(f"--out {args.out} is a folder; give a file name such as circuit.dot")
    from attn_sink_circuits.runs.io import stored

    args.graph = str(stored(args.graph))  # a large graph saved gzip'd: its plain name too
    if args.format == "mib":
        existing(args.graph, "GRAPH", "a `circuits discover` run folder or a graph file")
        print(_export_mib(args))
        return 0
    existing(args.graph, "GRAPH", "a circuit graph file (.graphml, .gexf, .json or .dot)")
    if args.format == "eap-ig":  # EAP-IG / MIB graph JSON (attn_sink_circuits.graph.eap_ig)
        from attn_sink_circuits.graph.eap_ig import export_eap_ig

        print(export_eap_ig(args.graph, args.out, force=args.force))
        return 0
    from attn_sink_circuits.graph.io import convert

    print(convert(args.graph, args.format, args.out, force=args.force))
    return 0


def add(sub) -> None:
    p = command(
        sub,
        "export",
        "convert a circuit graph file to another format",
        "Reads a graph written by circuits (checked as it is read) and writes it as GraphML, "
        "GEXF, JSON, Graphviz dot, Mermaid or EAP-IG / MIB graph JSON; --format mib writes what "
        "MIB's circuit-track submission takes: the importance file (every edge scored, MIB's "
        "sign: positive supports) of a `circuits discover` run, or the binary circuit of a "
        "graph that scores its own edges only; --mib-sizes, ten binary circuits at MIB's sizes.",
    )
    p.add_argument(
        "graph",
        help="a circuit graph (.graphml, .gexf, .json or .dot); with --format mib also an "
        "EAP-IG / MIB graph JSON or a `circuits discover` run folder (its importances.mib.json)",
    )
    p.add_argument(
        "--format",
        required=True,
        choices=FORMATS,
        help="output format (mermaid is write-only; eap-ig: the graph JSON of EAP-IG and the MIB "
        "evaluator, for circuits of logit metrics; mib: MIB's submission file, see above)",
    )
    p.add_argument(
        "--out",
        help="output file (default: GRAPH with the format's suffix; mib: GRAPH's name + "
        "'-mib.json' beside it; with --mib-sizes a folder, GRAPH's name + '-mib-sizes')",
    )
    p.add_argument(
        "--mib-sizes",
        action="store_true",
        help="with --format mib: one binary circuit a MIB size (k = 0.001 ... 1 of the edges: "
        "the top int(k x edges) by score, pruned as MIB's evaluator does) in the --out folder",
    )
    p.add_argument(
        "--mib-rank-by",
        choices=("signed", "abs"),
        default="signed",
        help="--mib-sizes ranking: signed (most supporting first, MIB's CPR circuits) or abs "
        "(|score|, its CMD circuits) (default: %(default)s)",
    )
    p.add_argument("--force", action="store_true", help="replace the output file if it exists")
    p.set_defaults(func=run)
