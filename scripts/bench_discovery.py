"""Benchmark of edge-level discovery on SmolLM2-135M (figures, not a timed test).

Measured side by side in one run, on the P0-sink metric (P0 attention over layers 12-29, edges
ablated at position 0 with the mean over the text's other positions):
1. EAP and EAP-IG over every edge, as a multiple of one clean forward + backward of the same
   metric over the same texts (no edge machinery);
2. exact path patching of the top edges: batched, truncated runs against one separate full
   forward per edge (hooks on the one receiver, as a hand-written reference), with the largest
   difference between their values;
3. the extrapolated speed-up of EAP over exact path patching of every edge;
4. `discover` end to end as the texts double (fit = held-out = n / 2);
5. mask optimisation (the `mask` method's default sweep) on the same texts, as a multiple of
   one EAP-IG run (target <= 10x);
6. peak memory (RSS high-water mark of a forked process: model, clean run and gradients) of
   EAP-IG over --memory-texts texts scored --grad-batch texts per gradient pass (target < 6 GB;
   13.4 GB in one pass before batching, issue 20);
7. judging small circuits (4 random circuits of 331 edges, the size of SmolLM2's MIB IOI
   circuit) on 32 MIB IOI flip pairs, MIB's graph: the patched run's running sum of sender
   differences (`Feed._sum`) against a fresh sum per receiver group (the code before it), their
   ratio and whether the values are equal;
8. held-out judging of --heldout-pairs MIB IOI flip pairs (4 random circuits of 331 edges,
   batches of 32): a judging-only `EdgeRunner` holding every pair's partner outputs against a
   `ChunkRunner` building each chunk's runner when judged, each in a forked process: peak RSS
   above the fork, wall time, and the largest difference of their values.

    python scripts/bench_discovery.py [--texts 32] [--top 200] [--scaling 32 64 128]
        [--light-scaling] [--parts attribution exact scaling mask memory judging held_out]
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import time
from pathlib import Path

import torch

from attn_sink_circuits.discovery import (
    DEFAULT_TEXTS,
    DiscoveryConfig,
    EdgeRunner,
    discover,
    eap,
    eap_ig,
    edge_effects,
    read_texts,
)
from attn_sink_circuits.discovery.components import project_qkv
from attn_sink_circuits.discovery.methods.mask import sweep
from attn_sink_circuits.models import load_model
from attn_sink_circuits.patching.metrics import p0_attention


def windows(model, n: int, n_tokens: int) -> torch.Tensor:
    """`n` token rows of `n_tokens`: BOS, then windows of the reference texts, every text at
    offset 0 first, then at offsets n_tokens // 4, n_tokens // 2, ... (overlapping windows of
    one text only once the texts run out: enough for the cost as texts double)."""
    ids = [model.to_tokens(t, prepend_bos=False)[0].tolist() for t in read_texts(DEFAULT_TEXTS)]
    rows = []
    for at in range(0, max(map(len, ids)), n_tokens // 4):
        rows += [[model.tokenizer.bos_token_id] + x[at : at + n_tokens - 1] for x in ids
                 if len(x) >= at + n_tokens - 1]  # fmt: skip
    if len(rows) < n:
        raise SystemExit(f"only {len(rows)} windows of {n_tokens} tokens; ask for fewer texts")
    return torch.tensor(rows[:n])


def clock(fn, repeat: int = 1):
    """(result, seconds): the fastest of `repeat` runs (other load on the machine only slows)."""
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return out, best


def clean_forward_backward(model, tokens, metric) -> float:
    """One forward to the metric's last hook and one backward of the metric (to the inputs of
    every block), no edge machinery."""
    acts = {}

    def grab(name):
        def hook(act, hook):
            acts[name] = act

        return hook

    def leaf(act, hook):
        return act.detach().requires_grad_()

    def run():
        with model.hooks(fwd_hooks=[("blocks.0.hook_resid_pre", leaf)]
                         + [(h, grab(h)) for h in metric.hooks]):  # fmt: skip
            model(tokens, stop_at_layer=29 + 1)
        metric(acts, None).sum().backward()

    return clock(run, 2)[1]


def separate_forward(model, runner, e) -> torch.Tensor:
    """The metric with edge `e` ablated by one full forward with a hook on its receiver."""
    r, s = runner.space.edges[e].tolist()
    rec = runner.space.receivers[r]
    delta = runner.clean.outputs[:, s] - runner.clean.ablated[:, s]
    held, acts = {}, {}

    def grab(act, hook):
        held["resid"] = act[:, [0]]

    def swap(act, hook):
        out = act.clone()
        if rec.kind == "mlp":
            out[:, [0]] = act[:, [0]] - delta
            return out
        x = (held["resid"] - delta).unsqueeze(1).expand(-1, act.shape[2], -1, -1)
        out[:, [0], rec.head] = project_qkv(model, rec.layer, rec.kind, x)[:, :, rec.head]
        return out

    hooks = [(f"blocks.{rec.layer}.ln2.hook_in", swap)] if rec.kind == "mlp" else [
        (f"blocks.{rec.layer}.hook_resid_pre", grab),
        (f"blocks.{rec.layer}.attn.{rec.kind}.hook_out", swap),
    ]  # fmt: skip

    def read(name):
        def hook(act, hook):
            acts[name] = act

        return hook

    with (
        torch.no_grad(),
        model.hooks(fwd_hooks=hooks + [(h, read(h)) for h in runner.metric.hooks]),
    ):
        model(runner.tokens)
    return runner.metric(acts, None)


def peak_rss_gb() -> float:
    """This process's resident-set high-water mark (VmHWM), in GB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1e6
    return float("nan")


