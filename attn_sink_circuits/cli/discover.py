"""`circuits discover`: the edge circuit of any behaviour given as counterfactual text pairs (a
JSONL file with clean, corrupt, answer, wrong; or a standard task such as IOI), fitted on some
pairs and judged on the others. Its settings are spelled as `p0`'s and `secondary`'s edge
circuit's (`--edge-n-fit`, `--edge-method`, ...), on top of a named protocol (`--protocol`,
`attn_sink_circuits.discovery.protocol`: the library's defaults, or MIB's): a flag given explicitly wins
over the protocol, the rest take the protocol's values."""

from __future__ import annotations

import argparse

from attn_sink_circuits.cli import loading
from attn_sink_circuits.cli.checks import check_out, existing
from attn_sink_circuits.cli.options import (
    config_options,
    count_int,
    model_options,
    out_option,
    positive_int,
    protocol_option,
)
from attn_sink_circuits.cli.output import print_summary, writing
from attn_sink_circuits.cli.pairs import (
    PAIRS_HELP,
    make_pairs,
    pair_options,
    partner,
    read_pair_rows,
)
from attn_sink_circuits.cli.parser import command
from attn_sink_circuits.config import flat_fields
from attn_sink_circuits.discovery.config import DiscoveryConfig
from attn_sink_circuits.discovery.protocol import PROTOCOLS, protocol
from attn_sink_circuits.discovery.recorded import record_pairs

PREFIX = "edge_"
"""The prefix of the discovery settings, as in p0's and secondary's `--edge-` options."""
DEFAULTS = protocol("library").config()
"""The settings --help shows: the library's protocol (pairs are ablated from the partner text)."""
COUNTS = ("n_fit", "n_heldout")
"""Pair counts a protocol sets beside its DiscoveryConfig (`--edge-n-fit`, `--edge-n-heldout`)."""


def given(args: argparse.Namespace) -> dict:
    """The settings the user gave explicitly (flat DiscoveryConfig names, and the pair counts
    and --partner): the parser leaves the others None, for the protocol to fill."""
    names = [name for name, _, _ in flat_fields(DiscoveryConfig)] + list(COUNTS)
    out = {n: getattr(args, PREFIX + n) for n in names if getattr(args, PREFIX + n) is not None}
    if getattr(args, "partner", None) is not None:
        out["partner"] = args.partner
    return {k: tuple(v) if isinstance(v, list) else v for k, v in out.items()}


def settings(args: argparse.Namespace) -> tuple[DiscoveryConfig, dict]:
    """The protocol's DiscoveryConfig with the flags given on top, and what the run records of
    it ({"name", "overrides"}); --edge-n-fit / --edge-n-heldout resolved in `args` (the
    protocol's counts unless given). Checked: a bad value is a ValueError naming it."""
    proto = protocol(args.protocol)
    overrides = given(args)
    fields = {k: v for k, v in overrides.items() if k not in (*COUNTS, "partner")}
    config = proto.config(**fields)
    if config.ablation != "resample":
        raise ValueError(
            f"--edge-ablation {config.ablation}: pairs are ablated from the partner text; use "
            "--edge-ablation resample (the default here)"
        )
    args.edge_n_fit = overrides.get("n_fit", proto.n_fit)
    args.edge_n_heldout = overrides.get("n_heldout", proto.n_heldout)
    if args.edge_n_heldout < 1:
        raise ValueError("--edge-n-heldout must be >= 1: the circuit is judged on held-out pairs")
    return config, {"name": proto.name, "overrides": overrides}


