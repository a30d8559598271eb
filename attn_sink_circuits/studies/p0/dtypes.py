"""Reduced precision against float32: sink metrics, P0 edge-circuit faithfulness and EAP scores
of one model loaded in float32, bfloat16 and float16 (every metric and score is reduced in
float32 whatever the weights' dtype), printed as a markdown table of differences.

Texts: the first `--n` paragraphs of `data/texts/python_reference.jsonl`. The circuit is the
committed one, read from the working folder (run it from the repository).
- sinks: `attn_sink_circuits.sinks.measure` on the texts, whole; per-layer P0 mass (mean over heads and
  texts), Gu et al.'s sink rate (eps 0.3) and the sink score of every position (mean over heads
  and later queries), cosines with the sink state; the largest |dtype - float32| of each.
- P0 edge circuit: the saved circuit `docs/p0/<model>/circuit.graphml` judged on the texts
  (`judge_saved`: held-out faithfulness, random circuits of its size).
- EAP / EAP-IG: edge scores of the same metric and positions on the texts (mean over texts);
  their Pearson correlation with float32, the largest |difference| over the largest |score|,
  and the share of float32's top-100 edges among the dtype's top 100.

    python -m attn_sink_circuits.studies.p0.dtypes [--model smollm2-135m] [--n 16] [--ig-steps 4]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from attn_sink_circuits.core.texts import DATA, read_texts

TEXTS = DATA / "python_reference.jsonl"
CIRCUITS = Path("docs") / "p0"
"""The committed P0 circuits: `CIRCUITS/<model>/circuit.graphml`."""
DTYPES = ("float32", "bfloat16", "float16")


def figures(key: str, dtype: str, texts: list[str], ig_steps: int) -> dict:
    """Every figure of one dtype (raw tensors; compared to float32 later)."""
    from attn_sink_circuits.core.tokens import token_rows
    from attn_sink_circuits.discovery.attribution import eap, eap_ig
    from attn_sink_circuits.discovery.forward import EdgeRunner
    from attn_sink_circuits.discovery.saved import judge_saved
    from attn_sink_circuits.graph import io as graph_io
    from attn_sink_circuits.models import load_model
    from attn_sink_circuits.patching.metrics import build_metric
    from attn_sink_circuits.sinks.runner import measure

    model = load_model(key, dtype=getattr(torch, dtype))
    t_all = time.perf_counter()
    report = measure(model, texts, progress=False)
    graph = graph_io.read(CIRCUITS / key / "circuit.graphml")
    judged = judge_saved(model, graph, texts, n_random=5, n_boot=200)
    first = int(graph.graph["first_token"])
    tokens = token_rows(model, texts, int(graph.graph["n_tokens"]), None if first < 0 else first)
    metric = build_metric(json.loads(graph.graph["metric_spec"]))
    runner = EdgeRunner(model, tokens, metric, positions=json.loads(graph.graph["positions"]))
    scores_eap = eap(runner).mean(0)
    scores_ig = eap_ig(runner, ig_steps).mean(0)
    return {
        "p0_mass": report.p0_mass.mean(-1),
        "sink_rate": report.sink_rate,
        "score": torch.cat([t.score.flatten() for t in report.texts]),
        "cosine": torch.cat([t.cosine.flatten() for t in report.texts]),
        "faithfulness": judged["faithfulness"],
        "random": judged["random_faithfulness"],
        "n_edges": judged["n_edges"],
        "model_metric": judged["model_metric"],
        "eap": scores_eap,
        "eap_ig": scores_ig,
        "seconds": round(time.perf_counter() - t_all, 1),
    }


def largest(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b| where both are finite."""
    ok = a.isfinite() & b.isfinite()
    return float((a[ok] - b[ok]).abs().max())


def score_rows(ref: torch.Tensor, other: torch.Tensor) -> tuple[float, float, float]:
    """(Pearson r, max |diff| / max |ref|, share of ref's top-100 |score| edges in other's)."""
    r = float(torch.corrcoef(torch.stack([ref, other]))[0, 1])
    rel = float((ref - other).abs().max() / ref.abs().max())
    k = min(100, len(ref))
    top = set(ref.abs().topk(k).indices.tolist())
    return r, rel, len(top & set(other.abs().topk(k).indices.tolist())) / k


def table(rows: dict[str, dict]) -> str:
    """Markdown: a row per figure, float32's value then each other dtype's (or its difference)."""
    ref = rows["float32"]
    lines = [
        "| figure | float32 | " + " | ".join(d for d in rows if d != "float32") + " |",
        "|---|---|" + "---|" * (len(rows) - 1),
    ]

    def line(name: str, base: str, cells: list[str]) -> None:
        lines.append(f"| {name} | {base} | " + " | ".join(cells) + " |")

    others = [rows[d] for d in rows if d != "float32"]
    line("P0 mass per layer (mean over heads, texts): max abs diff", "-",
         [f"{largest(ref['p0_mass'], o['p0_mass']):.2e}" for o in others])  # fmt: skip
    line(
        "sink rate (eps 0.3)", f"{ref['sink_rate']:.4f}", [f"{o['sink_rate']:.4f}" for o in others]
    )
    line("sink score, every layer and position: max abs diff", "-",
         [f"{largest(ref['score'], o['score']):.2e}" for o in others])  # fmt: skip
    line("cosine with the sink state: max abs diff", "-",
         [f"{largest(ref['cosine'], o['cosine']):.2e}" for o in others])  # fmt: skip
    line("P0 edge circuit: metric of the whole model", f"{ref['model_metric']:.4f}",
         [f"{o['model_metric']:.4f}" for o in others])  # fmt: skip
    line(f"P0 edge circuit ({ref['n_edges']} edges): faithfulness", f"{ref['faithfulness']:.4f}",
         [f"{o['faithfulness']:.4f} ({o['faithfulness'] - ref['faithfulness']:+.4f})"
          for o in others])  # fmt: skip
    line("same-size random circuits: mean faithfulness", f"{ref['random']:.4f}",
         [f"{o['random']:.4f}" for o in others])  # fmt: skip
    for name in ("eap", "eap_ig"):
        cells = []
        for o in others:
            r, rel, top = score_rows(ref[name], o[name])
            cells.append(f"r {r:.5f}, max diff {rel:.1e} of max, top-100 {top:.0%}")
        line(f"{name.upper().replace('_', '-')} scores (mean over texts) vs float32", "-", cells)
    line("seconds (load excluded; 2 shared cores)", f"{ref['seconds']}",
         [f"{o['seconds']}" for o in others])  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m attn_sink_circuits.studies.p0.dtypes", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--n", type=int, default=16, help="texts")
    parser.add_argument("--ig-steps", type=int, default=4)
    parser.add_argument("--dtypes", nargs="+", default=list(DTYPES), choices=DTYPES)
    args = parser.parse_args(argv)
    if args.dtypes[0] != "float32":
        parser.error("--dtypes must start with float32 (the reference)")
    if not (CIRCUITS / args.model / "circuit.graphml").is_file():
        parser.error(f"no P0 circuit of {args.model} at {CIRCUITS / args.model} (run from the "
                     "repository, or `circuits p0` first)")  # fmt: skip
    torch.manual_seed(0)
    texts = read_texts(TEXTS)[: args.n]
    rows = {d: figures(args.model, d, texts, args.ig_steps) for d in args.dtypes}
    print(f"model {args.model}, {len(texts)} texts of {TEXTS.name}, EAP-IG {args.ig_steps} steps")
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
