"""Does accumulating edge scores in bfloat16, as MIB's reference code does for Qwen2.5, move
EAP-IG-activations' ranking and MIB's areas? One IOI cell scored once, summed two ways.

EAP-IG's code keeps its score matrix and each step's batch product in the model's dtype
(`make_hooks_and_matrices`: `torch.zeros(..., dtype=model.cfg.dtype)`, `scores[...] += s`), and
MIB's run_attribution.py loads Qwen2.5 in bfloat16 (GPT-2 in float32). EAP-IG-activations adds
(1 + 2 n_layers) x steps terms a batch into that matrix, so in bfloat16 (8 significant bits) a
score stops moving once it is some 2^8 times the terms still to come: the first batches and,
within a batch, the first node groups (the input's runs) weigh more than the rest.

This script scores the fit pairs with EAP-IG-activations in float32 (this library's gradients,
MIB's batches of --batch pairs, the right-point grid), and adds each (node group, step) term,
the batch mean of the per-pair gradient products as MIB's mean loss gives it, in MIB's order to
two accumulators: float32, and bfloat16 (each term rounded to bfloat16, the sum rounded after
every addition); each is then divided by the pairs and the terms of a batch as MIB's code
divides. It writes OUT/summary.json: MIB's areas of both rankings on the held-out pairs (f and
the pruned edge count at each size, CPR / CMD with bootstrap intervals), their Spearman
correlation, the overlap of their top edges and the ranks of input -> m0, with provenance.
Only the accumulation is MIB's here: the forward and backward passes stay float32.

Where input -> m0's score comes from: its float32 terms are also kept per (node group, alpha),
so the summary gives each node group's own mean score for that edge (`focus_by_group`: the
input's runs, each block's heads', each block's MLP's); the method's score is their mean.

    .venv/bin/python scripts/mib_bf16_scores.py --model smollm2-135m --n-fit 20 \\
        --n-heldout 100 --batch 10 --out runs/mib_bf16/smollm2-135m-flip-20 \\
        [--checkpoint DIR] [--threads 1]
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

FOCUS = "input->m0"  # the edge every path from the changed token starts on (docs/mib)


def accumulate(runner, args, checkpoint: Path | None) -> dict:
    """The two accumulators over the fit pairs, `args.batch` pairs a batch in order, with the
    settings they were made with (`key`). With `checkpoint` the state after each batch is kept
    there (`phases.PhaseStore`, keyed by the settings): a rerun reads back the batches done."""
    from attn_sink_circuits.discovery.attribution import ig_points
    from attn_sink_circuits.discovery.forward import chunks
    from attn_sink_circuits.discovery.phases import PhaseStore

    key = {"model": args.model, "partner": args.partner, "n_fit": args.n_fit, "batch": args.batch,
           "steps": args.steps, "input_run": args.input_run, "pair_seed": args.pair_seed}  # fmt: skip
    store = PhaseStore(checkpoint, key)
    alphas = ig_points(args.steps, "right")
    state = {"done": 0, "fp32": None, "bf16": None, "terms": 0, "focus": None}
    for i, part in enumerate(chunks(runner, args.batch)):
        state = store(f"accumulators after batch {i}",
                      lambda s=state, p=part: add_batch(s, p, args.input_run, alphas))  # fmt: skip
    return state | {"key": key}


def add_batch(state: dict, part, input_run: str, alphas: list[float]) -> dict:
    """`state` with one batch's (node group, alpha) terms added in MIB's order: each term the
    batch mean of the per-pair gradient products, added to the float32 sum and, rounded to
    bfloat16, to the bfloat16 sum (rounded again after every addition)."""
    import torch

    from attn_sink_circuits.discovery.attribution import activation_paths, path_gradients

    t0 = time.perf_counter()
    fp32, bf16 = state["fp32"], state["bf16"]
    paths = activation_paths(part, input_run)
    at = focus_index(part.space)
    # [group, alpha]: FOCUS's terms, a copy so that the state read back stays as it was saved
    focus = (
        torch.zeros(len(paths), len(alphas)) if state["focus"] is None else state["focus"].clone()
    )
    for i, grad in enumerate(path_gradients(part, paths, alphas, clean_senders=True)):
        term = grad.mean(0)
        if fp32 is None:
            fp32, bf16 = torch.zeros_like(term), torch.zeros_like(term, dtype=torch.bfloat16)
        fp32, bf16 = fp32 + term, bf16 + term.to(torch.bfloat16)
        focus[divmod(i, len(alphas))] += term[at]
    print(f"batch {state['done'] + 1}: {time.perf_counter() - t0:.0f} s", flush=True)
    return {"done": state["done"] + 1, "fp32": fp32, "bf16": bf16,
            "terms": len(paths) * len(alphas), "focus": focus}  # fmt: skip


def focus_index(space) -> int:
    """The index of `FOCUS` among the edges of `space` (it is an edge of every ungrouped graph)."""
    from attn_sink_circuits.graph.eap_ig import mib_edge_names

    names = [mib_edge_names(n) for n in space.edge_names()]
    return next(i for i, n in enumerate(names) if FOCUS in n)


def focus_by_group(state: dict, space) -> dict:
    """`FOCUS`'s float32 score split by node group: each group's own mean over its alphas
    (per pair, scaled as `final_scores` scales) and its terms per alpha; the method's score is
    the mean of the groups' means."""
    from attn_sink_circuits.graph.eap_ig import INPUT, mib_node

    n, batch = state["key"]["n_fit"], state["key"]["batch"]
    per_alpha = state["focus"] * batch / n  # each (group, alpha) term summed over the batches
    # in `activation_groups`' order, MIB's names: a block's heads as "a3" (its code takes the
    # group as a3.h0), its MLP "m3"
    blocks = [
        (mib_node(layer, 0).split(".")[0], mib_node(layer)) for layer in range(space.n_layers)
    ]
    names = [INPUT] + [name for block in blocks for name in block]
    means = per_alpha.mean(1)
    # the rest: neither the input's runs nor those of the group FOCUS enters (its output is
    # then a constant, so they give FOCUS no gradient)
    rest = means[[i for i, g in enumerate(names) if g not in (INPUT, FOCUS.split("->")[1])]]
    return {"edge": FOCUS, "groups": names, "mean": means.tolist(), "by_alpha": per_alpha.tolist(),
            "score": float(means.mean()), "input_at_clean": float(per_alpha[0, -1]),
            "rest": {"n": len(rest), "mean": float(rest.mean()), "min": float(rest.min()),
                     "max": float(rest.max()), "n_positive": int((rest > 0).sum())}}  # fmt: skip