def _score_in_child(send, model, tokens, metric, steps: int, batch: int) -> None:
    t = time.perf_counter()
    eap_ig(EdgeRunner(model, tokens, metric), steps, batch=batch)
    send.send((time.perf_counter() - t, peak_rss_gb()))


def _judge_in_child(send, model, pairs, chunked: bool) -> None:
    from attn_sink_circuits.discovery.chunk_runner import ChunkRunner
    from attn_sink_circuits.discovery.evaluation import evaluate, random_masks

    start, t = peak_rss_gb(), time.perf_counter()
    runner = (ChunkRunner(model, pairs, chunk=32, kv_inputs="ungrouped") if chunked else
              EdgeRunner(model, pairs, None, positions=None, ablation="resample",
                         kv_inputs="ungrouped", judging_only=True))  # fmt: skip
    values = evaluate(runner, random_masks(runner.space.n_edges, 331, n=4), batch_size=32)
    send.send((time.perf_counter() - t, peak_rss_gb() - start, values.numpy()))  # not shared


def held_out(model, n_pairs: int) -> None:
    """8: peak RSS and time of judging held-out pairs held whole or a chunk at a time."""
    from attn_sink_circuits.studies.ioi.prompts import ioi_pairs

    pairs, _ = ioi_pairs(model, n_pairs, partner="s2_io_flip", pad=True, bos=True)
    ctx = multiprocessing.get_context("fork")
    got = {}
    for chunked in (False, True):
        receive, send = ctx.Pipe(duplex=False)
        child = ctx.Process(target=_judge_in_child, args=(send, model, pairs, chunked))
        child.start()
        got[chunked] = receive.recv()
        child.join()
    (t_whole, m_whole, v_whole), (t_chunk, m_chunk, v_chunk) = got[False], got[True]
    print(f"held-out judging of {n_pairs} IOI pairs, 4 circuits: whole runner {t_whole:.0f} s, "
          f"+{m_whole:.2f} GB peak; chunk runner {t_chunk:.0f} s, +{m_chunk:.2f} GB peak: "
          f"{m_whole / m_chunk:.1f}x less memory, {t_chunk / t_whole:.2f}x the time; max "
          f"|difference| {abs(v_whole - v_chunk).max():.1e}")  # fmt: skip


