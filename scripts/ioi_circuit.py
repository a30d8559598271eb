"""The IOI edge circuit of one model with one method, written to a folder of docs/ioi/.

    .venv/bin/python scripts/ioi_circuit.py --model smollm2-135m --methods eap eap_ig \\
        --out docs/ioi/smollm2-135m      # one folder per method inside

IOI pairs (clean, ABC-corrupted) from `circuits.tasks.ioi`, metric logit(IO) - logit(S) at the
last position, resample-from-the-partner ablation at every position. Writes summary.json (the
circuit's summary, the model's own logit difference and accuracy, timings), curve.csv,
edges.csv, heads.csv (each circuit head's attention from the last position to the IO and S
tokens on the held-out clean prompts, and its edges into the final residual), circuit.json (the
circuit graph) and curve.png.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from circuits._io import strict_json  # noqa: E402
from circuits.discovery import DiscoveryConfig, circuit_graph, discover  # noqa: E402
from circuits.graph.io import write  # noqa: E402
from circuits.models import load_model  # noqa: E402
from circuits.tasks.ioi import ioi_pairs, name_positions  # noqa: E402


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


def head_table(model, circuit, pairs) -> list[dict]:
    """Each head that sends in the circuit: mean attention from the last position to the IO,
    first S and second S tokens over the held-out clean prompts; its edges into the final
    residual (count and summed score)."""
    sp = circuit.runner.space
    where = name_positions(pairs)
    mask_edges = sp.edges[circuit.mask].tolist()
    mean = circuit.scores.mean(0)[circuit.mask].tolist()
    heads: dict[tuple[int, int], dict] = {}
    for (r, s), score in zip(mask_edges, mean, strict=True):
        name = sp.senders[s]
        if ".H" not in name:
            continue
        layer, head = (int(x) for x in name[1:].split(".H"))
        row = heads.setdefault((layer, head), {"head": name, "edges_out": 0, "to_logits": 0,
                                               "to_logits_score": 0.0})  # fmt: skip
        row["edges_out"] += 1
        if sp.receivers[r].kind == "target":
            row["to_logits"] += 1
            row["to_logits_score"] += float(score)
    layers = sorted({layer for layer, _ in heads})
    hooks = [f"blocks.{layer}.attn.hook_pattern" for layer in layers]
    with torch.no_grad():
        _, cache = model.run_with_cache(pairs.clean, names_filter=lambda n: n in hooks)
    rows = torch.arange(len(pairs))
    for (layer, head), row in heads.items():
        last = cache[f"blocks.{layer}.attn.hook_pattern"][:, head, -1]  # [pair, key]
        for key in ("io", "s1", "s2"):
            row[f"attn_{key}"] = float(last[rows, torch.tensor(where[key])].mean())
    return sorted(heads.values(), key=lambda r: -abs(r["to_logits_score"]))


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
    args = p.parse_args()
    t0 = time.time()
    model = load_model(args.model)
    pairs, prompts = ioi_pairs(model, args.n_fit + args.n_heldout, seed=args.seed)
    for method in args.methods:
        run(model, pairs, prompts, method, args, Path(args.out) / method)
        print(f"{method}: {time.time() - t0:.0f} s since start", flush=True)


def run(model, pairs, prompts, method: str, args, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    fit, held = pairs[: args.n_fit], pairs[args.n_fit :]
    cfg = DiscoveryConfig(method=method, ig_steps=args.ig_steps, ablation="resample",
                          n_curve=args.n_curve, seed=args.seed)  # fmt: skip
    t1 = time.time()
    circuit = discover(model, fit, held, None, positions=None, config=cfg)
    t2 = time.time()
    summary = {"model": args.model, **circuit.summary()}
    summary.pop("positions", None)
    f = summary["heldout_faithfulness"]
    summary.update(
        {
            "abs_1_minus_f_heldout": abs(1 - f) if math.isfinite(f) else math.nan,
            "n_tokens": int(pairs.shape[1]),
            "templates": sorted({p.template for p in prompts}),
            "ig_steps": args.ig_steps if method == "eap_ig" else None,
            **{f"model_{k}": v for k, v in behaviour(model, pairs).items()},
            "heldout_model_metric": circuit.heldout.model_metric,
            "heldout_empty_metric": circuit.heldout.empty_metric,
            "seconds_discover": round(t2 - t1, 1),
            "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2),
        }
    )
    heads = head_table(model, circuit, held)
    (out / "heads.json").write_text(strict_json(heads) + "\n")
    circuit.curve.to_csv(out / "curve.csv", index=False)
    circuit.edges_frame().to_csv(out / "edges.csv", index=False)
    plot_curve(circuit.curve, summary, out / "curve.png")
    graph = circuit_graph(circuit, model, data="IOI pairs (circuits.tasks.ioi)",
                          metric_spec={"metric": "pairs"})  # fmt: skip
    write(graph, out / "circuit.json")
    summary["seconds_with_judgement"] = round(time.time() - t0, 1)
    (out / "summary.json").write_text(strict_json(summary) + "\n")
    print(json.dumps(summary, indent=1, default=str))


if __name__ == "__main__":
    main()