def final_scores(state: dict) -> dict:
    """Both accumulators divided as EAP-IG's code divides (`scores /= total_items; scores /=
    total_steps`, in the accumulator's dtype), then, in float32, multiplied by the batch size
    (its terms are batch means, so its scores are the per-pair mean over the batch size: scaled
    back, the float32 ones are `eap_ig_activations`' mean scores)."""
    n, batch = state["key"]["n_fit"], state["key"]["batch"]
    return {k: (state[k] / n / state["terms"]).float() * batch for k in ("fp32", "bf16")}


def rank_of(values, index: int) -> int:
    """1-based rank of `values[index]` among `values`, largest first (ties share the best)."""
    return int((values > values[index]).sum()) + 1


def compare(scores: dict, space, n_top: int = 1000) -> dict:
    """Spearman correlation of the two rankings, the overlap of their top `n_top` edges by
    signed score and where `FOCUS` ranks in each (it is the edge of every ungrouped graph)."""
    from scipy.stats import spearmanr

    focus = focus_index(space)
    a, b = scores["fp32"], scores["bf16"]
    top_a, top_b = set(a.topk(n_top).indices.tolist()), set(b.topk(n_top).indices.tolist())
    return {
        "spearman": float(spearmanr(a.numpy(), b.numpy()).statistic),
        f"top{n_top}_overlap_signed": len(top_a & top_b) / n_top,
        "focus_edge": FOCUS,
        "focus": {
            k: {"score": float(v[focus]), "rank_signed": rank_of(v, focus)}
            for k, v in scores.items()
        },  # fmt: skip
        "share_moved_10pct": float(((a - b).abs() > 0.1 * a.abs()).float().mean()),
    }


