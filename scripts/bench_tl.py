"""This library against TransformerLens 4.3's own edge tools, side by side in one process.

    .venv/bin/python scripts/bench_tl.py [--n-pairs 8] [--layers 4] [--d-model 128] [--heads 8]

TransformerLens refuses grouped-query attention for edges (`attribution_patch` and the k/v
components of `get_act_patch_direct_path` raise on n_key_value_heads != n_heads), so neither
SmolLM2 nor Qwen2.5 can be compared: the model here is the seeded random Llama of
`attn_sink_circuits.models.tiny` with as many key/value heads as query heads (MHA) and its byte tokenizer,
which TransformerLens accepts. Same texts (clean / corrupt pairs of one length), same metric
(logit(answer) - logit(wrong) at the last position, one token pair for all texts), same ablation
(each ablated sender takes its value in the partner text, at every position).

1. EAP: TL `attribution_patch(granularity="edge")` (per-position edges, summed here over
   positions; gradient at the corrupted run) against `eap(runner, at="corrupted")` and
   `at="clean"`: Spearman, top-k overlap, max difference.
2. Faithfulness of the same circuits (this library's top-k edges, at every position): TL
   `faithfulness` per text against `evaluate`: the circuit's metric per text, max difference.
3. Exact path patching of the same edges (every head -> later head's query input): TL
   `get_act_patch_direct_path` (one call per source head, denoising: the corrupted run with one
   path from the clean run) against `edge_effects` on the swapped pairs (the corrupted texts
   run, each edge takes its value in the clean partner): values, max difference.
Wall time and peak memory (RSS above the phase's start, sampled every 2 ms) of each.

With `--model smollm2-135m` (a grouped-query registry model) only part 3 runs, on IOI pairs
(query edges: TL's direct path patching refuses k / v there, and edge EAP and faithfulness
altogether).
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time

import numpy as np
import torch
from scipy.stats import spearmanr
from transformer_lens.patching import get_act_patch_direct_path
from transformer_lens.tools.analysis.attribution_patching import (
    EdgeAttributionConfig,
    Node,
    attribution_patch,
    faithfulness,
)

from attn_sink_circuits.discovery import EdgeRunner, eap, edge_effects, evaluate
from attn_sink_circuits.discovery.pairs import Pairs, tokenize
from attn_sink_circuits.models.tiny import tiny_model
from attn_sink_circuits.runs.io import write_json

NAMES = "ABCDEFGHIJKLMNOP"
PAGE = 4096


def rows(n: int) -> list[dict]:
    """`n` clean / corrupt pairs of one byte length (IOI-shaped: the corrupt names three others)."""
    out = []
    for i in range(n):
        a, b, c, d, e = (NAMES[(i + k) % len(NAMES)] for k in (0, 1, 5, 7, 11))
        out.append({"clean": f"When {a}n and {b}b ran, {b}b gave it to",
                    "corrupt": f"When {c}n and {d}b ran, {e}b gave it to",
                    "answer": "A", "wrong": "B"})  # fmt: skip
    return out


class Peak:
    """Wall time and peak RSS above the start (MB) of a `with` block."""

    def __enter__(self):
        self.base = self.peak = self._rss()
        self.stop = False
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.t0 = time.perf_counter()
        self.thread.start()
        return self

    def _rss(self) -> int:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * PAGE

    def _watch(self):
        while not self.stop:
            self.peak = max(self.peak, self._rss())
            time.sleep(0.002)

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.t0
        self.stop = True
        self.thread.join()
        self.peak = max(self.peak, self._rss())
        self.mb = (self.peak - self.base) / 1e6


def our_name(node: Node) -> str:
    """A TL node as this library's sender or receiver name."""
    if node.kind == "embed":
        return "embed"
    if node.kind == "attn_head_out":
        return f"L{node.layer}.H{node.head}"
    if node.kind == "mlp_out" or node.kind == "mlp_in":
        return f"L{node.layer}.MLP"
    if node.kind == "logits":
        return "target:ln_final.hook_in"
    return f"L{node.layer}.H{node.head}.{node.kind[0]}"


def tl_metric(answer, wrong):
    """Mean logit(answer) - logit(wrong) at the last position: ids shared (ints) or one per
    text (tensors; TL's path patching runs every text in one batch)."""

    def fn(logits):
        rows = torch.arange(logits.shape[0])
        return (logits[rows, -1, answer] - logits[rows, -1, wrong]).mean()

    return fn


