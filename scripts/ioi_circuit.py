"""The IOI edge circuit of one model with one method, written to a folder of docs/ioi/.

    .venv/bin/python scripts/ioi_circuit.py --model smollm2-135m --methods eap eap_ig \\
        --out docs/ioi/smollm2-135m      # one folder per method inside

IOI pairs (clean, ABC-corrupted) from `attn_sink_circuits.studies.ioi.prompts`, metric logit(IO) - logit(S) at the
last position, resample-from-the-partner ablation at every position. Writes summary.json (the
circuit's summary, the model's own logit difference and accuracy, timings), curve.csv,
edges.csv, heads.json (every head's attention from the last position to the IO and S tokens
on the held-out clean prompts, direct effect, copy score and name-mover verdict from
`attn_sink_circuits.studies.ioi.name_movers`, and its edges in the circuit), circuit.json (the circuit graph)
and curve.png; edges.csv and circuit.json gzip'd (NAME.gz) when large (`attn_sink_circuits.runs.io.LEAN_OVER`). `--heads-only` rewrites heads.json from a saved circuit.json (no discovery).
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import time
from dataclasses import asdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from attn_sink_circuits.discovery import DiscoveryConfig, circuit_graph, discover  # noqa: E402
from attn_sink_circuits.discovery.protocol import protocol  # noqa: E402
from attn_sink_circuits.discovery.recorded import record_pairs  # noqa: E402
from attn_sink_circuits.graph.io import read, write  # noqa: E402
from attn_sink_circuits.models import load_model  # noqa: E402
from attn_sink_circuits.runs.io import stored, write_csv, write_json  # noqa: E402
from attn_sink_circuits.studies.ioi.name_movers import NameMoverRule, name_mover_table  # noqa: E402
from attn_sink_circuits.studies.ioi.prompts import ioi_pairs  # noqa: E402


def behaviour(model, pairs) -> dict:
    """The model's own logit(IO) - logit(S) on clean and corrupted prompts."""
    rows = torch.arange(len(pairs))
    out = {}
    with torch.no_grad():
        for kind in ("clean", "corrupt"):
            logits = model(getattr(pairs, kind))[:, -1]
            diff = logits[rows, pairs.answer] - logits[rows, pairs.wrong]
            out[f"{kind}_logit_diff_mean"] = float(diff.mean())
            out[f"{kind}_logit_diff_sd"] = float(diff.std())
            out[f"{kind}_io_above_s"] = float((diff > 0).float().mean())
    return out


def head_table(model, graph, pairs) -> list[dict]:
    """Every head of the model on the held-out clean prompts (`name_mover_table`: attention
    from the last position to IO / S1 / S2, direct effect on logit(IO) - logit(S), copy score,
    name-mover verdict), with its direct edges in the circuit `graph`: how many it sends, how
    many into the logits and their summed score (minus the estimated effect: positive when
    the edges support logit(IO) - logit(S))."""
    cfg = model.cfg
    every = [(layer, h) for layer in range(cfg.n_layers) for h in range(cfg.n_heads)]
    rows = name_mover_table(model, pairs, every)
    for row in rows:
        row.update(in_circuit=False, edges_out=0, to_logits=0, to_logits_score=0.0)
    by_name = {row["head"]: row for row in rows}
    for sender, receiver, d in graph.edges(data=True):
        if d.get("edge_kind") != "direct" or sender not in by_name:
            continue
        row = by_name[sender]
        row["in_circuit"] = True
        row["edges_out"] += 1
        if receiver.startswith("target:"):
            row["to_logits"] += 1
            row["to_logits_score"] -= float(d["estimated_effect"])
    return sorted(rows, key=lambda r: -abs(r["to_logits_score"]))


def write_heads(model, graph, pairs, out: Path) -> None:
    """heads.json: the name-mover rule's thresholds and `head_table`'s rows."""
    rule = asdict(NameMoverRule())
    write_json(out / "heads.json", {"rule": rule, "heads": head_table(model, graph, pairs)})


