"""`circuits discover`: the edge circuit of any behaviour given as counterfactual text pairs (a
JSONL file with clean, corrupt, answer, wrong; or a standard task such as IOI), fitted on some
pairs and judged on the others. Its settings are spelled as `p0`'s and `secondary`'s edge
circuit's (`--edge-n-fit`, `--edge-method`, ...)."""

from __future__ import annotations

import argparse

from circuits.cli import loading
from circuits.cli.checks import check_out, existing
from circuits.cli.options import (
    config_from,
    config_options,
    count_int,
    model_options,
    out_option,
    positive_int,
)
from circuits.cli.output import print_summary
from circuits.cli.pairs import PAIRS_HELP, make_pairs, pair_options, read_pair_rows
from circuits.cli.parser import command
from circuits.discovery.config import DiscoveryConfig

PREFIX = "edge_"
"""The prefix of the discovery settings, as in p0's and secondary's `--edge-` options."""
DEFAULTS = DiscoveryConfig(ablation="resample")
"""Pairs are ablated from the partner text."""


def _checked(args: argparse.Namespace) -> tuple[DiscoveryConfig, list[dict] | None]:
    """The settings and the --pairs rows, checked before the model loads."""
    config = config_from(args, DiscoveryConfig, PREFIX)
    if config.ablation != "resample":
        raise ValueError(
            f"--edge-ablation {config.ablation}: pairs are ablated from the partner text; use "
            "--edge-ablation resample (the default here)"
        )
    if args.edge_n_heldout < 1:
        raise ValueError("--edge-n-heldout must be >= 1: the circuit is judged on held-out pairs")
    return config, read_pair_rows(args, args.edge_n_fit + args.edge_n_heldout)


def _write(out, circuit, graph, summary: dict, model) -> None:
    from circuits._io import atomic_folder, write_json
    from circuits.graph.eap_ig import shape_of, write_eap_ig
    from circuits.graph.io import write

    with atomic_folder(out) as tmp:
        write_json(tmp / "summary.json", summary)
        circuit.curve.to_csv(tmp / "curve.csv", index=False)
        circuit.edges_frame().to_csv(tmp / "edges.csv", index=False)
        write(graph, tmp / "circuit.json")
        write_eap_ig(graph, tmp / "circuit.eap-ig.json", shape_of(model))


def run(args: argparse.Namespace) -> int:
    existing(args.pairs, "--pairs", f"a {PAIRS_HELP}")
    out = check_out(args.out)
    config, rows = _checked(args)
    from circuits.discovery import circuit_graph, discover

    model = loading.load(args)
    n_fit = args.edge_n_fit
    pairs = make_pairs(model, args, rows, n_fit + args.edge_n_heldout, shuffle=True)
    fit, held = pairs[:n_fit], pairs[n_fit:]
    circuit = discover(model, fit, held, None, positions=None, config=config, progress=True)
    source = args.pairs or f"task {args.task} (seed {args.pair_seed})"
    graph = circuit_graph(circuit, model, data=source, metric_spec={"metric": "pairs"})
    summary = {"pairs": source, "n_tokens": int(pairs.shape[1]), **circuit.summary()}
    summary.pop("positions", None)  # every position
    _write(out, circuit, graph, summary, model)
    print_summary(summary)
    print(f"wrote {out} (circuit.json; circuit.eap-ig.json for EAP-IG / MIB)")
    return 0


def add(sub) -> None:
    p = command(
        sub,
        "discover",
        "edge circuit of a behaviour given as counterfactual text pairs (or --task ioi)",
        "Find the edge circuit of logit(answer) - logit(wrong) at the last position on clean / "
        "corrupted text pairs (each ablated edge takes its value in the partner text, at every "
        "position), fitted on --edge-n-fit pairs and judged on --edge-n-heldout others.",
    )
    pair_options(p.add_mutually_exclusive_group(required=True), p, n_pairs=False)
    p.add_argument("--edge-n-fit", type=positive_int, default=32, help="fit pairs (%(default)s)")
    p.add_argument(
        "--edge-n-heldout", type=count_int, default=32, help="held-out pairs (%(default)s)"
    )
    model_options(p)
    out_option(p, "summary.json, curve.csv, edges.csv, circuit.json, circuit.eap-ig.json")
    config_options(p, DiscoveryConfig, prefix=PREFIX, defaults=DEFAULTS)
    p.set_defaults(func=run)