def bench_eap(model, pairs: Pairs, runner: EdgeRunner, metric_fn, ks) -> dict:
    names = runner.space.edge_names()
    index = {n: i for i, n in enumerate(names)}
    with Peak() as tl_t:
        res = attribution_patch(model, pairs.clean, pairs.corrupt, metric_fn,
                                EdgeAttributionConfig(granularity="edge"))  # fmt: skip
    tl = np.zeros(len(names))
    for (w, r), score in res.edge_scores.items():  # summed over positions
        tl[index[f"{our_name(w)}->{our_name(r)}"]] += score
    with Peak() as ours_t:
        ours = eap(runner, at="corrupted").mean(0).numpy()
    clean_run = eap(runner, at="clean").mean(0).numpy()
    out = {"n_edges": len(names), "n_tl_position_edges": len(res.edge_scores),
           "tl_seconds": tl_t.seconds, "tl_peak_mb": tl_t.mb,
           "ours_seconds": ours_t.seconds, "ours_peak_mb": ours_t.mb}  # fmt: skip
    for label, x in (("corrupted", ours), ("clean", clean_run)):
        out[f"{label}_spearman"] = float(spearmanr(tl, x).statistic)
        out[f"{label}_max_abs_diff"] = float(np.abs(tl - x).max())
        for k in ks:
            a, b = set(np.argsort(-np.abs(tl))[:k]), set(np.argsort(-np.abs(x))[:k])
            out[f"{label}_top{k}_overlap"] = len(a & b) / k
    out["max_abs_score"] = float(np.abs(tl).max())
    return out, ours


def tl_circuit(runner: EdgeRunner, mask: np.ndarray, n_pos: int) -> list[tuple[Node, Node]]:
    """The edges of `mask` as TL per-position edges, at every position."""
    sp = runner.space
    out = []
    for e in np.flatnonzero(mask):
        r, s = sp.edges[e].tolist()
        name = sp.senders[s]
        rec = sp.receivers[r]
        for pos in range(n_pos):
            if name == "embed":
                w = Node("embed", pos)
            elif name.endswith("MLP"):
                w = Node("mlp_out", pos, layer=int(name[1:].split(".")[0]))
            else:
                layer, head = (int(x) for x in name[1:].split(".H"))
                w = Node("attn_head_out", pos, layer=layer, head=head)
            if rec.kind == "target":
                rd = Node("logits", pos, layer=sp.n_layers - 1)
            elif rec.kind == "mlp":
                rd = Node("mlp_in", pos, layer=rec.layer)
            else:
                rd = Node(f"{rec.kind}_input", pos, layer=rec.layer, head=rec.head)
            out.append((w, rd))
    return out


def bench_faithfulness(model, pairs, runner, scores, metric_fn, sizes) -> list[dict]:
    order = np.argsort(-np.abs(scores))
    out = []
    for k in sizes:
        mask = np.zeros(len(scores), dtype=bool)
        mask[order[:k]] = True
        circuit = tl_circuit(runner, mask, pairs.shape[1])
        with Peak() as tl_t:
            tl_vals = []
            for i in range(len(pairs)):
                f = faithfulness(model, pairs.clean[i : i + 1], pairs.corrupt[i : i + 1],
                                 metric_fn, circuit)  # fmt: skip
                tl_vals.append(f.recovered * (f.full_metric - f.corrupt_metric) + f.corrupt_metric)
        with Peak() as ours_t:
            ours = evaluate(runner, torch.from_numpy(mask)[None])[0].numpy()
        out.append({"k": k, "tl_seconds": tl_t.seconds, "tl_peak_mb": tl_t.mb,
                    "ours_seconds": ours_t.seconds, "ours_peak_mb": ours_t.mb,
                    "max_abs_diff": float(np.abs(np.array(tl_vals) - ours).max()),
                    "mean_circuit_metric": float(ours.mean())})  # fmt: skip
    return out


