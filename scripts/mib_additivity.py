"""Do a run's edge scores add up? At each of MIB's sizes, the circuit's summed edge score as a
share of all edges' (the additive prediction of its faithfulness) beside its measured f.

Reads what `scripts/mib_ioi.py` wrote (OUT/importances.mib.json, OUT/mib_curves.csv), rebuilds
the circuits of MIB's curve exactly as the run did (top edges by |score| or by signed score,
then pruned; the edge counts are checked against the run's), and writes OUT/summary.json (per
run, size and ranking: edges kept, the additive prediction, its supporting and opposing parts,
f on the fit and held-out pairs) and OUT/table.md. If scores added up (each edge's estimated
effect independent of which other edges are ablated), the prediction would equal f; where
they do not, the ranking orders edges by effects they do not have in the circuit.

    .venv/bin/python scripts/mib_additivity.py --model smollm2-135m \\
        --runs /tmp/mibruns/smollm2-135m-s2_io_flip-eap_ig_inputs-100 \\
               /tmp/mibruns/smollm2-135m-abc-eap_ig_inputs-100 --out docs/mib/additivity
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import pandas as pd

FRACTIONS_SHOWN = (0.001, 0.005, 0.01, 0.05, 0.2)
"""Sizes of MIB's curve shown in the Markdown table (summary.json has all ten)."""


def additivity(space, scores, curves: pd.DataFrame, run: str) -> list[dict]:
    """One row per ranking and size of MIB's curve (see the module docstring)."""
    from circuits.discovery.areas import MIB_FRACTIONS
    from circuits.discovery.evaluation import prune, top_mask, top_order

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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--runs", nargs="+", required=True, help="folders mib_ioi.py wrote")
    p.add_argument("--out", required=True)
    args = p.parse_args()

    from circuits._io import atomic_folder, atomic_write, write_json
    from circuits.discovery.dag import build_space
    from circuits.discovery.protocol import read_mib_scores
    from circuits.models import load_model
    from circuits.patching.metrics import Metric
    from circuits.provenance import provenance, stamped

    model = load_model(args.model)
    logits = Metric("pairs", (), lambda acts, logits: logits, logits=True)
    space = build_space(model, logits, None, "ungrouped")
    rows, inputs, labels = [], {}, {}
    for run in map(Path, args.runs):
        importances = run / "importances.mib.json"
        if not importances.is_file():
            raise SystemExit(f"{run}: no importances.mib.json; give a folder mib_ioi.py wrote")
        summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
        labels[run.name] = f"{summary['partner']} {summary['method']}"
        inputs[run.name] = {
            "importances_sha256": hashlib.sha256(importances.read_bytes()).hexdigest(),
            "run_commit": summary["provenance"]["code"]["commit"],
            "run_command": summary["provenance"]["command"],
        }
        scores = read_mib_scores(importances, space)
        rows += additivity(space, scores, pd.read_csv(run / "mib_curves.csv"), run.name)
    # No texts ran here (the model gives the graph): the runs' own records name theirs.
    record = provenance(settings={"graph": f"{args.model}, ungrouped", "runs": inputs})
    with atomic_folder(Path(args.out), record=record) as tmp:
        write_json(tmp / "summary.json", stamped({"rows": rows, "runs": inputs}, record))
        with atomic_write(tmp / "table.md") as fh:
            fh.write(table(rows, labels))
    print(table(rows, labels))


if __name__ == "__main__":
    main()