def run(args: argparse.Namespace) -> dict:
    import torch

    from attn_sink_circuits.discovery.areas import mib_scores
    from attn_sink_circuits.discovery.chunk_runner import judging_runner
    from attn_sink_circuits.discovery.config import RankBy
    from attn_sink_circuits.discovery.evaluation import empty_metric, metric_direction
    from attn_sink_circuits.discovery.forward import EdgeRunner
    from attn_sink_circuits.discovery.protocol import protocol
    from attn_sink_circuits.models import load_model
    from attn_sink_circuits.runs.io import atomic_folder, write_json
    from attn_sink_circuits.runs.provenance import provenance, stamped
    from attn_sink_circuits.studies.ioi.prompts import ioi_pairs

    torch.set_num_threads(args.threads)
    proto = protocol("mib")
    cfg = proto.config(method="eap_ig_activations", ig_steps=args.steps,
                       ig_input_run=args.input_run)  # fmt: skip
    args.partner = args.partner or proto.partner
    model = load_model(args.model)
    t0 = time.perf_counter()
    pairs, _ = ioi_pairs(model, args.n_fit + args.n_heldout, seed=args.pair_seed,
                         partner=args.partner, pad=proto.pad, bos=proto.bos)  # fmt: skip
    fit, held = pairs[: args.n_fit], pairs[args.n_fit :]
    runner = EdgeRunner(model, fit, None, positions=None, ablation="resample", seed=cfg.seed,
                        kv_inputs=cfg.kv_inputs)  # fmt: skip
    state = accumulate(runner, args, Path(args.checkpoint) if args.checkpoint else None)
    scores = final_scores(state)
    direction = metric_direction(runner, empty_metric(runner, batch_size=cfg.batch_size))
    judged = judging_runner(model, held, batch_size=cfg.batch_size, kv_inputs=cfg.kv_inputs,
                            seed=cfg.seed)  # fmt: skip
    empty = empty_metric(judged, batch_size=cfg.batch_size)
    areas = {}
    for name, s in scores.items():
        key = {RankBy.SIGNED: s * direction, RankBy.ABS: s.abs()}
        areas[name] = mib_scores(judged, key, empty, batch_size=cfg.batch_size,
                                 n_boot=cfg.n_boot, seed=cfg.seed)  # fmt: skip
        print(f"{name}: CPR {areas[name]['cpr']:.3f} CMD {areas[name]['cmd']:.4f}", flush=True)
    summary = {"model": args.model, "partner": args.partner, "method": "eap_ig_activations",
               "n_fit": args.n_fit, "n_heldout": args.n_heldout, "batch": args.batch,
               "terms_per_batch": state["terms"], "direction": direction,
               "heldout": areas, **compare(scores, runner.space),
               "focus_by_group": focus_by_group(state, runner.space),
               "seconds": time.perf_counter() - t0,
               "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}  # fmt: skip
    record = provenance(model, pairs.rows(), split=(range(args.n_fit), range(args.n_fit, len(pairs))),
                        settings=cfg.to_dict() | {"batch": args.batch, "accumulators": ["fp32", "bf16"]},
                        source=f"task ioi, partner {args.partner} (seed {args.pair_seed})")  # fmt: skip
    with atomic_folder(Path(args.out), record=record) as tmp:
        write_json(tmp / "summary.json", stamped(summary, record))
    return summary


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--partner", help="default: MIB's (s2_io_flip)")
    p.add_argument("--n-fit", type=int, default=20)
    p.add_argument("--n-heldout", type=int, default=100)
    p.add_argument("--batch", type=int, default=10, help="pairs a batch (MIB's Qwen IOI: 10)")
    p.add_argument("--steps", type=int, default=5, help="MIB's --ig-steps")
    p.add_argument("--input-run", default="mib_code", help="config.IgInputRun (MIB's code)")
    p.add_argument("--pair-seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--checkpoint", help="folder: the accumulators after each batch")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    for name in ("n_fit", "n_heldout", "batch", "steps", "threads"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be 1 or more, got {getattr(args, name)}")
    if args.n_fit % args.batch:
        p.error(
            f"--n-fit {args.n_fit} is not a multiple of --batch {args.batch}: MIB's code "
            "divides every batch's mean by the number of pairs, so give equal batches"
        )
    s = run(args)
    print(f"Spearman fp32 / bf16 {s['spearman']:.4f}; {FOCUS} rank "
          f"{s['focus']['fp32']['rank_signed']} / {s['focus']['bf16']['rank_signed']}; "
          f"{s['seconds']:.0f} s -> {args.out}")  # fmt: skip


if __name__ == "__main__":
    main()