def mask_vs_ig(model, fit, metric, steps: int) -> None:
    """5: the mask sweep against one EAP-IG run on the same texts."""
    cfg = DiscoveryConfig(method="mask", ig_steps=steps)
    runner = EdgeRunner(model, fit, metric)
    # CPU seconds of this process beside the wall time: on a shared machine the wall time of
    # each part depends on what else runs meanwhile, its CPU time (one thread) hardly.
    cpu = time.process_time()
    _, t_ig = clock(lambda: eap_ig(runner, steps, batch=cfg.grad_batch))
    cpu_ig, cpu = time.process_time() - cpu, time.process_time()
    t = time.perf_counter()
    points = sweep(runner, cfg, progress=print)
    t_mask, cpu_mask = time.perf_counter() - t, time.process_time() - cpu
    sizes = ", ".join(f"{p['lambda']:g}: {p['n_kept']:,}" for p in points)
    print(f"EAP-IG ({steps} steps, {cfg.grad_batch} texts a pass) {t_ig:.1f} s; mask sweep "
          f"({len(points)} weights x {cfg.mask_steps} steps x {cfg.mask_batch} texts) "
          f"{t_mask:.1f} s = {t_mask / t_ig:.1f}x (target <= 10x); CPU time {cpu_ig:.1f} s vs "
          f"{cpu_mask:.1f} s = {cpu_mask / cpu_ig:.1f}x; edges kept per weight: {sizes}")  # fmt: skip


def memory(model, tokens, metric, steps: int, batch: int) -> None:
    """6: peak RSS of scoring `tokens` in chunks of `batch`, in a forked process."""
    ctx = multiprocessing.get_context("fork")  # the child inherits the model (not picklable)
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_score_in_child, args=(send, model, tokens, metric, steps, batch))
    child.start()
    t, peak = receive.recv()
    child.join()
    print(f"EAP-IG ({steps} steps) over {tokens.shape[0]} texts x {tokens.shape[1]} tokens, "
          f"{batch} texts a gradient pass: {t:.0f} s, peak RSS {peak:.2f} GB (target < 6 GB; "
          f"13.4 GB in one pass before batching)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--texts", type=int, default=32, help="texts for 1-3 (default 32)")
    parser.add_argument("--tokens", type=int, default=64, help="tokens per text (default 64)")
    parser.add_argument("--top", type=int, default=200, help="edges patched exactly (200)")
    parser.add_argument("--steps", type=int, default=8, help="EAP-IG steps (default 8)")
    parser.add_argument("--scaling", type=int, nargs="*", default=[32, 64, 128])
    parser.add_argument(
        "--light-scaling",
        action="store_true",
        help="4: a lighter config (2 IG steps, 6 curve sizes, 3 random circuits, 20 exact "
        "edges) so that three sizes fit in a session; the cost still grows with the texts",
    )
    parts = ("attribution", "exact", "scaling", "mask", "memory", "judging", "held_out")
    parser.add_argument("--parts", nargs="*", default=list(parts), choices=parts)
    parser.add_argument("--memory-texts", type=int, default=128, help="texts for 6 (128)")
    parser.add_argument("--grad-batch", type=int, default=16, help="texts a pass in 6 (16)")
    parser.add_argument("--heldout-pairs", type=int, default=200, help="pairs for 8 (200)")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = load_model("smollm2-135m")
    metric = p0_attention(list(range(12, 30)))
    scaling = args.scaling if "scaling" in args.parts else []
    memory_texts = [args.memory_texts] if "memory" in args.parts else []
    tokens = windows(model, max([args.texts, *scaling, *memory_texts]), args.tokens)
    fit = tokens[: args.texts]
    print(
        f"SmolLM2-135M, {args.texts} texts x {args.tokens} tokens, {torch.get_num_threads()} threads"
    )
    if "memory" in args.parts:  # first: the forked child then holds no state of the others
        memory(model, tokens[: args.memory_texts], metric, args.steps, args.grad_batch)
    if "mask" in args.parts:
        mask_vs_ig(model, fit, metric, args.steps)
    if "attribution" in args.parts or "exact" in args.parts:
        attribution_and_exact(model, fit, metric, args)
    if scaling:
        grow(model, tokens, metric, args)
    if "judging" in args.parts:
        judging(model)
    if "held_out" in args.parts:
        held_out(model, args.heldout_pairs)