def _write(out, circuit, graph, summary: dict, model, record: dict) -> str:
    """Write the run folder (summary and marker with the run's provenance `record`); returns
    the circuit file's name (gzip'd when large)."""
    from attn_sink_circuits.discovery.protocol import write_mib
    from attn_sink_circuits.discovery.submission import IMPORTANCES
    from attn_sink_circuits.graph.eap_ig import shape_of, write_eap_ig
    from attn_sink_circuits.graph.io import write
    from attn_sink_circuits.runs.io import atomic_folder, write_csv, write_json
    from attn_sink_circuits.runs.provenance import stamped

    def tables(tmp) -> None:
        write_json(tmp / "summary.json", stamped(summary, record))
        circuit.curve.to_csv(tmp / "curve.csv", index=False)
        write_csv(tmp / "edges.csv", circuit.edges_frame(), lean=True)

    with atomic_folder(out, record=record) as tmp, writing(4) as steps:
        steps.run("tables", tables, tmp)
        name = steps.run("circuit", write, graph, tmp / "circuit.json", lean=True).name
        steps.run("EAP-IG file", write_eap_ig, graph, tmp / "circuit.eap-ig.json", shape_of(model))
        steps.run("MIB importances", write_mib, circuit, shape_of(model), tmp / IMPORTANCES)
    return name


def run(args: argparse.Namespace) -> int:
    import json

    existing(args.pairs, "--pairs", f"a {PAIRS_HELP}")
    out = check_out(args.out)
    config, proto_record = settings(args)
    n_fit = args.edge_n_fit
    rows = read_pair_rows(args, n_fit + args.edge_n_heldout)
    from attn_sink_circuits.discovery import circuit_graph, discover
    from attn_sink_circuits.runs.provenance import provenance

    model = loading.load(args)
    proto = protocol(args.protocol)
    pairs = make_pairs(model, args, rows, n_fit + args.edge_n_heldout, True, proto)
    fit, held = pairs[:n_fit], pairs[n_fit:]
    circuit = discover(model, fit, held, None, positions=None, config=config, progress=True)
    source = (
        args.pairs or f"task {args.task}, partner {partner(args, proto)} (seed {args.pair_seed})"
    )
    graph = circuit_graph(circuit, model, data=source, metric_spec={"metric": "pairs"})
    graph.graph["protocol"] = json.dumps(proto_record, sort_keys=True)
    record_pairs(graph, args.task, partner(args, proto) if args.task else None, proto)
    summary = {"pairs": source, "protocol": proto_record, "n_tokens": int(pairs.shape[1]),
               **circuit.summary()}  # fmt: skip
    summary.pop("positions", None)  # every position
    record = provenance(model, pairs.rows(), split=(range(n_fit), range(n_fit, len(pairs))),
                        settings=config.to_dict(), source=args.pairs)  # fmt: skip
    name = _write(out, circuit, graph, summary, model, record)
    print_summary(summary)
    print(
        f"wrote {out} ({name}; circuit.eap-ig.json, the circuit for EAP-IG / MIB; "
        "importances.mib.json, every edge's score: MIB's importance file)"
    )
    return 0


def add(sub) -> None:
    p = command(
        sub,
        "discover",
        "edge circuit of your own behaviour, given as counterfactual text pairs (or --task ioi)",
        "Find the edge circuit of logit(answer) - logit(wrong) at the last position on clean / "
        "corrupted text pairs (each ablated edge takes its value in the partner text, at every "
        "position), fitted on --edge-n-fit pairs and judged on --edge-n-heldout others. "
        "--protocol mib runs MIB's circuit-track protocol (docs/mib/README.md): its settings "
        "replace the defaults shown below, and any flag given explicitly wins over them.",
    )
    pair_options(p.add_mutually_exclusive_group(required=True), p, n_pairs=False)
    protocol_option(p)
    for count, kind in zip(COUNTS, ("fit", "held-out"), strict=True):
        per = ", ".join(f"{name} {getattr(proto, count)}" for name, proto in PROTOCOLS.items())
        p.add_argument(
            "--edge-" + count.replace("_", "-"),
            dest=PREFIX + count,
            type=positive_int if count == "n_fit" else count_int,
            help=f"{kind} pairs (default: the protocol's: {per})",
        )
    model_options(p)
    out_option(
        p, "summary.json, curve.csv, edges.csv, circuit.json, circuit.eap-ig.json, "
        "importances.mib.json (edges.csv and circuit.json gzip'd, NAME.gz, when large)",
    )  # fmt: skip
    config_options(p, DiscoveryConfig, prefix=PREFIX, defaults=DEFAULTS)
    # Unset settings stay None, for the protocol to fill (--help shows the library's defaults).
    p.set_defaults(func=run, **{PREFIX + n: None for n, _, _ in flat_fields(DiscoveryConfig)})