def bench_path_patching(model, pairs: Pairs, metric_fn, n_sources: int) -> dict:
    """Every source head of the first layers -> every later head's query input (denoising)."""
    cfg = model.cfg
    swapped = Pairs(pairs.corrupt, pairs.clean, pairs.answer, pairs.wrong)
    runner = EdgeRunner(model, swapped, None, positions=None, ablation="resample")
    names = runner.space.edge_names()
    sources = [(sl, sh) for sl in range(cfg.n_layers - 1) for sh in range(cfg.n_heads)]
    sources = sources[:n_sources]
    edges, where = [], []
    for sl, sh in sources:
        for dl in range(sl + 1, cfg.n_layers):
            for dh in range(cfg.n_heads):
                edges.append(names.index(f"L{sl}.H{sh}->L{dl}.H{dh}.q"))
                where.append((sl, sh, dl, dh))
    with torch.no_grad():
        _, clean_cache = model.run_with_cache(pairs.clean)
        _, corrupt_cache = model.run_with_cache(pairs.corrupt)
    with Peak() as tl_t:
        tl = {(sl, sh): get_act_patch_direct_path(model, pairs.corrupt, clean_cache,
                                                  corrupt_cache, metric_fn, sl, sh, "q",
                                                  verbose=False) for sl, sh in sources}  # fmt: skip
    with Peak() as ours_t:
        ours = (edge_effects(runner, edges) + runner.clean.metric).mean(1)
    tl_vals = np.array([float(tl[(sl, sh)][dl, dh]) for sl, sh, dl, dh in where])
    return {"n_edges": len(edges), "tl_seconds": tl_t.seconds, "tl_peak_mb": tl_t.mb,
            "ours_seconds": ours_t.seconds, "ours_peak_mb": ours_t.mb,
            "max_abs_diff": float(np.abs(tl_vals - ours.numpy()).max()),
            "spread_of_values": float(tl_vals.max() - tl_vals.min()),
            "unpatched_metric": float(runner.clean.metric.mean()),
            "first_values_tl": tl_vals[:4].tolist(),
            "first_values_ours": ours[:4].tolist()}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n-pairs", type=int, default=8)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--sizes", type=int, nargs="+", default=[20, 100, 500])
    p.add_argument("--sources", type=int, default=8, help="source heads for path patching")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="JSON file for the figures")
    p.add_argument(
        "--model",
        help="a registry model (grouped-query: SmolLM2, Qwen2.5): exact path patching of query "
        "edges only, on IOI pairs (TL refuses such models for edge EAP and faithfulness)",
    )
    args = p.parse_args()
    if args.model:
        return gqa_path_patching(args)
    torch.manual_seed(args.seed)
    model = tiny_model(n_layers=args.layers, d_model=args.d_model, n_heads=args.heads,
                       n_kv_heads=args.heads, d_mlp=4 * args.d_model, seed=args.seed,
                       folder=tempfile.mkdtemp(prefix="bench-tl-"))  # fmt: skip
    model.eval()
    pairs = tokenize(model, rows(args.n_pairs), "bench pairs")
    answer, wrong = int(pairs.answer[0]), int(pairs.wrong[0])
    metric_fn = tl_metric(answer, wrong)
    runner = EdgeRunner(model, pairs, None, positions=None, ablation="resample")
    cfg = {k: getattr(args, k) for k in ("n_pairs", "layers", "d_model", "heads", "seed")}
    cfg["n_tokens"] = int(pairs.shape[1])
    result = {"config": cfg, "torch_threads": torch.get_num_threads()}
    result["eap"], scores = bench_eap(model, pairs, runner, metric_fn, (20, 100))
    result["faithfulness"] = bench_faithfulness(model, pairs, runner, scores, metric_fn,
                                                args.sizes)  # fmt: skip
    result["path_patching"] = bench_path_patching(model, pairs, metric_fn, args.sources)
    show(result)
    if args.out:
        write_json(args.out, result)


def gqa_path_patching(args) -> None:
    from attn_sink_circuits.models import load_model
    from attn_sink_circuits.studies.ioi.prompts import ioi_pairs

    model = load_model(args.model)
    model.eval()
    pairs = ioi_pairs(model, args.n_pairs, seed=args.seed)[0]
    pp = bench_path_patching(model, pairs, tl_metric(pairs.answer, pairs.wrong), args.sources)
    print(f"model {args.model}, {args.n_pairs} IOI pairs of {pairs.shape[1]} tokens; torch "
          f"threads {torch.get_num_threads()}")  # fmt: skip
    print(f"path patching ({pp['n_edges']} query edges): TL {pp['tl_seconds']:.2f} s, ours "
          f"{pp['ours_seconds']:.2f} s ({pp['tl_seconds'] / pp['ours_seconds']:.2f}x); peak "
          f"MB TL {pp['tl_peak_mb']:.0f}, ours {pp['ours_peak_mb']:.0f}; max |TL - ours| "
          f"{pp['max_abs_diff']:.2e} (values spread {pp['spread_of_values']:.2e})")  # fmt: skip
    if args.out:
        write_json(args.out, {"model": args.model, "path_patching": pp})


def show(r: dict) -> None:
    e, pp = r["eap"], r["path_patching"]
    print(f"model: tiny MHA Llama {r['config']}; torch threads {r['torch_threads']}")
    print(f"EAP ({e['n_edges']} edges; TL {e['n_tl_position_edges']} per-position edges)")
    for label in ("corrupted", "clean"):
        print(f"  ours, gradient at the {label} run: Spearman {e[f'{label}_spearman']:.6f}, "
              f"top-20 {e[f'{label}_top20_overlap']:.2f}, top-100 {e[f'{label}_top100_overlap']:.2f}, "
              f"max |diff| {e[f'{label}_max_abs_diff']:.2e} (max |score| {e['max_abs_score']:.2e})")  # fmt: skip
    rows_ = [("EAP", e)] + [(f"faithfulness k={f['k']}", f) for f in r["faithfulness"]]
    rows_.append((f"path patching ({pp['n_edges']} edges)", pp))
    print(f"{'':<28}{'TL s':>9}{'ours s':>9}{'speed-up':>9}{'TL MB':>9}{'ours MB':>9}")
    for label, x in rows_:
        print(f"{label:<28}{x['tl_seconds']:>9.2f}{x['ours_seconds']:>9.2f}"
              f"{x['tl_seconds'] / x['ours_seconds']:>8.1f}x{x['tl_peak_mb']:>9.0f}"
              f"{x['ours_peak_mb']:>9.0f}")  # fmt: skip
    for f in r["faithfulness"]:
        print(
            f"  faithfulness k={f['k']}: circuit metric per text, max |TL - ours| "
            f"{f['max_abs_diff']:.2e} (mean {f['mean_circuit_metric']:.3f})"
        )
    print(
        f"  path patching: max |TL - ours| {pp['max_abs_diff']:.2e} "
        f"(values spread {pp['spread_of_values']:.2e})"
    )


if __name__ == "__main__":
    main()
