"""`circuits discover`: the edge circuit of any behaviour given as counterfactual text pairs
(a JSONL file with clean, corrupt, answer, wrong; or a standard task such as IOI), fitted on
some pairs and judged on the others."""

from __future__ import annotations

import argparse

from circuits.cli_options import (
    check_out,
    config_from,
    config_options,
    count_int,
    load,
    model_options,
    out_option,
    positive_int,
    print_summary,
)
from circuits.discovery.config import DiscoveryConfig
from circuits.tasks import TASKS

PAIRS_HELP = (
    "JSONL file, one pair a line: {'clean', 'corrupt', 'answer', 'wrong'} (answer / wrong: one "
    "token each, e.g. ' Mary'; clean and corrupt of one token length)"
)


def pair_options(group, p: argparse.ArgumentParser, n_pairs: bool = True) -> None:
    """--pairs FILE or --task NAME in `group` (mutually exclusive), --pair-seed and (with
    `n_pairs`) --n-pairs, the number of task pairs, on `p`."""
    group.add_argument("--pairs", metavar="PATH", help=PAIRS_HELP)
    group.add_argument("--task", choices=TASKS, help="a standard task's generated pairs (ioi)")
    p.add_argument(
        "--pair-seed", type=count_int, default=0, help="seed of the split / task (%(default)s)"
    )
    if n_pairs:
        p.add_argument(
            "--n-pairs", type=positive_int, default=32, help="pairs of --task (%(default)s)"
        )


def pair_source(p: argparse.ArgumentParser) -> None:
    """--pairs FILE or --task NAME (one of them), with --n-fit / --n-heldout / --pair-seed."""
    pair_options(p.add_mutually_exclusive_group(required=True), p, n_pairs=False)
    p.add_argument("--n-fit", type=positive_int, default=32, help="fit pairs (%(default)s)")
    p.add_argument("--n-heldout", type=count_int, default=32, help="held-out pairs (%(default)s)")


def check_pair_source(args: argparse.Namespace) -> list[dict] | None:
    """The rows of --pairs, checked before any model loads (None for --task)."""
    if args.pairs is None:
        return None
    from circuits.discovery.pairs import read_rows

    rows = read_rows(args.pairs)
    need = args.n_fit + args.n_heldout
    if len(rows) < need:
        raise ValueError(
            f"{args.pairs} holds {len(rows)} pairs; --n-fit {args.n_fit} + --n-heldout "
            f"{args.n_heldout} = {need} are needed (add pairs or lower them)"
        )
    return rows


def load_pairs(model, args: argparse.Namespace, rows: list[dict] | None):
    """All pairs of the run (fit first, then held-out): the file's, in a seeded order, or the
    task's."""
    import numpy as np

    from circuits.discovery.pairs import tokenize

    n = args.n_fit + args.n_heldout
    if rows is None:
        from circuits.tasks.ioi import ioi_pairs

        return ioi_pairs(model, n, seed=args.pair_seed)[0]
    pairs = tokenize(model, rows, str(args.pairs))  # errors name the file's pair numbers
    return pairs[np.random.default_rng(args.pair_seed).permutation(len(rows))[:n].tolist()]


def faithfulness_on_pairs(args: argparse.Namespace, out) -> int:
    """`circuits faithfulness CIRCUIT --pairs FILE | --task NAME`: a circuit found on pairs (or
    an EAP-IG graph file, which names no model: --model) judged on the pairs given."""
    from circuits.discovery.pairs import read_rows
    from circuits.graph.eap_ig import read_json_if_eap_ig

    rows = read_rows(args.pairs) if args.pairs else None  # checked before the model loads
    data = read_json_if_eap_ig(args.circuit)
    graph = None
    if data is None:
        from circuits.cli_files import _graph_model
        from circuits.graph.io import read

        graph = read(args.circuit)
        args.model = _graph_model(graph, args.model)
    elif args.model is None:
        raise ValueError(f"{args.circuit} is an EAP-IG graph, which names no model; pass --model")
    from circuits._io import write_json
    from circuits.discovery.saved import eap_ig_circuit, judge_saved

    model = load(args)
    if rows is None:
        from circuits.tasks.ioi import ioi_pairs

        pairs = ioi_pairs(model, args.n_pairs, seed=args.pair_seed)[0]
    else:
        from circuits.discovery.pairs import tokenize

        pairs = tokenize(model, rows, str(args.pairs))
    graph = graph if data is None else eap_ig_circuit(data, model, str(args.circuit))
    result = judge_saved(model, graph, pairs, n_random=args.n_random, n_boot=args.n_boot,
                         seed=args.seed)  # fmt: skip
    result = {"circuit": str(args.circuit), "model": args.model, **result}
    print_summary(result)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        write_json(out / "faithfulness.json", result)
        print(f"wrote {out / 'faithfulness.json'}")
    return 0


def _cmd_discover(args: argparse.Namespace) -> int:
    out = check_out(args.out)
    config = config_from(args, DiscoveryConfig)
    if config.ablation != "resample":
        raise ValueError(
            f"--ablation {config.ablation}: pairs are ablated from the partner text; use "
            "--ablation resample (the default here)"
        )
    if args.n_heldout < 1:
        raise ValueError("--n-heldout must be >= 1: the circuit is judged on held-out pairs")
    rows = check_pair_source(args)
    from circuits._io import atomic_folder, write_json
    from circuits.discovery import circuit_graph, discover
    from circuits.graph.eap_ig import shape_of, write_eap_ig
    from circuits.graph.io import write

    model = load(args)
    pairs = load_pairs(model, args, rows)
    fit, held = pairs[: args.n_fit], pairs[args.n_fit :]
    circuit = discover(model, fit, held, None, positions=None, config=config)
    source = args.pairs or f"task {args.task} (seed {args.pair_seed})"
    graph = circuit_graph(circuit, model, data=source, metric_spec={"metric": "pairs"})
    summary = {"pairs": source, "n_tokens": int(pairs.shape[1]), **circuit.summary()}
    summary.pop("positions", None)  # every position
    with atomic_folder(out) as tmp:
        write_json(tmp / "summary.json", summary)
        circuit.curve.to_csv(tmp / "curve.csv", index=False)
        circuit.edges_frame().to_csv(tmp / "edges.csv", index=False)
        write(graph, tmp / "circuit.json")
        write_eap_ig(graph, tmp / "circuit.eap-ig.json", shape_of(model))
    print_summary(summary)
    print(f"wrote {out} (circuit.json; circuit.eap-ig.json for EAP-IG / MIB)")
    return 0


def add_discover(sub) -> None:
    p = sub.add_parser(
        "discover",
        help="edge circuit of a behaviour given as counterfactual text pairs (or --task ioi)",
        description="Find the edge circuit of logit(answer) - logit(wrong) at the last position "
        "on clean / corrupted text pairs (each ablated edge takes its value in the partner "
        "text, at every position), fitted on --n-fit pairs and judged on --n-heldout others.",
    )
    pair_source(p)
    model_options(p)
    out_option(p, "summary.json, curve.csv, edges.csv, circuit.json, circuit.eap-ig.json")
    config_options(p, DiscoveryConfig)
    p.set_defaults(func=_cmd_discover, ablation="resample")


__all__ = [
    "add_discover",
    "check_pair_source",
    "faithfulness_on_pairs",
    "load_pairs",
    "pair_options",
    "pair_source",
]
