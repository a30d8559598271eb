"""Do a run's edge scores add up? At each of MIB's sizes, the circuit's summed edge score as a
share of all edges' (the additive prediction of its faithfulness) beside its measured f.

Reads what `scripts/mib_ioi.py` wrote (OUT/importances.mib.json, OUT/mib_curves.csv), rebuilds
the circuits of MIB's curve exactly as the run did (top edges by |score| or by signed score,
then pruned; the edge counts are checked against the run's), and writes OUT/summary.json (per
run, size and ranking: edges kept, the additive prediction, its supporting and opposing parts,
f on the fit and held-out pairs) and OUT/table.md. If scores added up (each edge's estimated
effect independent of which other edges are ablated), the prediction would equal f; where
they do not, the ranking orders edges by effects they do not have in the circuit.

With `--exact N` it also asks why not, on the run's first `--exact-pairs` fit pairs (made
again from its record and checked against its hash): the run's method scores those pairs again
(each edge's estimated effect of ablating it alone, first order), each of the top N edges by
|score| is ablated alone from the model (its exact effect), and the top k of them together
(k in `JOINT_SIZES`). Estimated against exact singles is the attribution's own error; the sum
of exact singles against the joint effect is the edges' interaction, which no per-edge score
can carry. Written to OUT/summary.json ("exact") and OUT/exact.md.

    .venv/bin/python scripts/mib_additivity.py --model smollm2-135m \\
        --runs /tmp/mibruns/smollm2-135m-s2_io_flip-eap_ig_inputs-100 \\
               /tmp/mibruns/smollm2-135m-abc-eap_ig_inputs-100 --out docs/mib/additivity \\
        --exact 100 --exact-pairs 20
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

import pandas as pd

FRACTIONS_SHOWN = (0.001, 0.005, 0.01, 0.05, 0.2)
"""Sizes of MIB's curve shown in the Markdown table (summary.json has all ten)."""

JOINT_SIZES = (1, 3, 10, 30, 100)
"""How many of the top edges `--exact` ablates together (those up to N)."""


def additivity(space, scores, curves: pd.DataFrame, run: str) -> list[dict]:
    """One row per ranking and size of MIB's curve (see the module docstring)."""
    from attn_sink_circuits.discovery.areas import MIB_FRACTIONS
    from attn_sink_circuits.discovery.evaluation import prune, top_mask, top_order

    total = float(scores.sum())
    rows = []
    for rank, key in (("abs", scores.abs()), ("signed", scores)):
        order = top_order(space, key)
        for i, fraction in enumerate(MIB_FRACTIONS):
            kept = prune(space, top_mask(order, int(fraction * space.n_edges), space.n_edges))
            f = {s: curves[(curves.split == s) & (curves["rank"] == rank)].iloc[i]
                 for s in ("fit", "heldout")}  # fmt: skip
            ran = {int(f[s].n_edges) for s in f}
            if ran != {int(kept.sum())}:
                raise ValueError(f"{run}: {rank} {fraction}: {int(kept.sum())} edges rebuilt, "
                                 f"the run kept {sorted(ran)}")  # fmt: skip
            part = scores[kept]
            rows.append({
                "run": run, "rank": rank, "fraction": fraction, "n_edges": int(kept.sum()),
                "additive": float(part.sum()) / total,
                "supporting": float(part.clamp(min=0).sum()) / total,
                "opposing": float(part.clamp(max=0).sum()) / total,
                "f_fit": float(f["fit"].f), "f_heldout": float(f["heldout"].f),
            })  # fmt: skip
    return rows


def exact_effects(model, summary: dict, scores, n_edges: int, fit) -> dict:
    """The run's top `n_edges` edges by |score| on `fit` (its first fit pairs): estimated and
    exact effects of ablating each alone, and of the top k together (see the module docstring).
    Effects are the metric's change (patched - clean), also as a share of the whole model's
    (clean - every edge ablated)."""
    import numpy as np
    import torch

    from attn_sink_circuits.discovery.config import DiscoveryConfig
    from attn_sink_circuits.discovery.evaluation import empty_metric, evaluate
    from attn_sink_circuits.discovery.forward import EdgeRunner
    from attn_sink_circuits.discovery.methods import scorer
    from attn_sink_circuits.discovery.path_patching import edge_effects

    cfg = DiscoveryConfig().with_options(**summary["provenance"]["settings"])
    runner = EdgeRunner(model, fit, None, positions=None, ablation=cfg.ablation, seed=cfg.seed,
                        kv_inputs=cfg.kv_inputs)  # fmt: skip
    edges = scores.abs().argsort(descending=True)[:n_edges]
    # the scores' sign is MIB's (positive supports): ablating an edge changes the metric by -score
    estimated = -scorer(cfg.method)(runner, cfg).values.mean(0)[edges].numpy()
    exact = edge_effects(runner, edges.tolist(), batch_size=cfg.batch_size).mean(1).numpy()
    sizes = [k for k in JOINT_SIZES if k <= n_edges]
    masks = torch.ones(len(sizes), runner.space.n_edges, dtype=torch.bool)
    for i, k in enumerate(sizes):
        masks[i, edges[:k]] = False
    clean = float(runner.clean.metric.mean())
    joint = evaluate(runner, masks, batch_size=cfg.batch_size).mean(1).numpy() - clean
    whole = clean - float(empty_metric(runner).mean())
    rows = [{"k": k, "estimated_sum": float(estimated[:k].sum()), "exact_sum": float(exact[:k].sum()),
             "joint": float(joint[i]), "share_of_whole": float(joint[i] / whole)}
            for i, k in enumerate(sizes)]  # fmt: skip
    slope = float(np.polyfit(exact, estimated, 1)[0])
    return {"n_pairs": len(fit), "n_edges": n_edges, "whole_effect": whole,
            "pearson": float(np.corrcoef(estimated, exact)[0, 1]), "slope": slope,
            "median_abs_error": float(np.median(np.abs(estimated - exact))), "rows": rows}  # fmt: skip


