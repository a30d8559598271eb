"""Every edge into the logits of one model on IOI, scored four ways side by side: its exact
effect (path patching: that edge alone ablated), EAP, EAP-IG over the edge coefficients
(`eap_ig`) and EAP-IG over the input (`eap_ig_inputs`).

    .venv/bin/python scripts/ioi_logit_edges.py --model smollm2-135m \\
        --out docs/ioi/smollm2-135m/logit_edges.json

The pairs are `scripts/ioi_circuit.py`'s fit pairs (the first `--n-fit` of `ioi_pairs(model,
n_fit + n_heldout, seed)`), metric logit(IO) - logit(S) at the last position, every edge ablated
at every position from the ABC partner. Each number is the change of the metric when the edge
alone is ablated, averaged over the pairs: exact = patched - clean; each method's estimate =
minus its score (negative: the edge supports the metric). Writes the JSON (every edge into the
logits, Spearman correlation of each estimate with the exact effects) and prints a markdown
table of the `--top` edges by |exact effect| plus `--heads`.
"""

from __future__ import annotations

import argparse
import resource
import time

import torch
from ioi_docs import edge_table  # scripts/ioi_docs.py: the same table in docs/ioi/RESULTS.md
from scipy.stats import spearmanr

from attn_sink_circuits.discovery import EdgeRunner, eap, edge_effects
from attn_sink_circuits.discovery.attribution import eap_ig, eap_ig_inputs
from attn_sink_circuits.models import load_model
from attn_sink_circuits.runs.io import write_json
from attn_sink_circuits.studies.ioi.prompts import ioi_pairs

COLUMNS = ("exact", "eap", "eap_ig", "eap_ig_inputs")
LABELS = {
    "exact": "exact (path patching)",
    "eap": "EAP (gradient at the clean run)",
    "eap_ig": "EAP-IG over the edge coefficients",
    "eap_ig_inputs": "EAP-IG over the input",
}


def estimates(runner: EdgeRunner, edges: list[int], steps: int, batch: int) -> dict:
    """Per column: the metric's change per edge (mean over pairs) and the seconds it took."""
    scorers = {
        "eap": lambda: eap(runner, batch=batch),
        "eap_ig": lambda: eap_ig(runner, steps, batch=batch),
        "eap_ig_inputs": lambda: eap_ig_inputs(runner, steps, batch=batch),
    }
    t = time.time()
    out = {"exact": (edge_effects(runner, edges).mean(1), time.time() - t)}
    for name, fn in scorers.items():
        t = time.time()
        out[name] = (-fn()[:, edges].mean(0), time.time() - t)
        print(f"{name}: {out[name][1]:.0f} s", flush=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--n-fit", type=int, default=24)
    p.add_argument("--n-heldout", type=int, default=24)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ig-steps", type=int, default=5)
    p.add_argument("--grad-batch", type=int, default=4)
    p.add_argument("--top", type=int, default=10)
    p.add_argument("--heads", nargs="*", default=["L23.H0", "L23.H2"])
    p.add_argument("--out", required=True)
    args = p.parse_args()
    if args.ig_steps < 1 or args.grad_batch < 1 or args.n_fit < 1:
        p.error("--ig-steps, --grad-batch and --n-fit must be >= 1")
    model = load_model(args.model)
    pairs, _ = ioi_pairs(model, args.n_fit + args.n_heldout, seed=args.seed)
    runner = EdgeRunner(model, pairs[: args.n_fit], None, positions=None, ablation="resample")
    names = runner.space.edge_names()
    edges = [i for i, n in enumerate(names) if n.endswith("->target:ln_final.hook_in")]
    got = estimates(runner, edges, args.ig_steps, args.grad_batch)
    rows = [{"edge": names[e].split("->")[0] + "->logits",
             **{c: float(got[c][0][k]) for c in COLUMNS}} for k, e in enumerate(edges)]  # fmt: skip
    rows.sort(key=lambda r: -abs(r["exact"]))
    exact = [r["exact"] for r in rows]
    spearman = {c: float(spearmanr(exact, [r[c] for r in rows]).statistic) for c in COLUMNS[1:]}
    chosen = [r["edge"] for r in rows[: args.top]] + [f"{h}->logits" for h in args.heads]
    doc = {
        "model": args.model, "n_pairs": args.n_fit, "seed": args.seed,
        "ig_steps": args.ig_steps, "heads": args.heads,
        "metric": "logit(IO) - logit(S), last position",
        "ablation": "resample from the ABC partner, every position",
        "value": "metric change when the edge alone is ablated, mean over the pairs "
                 "(exact: patched - clean; methods: minus the score)",
        "columns": LABELS, "spearman_with_exact": spearman,
        "seconds": {c: round(got[c][1], 1) for c in COLUMNS},
        "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2),
        "edges": rows,
    }  # fmt: skip
    write_json(args.out, doc)
    print(edge_table(doc, chosen))
    print("Spearman with exact over", len(rows), "edges:", spearman)


if __name__ == "__main__":
    torch.manual_seed(0)
    main()