def plot_curve(curve, summary: dict, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    ax.plot(curve["n_edges"], curve["faithfulness_fit"], "o-", label="fit pairs")
    ax.plot(curve["n_edges"], curve["faithfulness_heldout"], "s-", label="held-out pairs")
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.axvline(summary["n_edges"], color="k", lw=0.8, ls=":", label="circuit")
    ax.set_xscale("log")
    ax.set_xlabel("edges kept (after pruning)")
    ax.set_ylabel("faithfulness")
    ax.set_title(f"IOI, {summary['model']}, {summary['method']}", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--methods", nargs="+", default=["eap", "eap_ig"])
    p.add_argument("--n-fit", type=int, default=32)
    p.add_argument("--n-heldout", type=int, default=32)
    p.add_argument("--ig-steps", type=int, default=8)
    p.add_argument("--n-curve", type=int, default=12)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)
    p.add_argument("--option", nargs="*", default=[],
                   help="other DiscoveryConfig fields KEY=VALUE, e.g. grad_batch=4")  # fmt: skip
    p.add_argument("--heads-only", action="store_true",
                   help="no discovery: rewrite each method folder's heads.json from its saved "
                   "circuit.json (same pairs: same --n-fit, --n-heldout, --seed)")  # fmt: skip
    args = p.parse_args()
    try:  # a bad option fails here, before a model loads
        DiscoveryConfig().with_option_strings(args.option)
    except ValueError as err:
        p.error(str(err))
    t0 = time.time()
    saved = {m: Path(args.out) / m / "circuit.json" for m in args.methods}
    missing = [str(path) for path in saved.values() if not stored(path).is_file()]
    if args.heads_only and missing:
        p.error(f"--heads-only needs a saved circuit; not found: {', '.join(missing)}")
    model = load_model(args.model)
    pairs, prompts = ioi_pairs(model, args.n_fit + args.n_heldout, seed=args.seed)
    for method in args.methods:
        if args.heads_only:
            write_heads(model, read(saved[method]), pairs[args.n_fit :], saved[method].parent)
            continue
        run(model, pairs, prompts, method, args, Path(args.out) / method)
        print(f"{method}: {time.time() - t0:.0f} s since start", flush=True)


def run(model, pairs, prompts, method: str, args, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    fit, held = pairs[: args.n_fit], pairs[args.n_fit :]
    cfg = DiscoveryConfig(method=method, ig_steps=args.ig_steps, ablation="resample",
                          n_curve=args.n_curve, seed=args.seed)  # fmt: skip
    cfg = cfg.with_option_strings(args.option)
    t1 = time.time()
    circuit = discover(model, fit, held, None, positions=None, config=cfg, progress=True)
    t2 = time.time()
    summary = {"model": args.model, **circuit.summary()}
    summary.pop("positions", None)
    f = summary["heldout_faithfulness"]
    summary.update(
        {
            "abs_1_minus_f_heldout": abs(1 - f) if math.isfinite(f) else math.nan,
            "n_tokens": int(pairs.shape[1]),
            "templates": sorted({p.template for p in prompts}),
            "ig_steps": args.ig_steps if method.startswith("eap_ig") else None,
            **{f"model_{k}": v for k, v in behaviour(model, pairs).items()},
            "heldout_model_metric": circuit.heldout.model_metric,
            "heldout_empty_metric": circuit.heldout.empty_metric,
            "seconds_discover": round(t2 - t1, 1),
            "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2),
        }
    )
    circuit.curve.to_csv(out / "curve.csv", index=False)
    write_csv(out / "edges.csv", circuit.edges_frame(), lean=True)
    plot_curve(circuit.curve, summary, out / "curve.png")
    graph = circuit_graph(circuit, model, data="IOI pairs (attn_sink_circuits.studies.ioi.prompts)",
                          metric_spec={"metric": "pairs"})  # fmt: skip
    record_pairs(graph, "ioi", "abc", protocol("library"))  # ioi_pairs' defaults
    write(graph, out / "circuit.json", lean=True)
    write_heads(model, graph, held, out)
    summary["seconds_with_judgement"] = round(time.time() - t0, 1)
    write_json(out / "summary.json", summary)
    print(json.dumps(summary, indent=1, default=str))


if __name__ == "__main__":
    main()