def judging(model, reps: int = 3) -> None:
    """7."""
    import attn_sink_circuits.discovery.feed as feed
    from attn_sink_circuits.discovery.evaluation import evaluate, random_masks
    from attn_sink_circuits.studies.ioi.prompts import ioi_pairs

    def fresh(self, n, device):  # before the running sum: every group summed afresh
        return sum(delta.to(device).float() for delta in self.deltas[:n])

    pairs, _ = ioi_pairs(model, 32, partner="s2_io_flip", pad=True, bos=True)
    runner = EdgeRunner(model, pairs, None, positions=None, ablation="resample",
                        kv_inputs="ungrouped", judging_only=True)  # fmt: skip
    masks = random_masks(runner.space.n_edges, 331, n=4)
    running, best, values = feed.Feed._sum, {}, {}
    try:
        for _ in range(reps):
            for name, fn in (("running", running), ("fresh", fresh)):
                feed.Feed._sum = fn
                values[name], t = clock(lambda: evaluate(runner, masks, batch_size=32))
                best[name] = min(t, best.get(name, t))
    finally:
        feed.Feed._sum = running
    print(f"judging 4 circuits of 331 edges on 32 IOI pairs (best of {reps}): running sum "
          f"{best['running']:.1f} s, fresh sums {best['fresh']:.1f} s: "
          f"{best['fresh'] / best['running']:.2f}x; values equal: "
          f"{torch.equal(values['running'], values['fresh'])}")  # fmt: skip


def attribution_and_exact(model, fit, metric, args) -> None:
    """1-3."""

    runner, t_setup = clock(lambda: EdgeRunner(model, fit, metric))
    print(f"edges {runner.space.n_edges:,}; runner set-up (one clean run) {t_setup:.1f} s")
    t_fb = clean_forward_backward(model, fit, metric)
    scores, t_eap = clock(lambda: eap(runner), 2)
    _, t_ig = clock(lambda: eap_ig(runner, args.steps), 2)
    print(f"clean forward+backward {t_fb:.1f} s")
    print(f"EAP     {t_eap:.1f} s = {t_eap / t_fb:.2f}x  (target <= 4x)")
    print(f"EAP-IG  {t_ig:.1f} s = {t_ig / t_fb:.2f}x with {args.steps} steps "
          f"(target <= {4 + args.steps}x)")  # fmt: skip

    top = scores.mean(0).abs().argsort(descending=True)[: args.top].tolist()
    exact, t_exact = clock(lambda: edge_effects(runner, top))
    n_ref = min(len(top), 20)  # the separate forwards are slow: time a sample, extrapolate
    ref, t_ref = clock(
        lambda: torch.stack([separate_forward(model, runner, e) for e in top[:n_ref]])
    )
    diff = float((exact[:n_ref] + runner.clean.metric - ref).abs().max())
    per_ref = t_ref / n_ref
    print(f"exact path patching of the top {len(top)} edges: {t_exact:.1f} s batched+truncated vs "
          f"{per_ref * len(top):.1f} s as separate full forwards ({per_ref:.2f} s each, timed on "
          f"{n_ref}): {per_ref * len(top) / t_exact:.1f}x faster (target >= 5x); "
          f"max |diff| {diff:.2e} (target <= 1e-4)")  # fmt: skip
    per_edge = t_exact / len(top)
    print(f"extrapolated: exact patching of all {runner.space.n_edges:,} edges "
          f"{per_edge * runner.space.n_edges / 60:.0f} min batched; EAP is "
          f"{per_edge * runner.space.n_edges / t_eap:,.0f}x faster (target >= 1000x)")  # fmt: skip


def grow(model, tokens, metric, args) -> None:
    """4."""
    light = {"ig_steps": 2, "n_curve": 6, "n_random": 3, "max_exact": 20}
    cfg = DiscoveryConfig(**(light if args.light_scaling else {"ig_steps": args.steps}))
    print(f"discover config for 4: {cfg.to_dict()}")
    for n in args.scaling:
        half = n // 2
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        c, t = clock(lambda half=half: discover(model, tokens[:half], tokens[half:2 * half],
                                                 metric, config=cfg))  # fmt: skip
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        s = c.summary()
        print(f"discover on {n} texts ({half} fit / {half} held-out): {t:.0f} s, peak RSS "
              f"{peak / 1e6:.2f} GB (+{(peak - base) / 1e6:.2f}), {s['n_edges']} edges, "
              f"held-out faithfulness {s['heldout_faithfulness']:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