def exact_table(exact: dict, labels: dict[str, str]) -> str:
    lines = ["| run | pairs | top edges | r (estimated, exact) | slope | k | sum of estimates | "
             "sum of exact singles | joint (exact) | joint / whole |",
             "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for run, e in exact.items():
        for r in e["rows"]:
            lines.append(
                f"| {labels[run]} | {e['n_pairs']} | {e['n_edges']} | {e['pearson']:.2f} | "
                f"{e['slope']:.2f} | {r['k']} | {r['estimated_sum']:.2f} | {r['exact_sum']:.2f} "
                f"| {r['joint']:.2f} | {r['share_of_whole']:.2f} |"
            )
    return "\n".join(lines) + "\n"


def table(rows: list[dict], labels: dict[str, str]) -> str:
    lines = ["| run | ranking | share of edges | edges | additive prediction (supporting, "
             "opposing) | f fit | f held-out |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        if r["fraction"] not in FRACTIONS_SHOWN:
            continue
        lines.append(
            f"| {labels[r['run']]} | {r['rank']} | {r['fraction']:.1%} | {r['n_edges']:,} | "
            f"{r['additive']:.2f} ({r['supporting']:.2f}, {r['opposing']:.2f}) | "
            f"{r['f_fit']:.2f} | {r['f_heldout']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def one_run(model, space, run: Path) -> tuple:
    """A run folder's summary, its inputs' record (importance file hash, the run's commit and
    command), its edge scores (in `space`'s order) and its (fit, held-out) pairs made again
    (refused unless they hash as its record: the texts its curves were measured on)."""
    from attn_sink_circuits.discovery.protocol import read_mib_scores, read_run
    from attn_sink_circuits.discovery.submission import importance_file
    from attn_sink_circuits.studies.ioi.prompts import saved_run_pairs

    try:
        importances = importance_file(run)
    except FileNotFoundError as err:
        raise SystemExit(f"{err}; give a folder mib_ioi.py wrote") from None
    summary = read_run(run)
    inputs = {
        "importances_sha256": hashlib.sha256(importances.read_bytes()).hexdigest(),
        "run_commit": summary["provenance"]["code"]["commit"],
        "run_command": summary["provenance"]["command"],
    }
    return summary, inputs, read_mib_scores(importances, space), saved_run_pairs(model, summary)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--runs", nargs="+", required=True, help="folders mib_ioi.py wrote")
    p.add_argument("--out", required=True)
    p.add_argument(
        "--exact",
        type=int,
        default=0,
        metavar="N",
        help="also ablate the top N edges alone and together (see above)",
    )
    p.add_argument(
        "--exact-pairs",
        type=int,
        default=20,
        metavar="M",
        help="on the run's first M fit pairs (default 20)",
    )
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    if args.exact < 0 or args.exact_pairs < 1:
        p.error("--exact takes a count of edges >= 0 and --exact-pairs a count of pairs >= 1")

    import torch

    from attn_sink_circuits.discovery.dag import build_space
    from attn_sink_circuits.models import load_model
    from attn_sink_circuits.patching.metrics import Metric
    from attn_sink_circuits.runs.io import atomic_folder, atomic_write, write_json
    from attn_sink_circuits.runs.provenance import provenance, stamped

    torch.set_num_threads(args.threads)
    model = load_model(args.model)
    logits = Metric("pairs", (), lambda acts, logits: logits, logits=True)
    space = build_space(model, logits, None, "ungrouped")
    rows, inputs, labels, exact, texts = [], {}, {}, {}, []
    for run in map(Path, args.runs):
        summary, inputs[run.name], scores, (fit, held) = one_run(model, space, run)
        labels[run.name] = f"{summary['partner']} {summary['method']}"
        rows += additivity(space, scores, pd.read_csv(run / "mib_curves.csv"), run.name)
        texts += [(run.name, row) for row in fit.rows() + held.rows()]
        if args.exact:
            exact[run.name] = exact_effects(model, summary, scores, args.exact,
                                            fit[: args.exact_pairs])  # fmt: skip
    settings = {"graph": f"{args.model}, ungrouped", "runs": inputs, "exact": args.exact,
                "exact_pairs": args.exact_pairs}  # fmt: skip
    kinds, rows_of = [k for k, _ in texts], [r for _, r in texts]
    record = provenance(model, rows_of, kinds, settings=settings,
                        source="each run's IOI pairs (its record), run name as kind")  # fmt: skip
    with atomic_folder(Path(args.out), record=record) as tmp:
        out = {"rows": rows, "runs": inputs} | ({"exact": exact} if exact else {})
        write_json(tmp / "summary.json", stamped(out, record))
        with atomic_write(tmp / "table.md") as fh:
            fh.write(table(rows, labels))
        if exact:
            with atomic_write(tmp / "exact.md") as fh:
                fh.write(exact_table(exact, labels))
    print(table(rows, labels) + (exact_table(exact, labels) if exact else ""))


if __name__ == "__main__":
    main()
