"""`attn_sink_circuits.studies.kv` side by side with NVIDIA's kvpress (issue 35, item 4), compress-once mode.

Per long text (data/texts/long.jsonl rows, the first TOKENS tokens as
`attn_sink_circuits.studies.kv.streaming` cuts them, BOS included where the model has one): the prompt is the first P tokens, the
continuation the rest, and both sides score the same tokens, P .. TOKENS-1 (token P predicted
by the prompt's last position):

    circuits  `attn_sink_circuits.studies.kv` in compress-once mode, `KVConfig(prefix=P, score_from=P)`:
              `keep_masks` then `masked_nll` (what `score` does), for the full cache,
              `streaming_llm` (sinks 4) and `snapkv` (observation 32, pool 7) at each budget
    kvpress   `scripts/kvpress_worker.py` in kvpress's own environment (a subprocess of its
              python): transformers, eager attention, float32, the prompt prefilled under
              StreamingLLMPress(n_sink=4) / SnapKVPress(window_size=32, kernel_size=7) with
              compression_ratio 1 - B / P, then the continuation fed with that cache

A budget B is the prompt keys kept per layer (per kv head in kvpress), the observation window
included; kvpress keeps int(P * (1 - ratio)), checked to be B. For SnapKV, where the two choose
differently, three more choices of kept keys are scored through the same library hooks from
the full-cache forward's attention (one forward, which also gives the full cache's NLL), to
say which difference moves the perplexity: `layer_avg` (one set per layer as the library, but
kvpress's average pooling), `kv_head_max` (one set per kv head as kvpress, the library's max
pooling) and `kvpress_kept` (the positions kvpress kept, per kv head: the mechanism check).

    OMP_NUM_THREADS=1 .venv/bin/python scripts/kv_kvpress.py --model smollm2-135m \
        [--texts 0 2] [--kvpenv /tmp/kvpenv] [--out docs/kv/kvpress/MODEL] [--write-only]

Rows go to a progress file as they finish (/tmp/kvpress-MODEL.jsonl; a rerun skips them, the
kvpress side per text likewise), then the run folder gets rows.csv and summary.json with the
library's provenance and the kvpress environment's versions.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
LONG = ROOT / "data" / "texts" / "long.jsonl"
WORKER = Path(__file__).resolve().with_name("kvpress_worker.py")
TOKENS, PROMPT, BUDGETS, SINKS, OBSERVATION, POOL = 2048, 1536, (128, 384), 4, 32, 7
VARIANTS = ("layer_avg", "kv_head_max", "kvpress_kept")


# --- pure helpers --------------------------------------------------------------------------


def snap_choice(
    window: torch.Tensor, budget: int, groups: int, pool: str, kernel: int = POOL
) -> torch.Tensor:
    """SnapKV's kept prompt keys from one layer's attention rows of the observation window,
    `window[head, query, key]` (the last w queries of a P-key prompt, each a softmax over every
    key up to it): the w window keys and the `budget - w` earlier keys of highest score.

    groups 1, the library's order (`attn_sink_circuits.studies.kv.policies.snapkv`): the head-averaged rows
    summed over the w queries, then pooled: one set per layer. groups > 1 (the kv heads),
    kvpress's order (`SnapKVPress.score`): each head's rows averaged over the w queries,
    pooled, then averaged over the heads of each group (heads grouped as `repeat_kv`): one
    set per group. `pool`: "max" (the library's `max_pool1d`) or "avg" (kvpress's
    zero-padded `avg_pool1d`), over `kernel` neighbours. Out: [groups, P]."""
    n_heads, w, p = window.shape
    if n_heads % groups or not w < budget <= p:
        raise ValueError(f"{n_heads} heads in {groups} groups, budget {budget}, w {w}, P {p}")
    if groups == 1:
        scores = pooled_scores(window.mean(0)[:, : p - w].sum(0)[None], pool, kernel)
    else:
        scores = pooled_scores(window[:, :, : p - w].mean(1), pool, kernel)
        scores = scores.view(groups, n_heads // groups, p - w).mean(1)
    keep = torch.zeros(groups, p, dtype=torch.bool)
    keep[:, p - w :] = True
    keep.scatter_(1, scores.topk(budget - w, dim=-1).indices, True)
    return keep


def pooled_scores(scores: torch.Tensor, pool: str, kernel: int) -> torch.Tensor:
    """[rows, keys] pooled along the keys, stride 1, padded by kernel // 2 each side."""
    if kernel <= 1:
        return scores
    if pool == "max":
        return torch.nn.functional.max_pool1d(scores, kernel, 1, kernel // 2)
    if pool == "avg":
        return torch.nn.functional.avg_pool1d(scores, kernel, 1, kernel // 2)
    raise ValueError(f"pool must be 'max' or 'avg', got {pool!r}")


def positions_to_keep(kept: Sequence[Sequence[int]], prompt: int) -> torch.Tensor:
    """Kept positions per group (kvpress's per kv head) as a [groups, prompt] boolean."""
    keep = torch.zeros(len(kept), prompt, dtype=torch.bool)
    for g, positions in enumerate(kept):
        keep[g, list(positions)] = True
    return keep


def head_mask(keep: torch.Tensor, n: int, n_heads: int) -> torch.Tensor:
    """Compress-once per head: [head, query, key], causal, and every query from the prompt's end
    (P = keep's width) on reads of the prompt only the keys its head's group keeps (`keep`:
    [groups, P]; group g holds heads g * n_heads / groups onwards, as `repeat_kv`)."""
    groups, p = keep.shape
    mask = torch.ones(n, n, dtype=torch.bool).tril().expand(n_heads, n, n).clone()
    mask[:, p:, :p] = keep.repeat_interleave(n_heads // groups, 0)[:, None, :]
    return mask


class LazyMasks(Sequence):
    """Per-layer masks built when a hook asks for them (per-head masks of every layer at once
    would be layers x heads x N x N booleans)."""

    def __init__(self, build, n_layers: int):
        self.build, self.n_layers = build, n_layers

    def __len__(self) -> int:
        return self.n_layers

    def __getitem__(self, layer):
        if not 0 <= layer < self.n_layers:
            raise IndexError(layer)
        return self.build(layer)


def overlap(a: torch.Tensor, b: torch.Tensor) -> float:
    """Mean over layers and groups of |a & b| / |b| (a: [layers, 1 or groups, P], broadcast)."""
    return float(((a & b).sum(-1).float() / b.sum(-1).float()).mean())


def perplexity(nll: Sequence[float]) -> float:
    return math.exp(sum(nll) / len(nll))


def relative(a: float, b: float) -> float:
    """(a - b) / b."""
    return (a - b) / b


# --- the two sides -------------------------------------------------------------------------


def tokens_of(model, text: int, tokens: int) -> torch.Tensor:
    """A long text cut to its first `tokens` tokens, as `attn_sink_circuits.studies.kv.streaming` does."""
    row = json.loads(LONG.read_text().splitlines()[text])
    return model.to_tokens(row["text"], truncate=False)[0][:tokens].cpu()


def kvpress_side(args, texts: dict[int, torch.Tensor], cache: Path) -> dict:
    """The worker's result for every text (run once for those not cached in `cache`)."""
    done = json.loads(cache.read_text()) if cache.exists() else {}
    todo = {str(t): ids.tolist() for t, ids in texts.items() if str(t) not in done.get("texts", {})}
    if todo:
        runs = [{"press": "none", "budget": args.prompt}]
        runs += [
            {"press": p, "budget": b} for p in ("streaming_llm", "snapkv") for b in args.budgets
        ]
        job = {"texts": todo, "prompt": args.prompt, "runs": runs, "n_sink": SINKS,
               "window_size": OBSERVATION, "kernel_size": POOL}  # fmt: skip
        job_path, out_path = cache.with_suffix(".job.json"), cache.with_suffix(".out.json")
        job_path.write_text(json.dumps(job))
        folder = Path.home() / ".cache" / "circuits" / "models" / args.model
        python = Path(args.kvpenv) / "bin" / "python"
        env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1",
                   HF_HUB_DISABLE_PROGRESS_BARS="1", TRANSFORMERS_VERBOSITY="error")  # fmt: skip
        cmd = [str(python), str(WORKER), "--folder", str(folder), "--job", str(job_path),
               "--out", str(out_path), "--threads", "1"]  # fmt: skip
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, check=True)
        out = json.loads(out_path.read_text())
        process = time.perf_counter() - t0
        meta = {k: v for k, v in out.items() if k != "results"}
        done.setdefault("meta", []).append(
            {**meta, "texts": list(todo), "process_seconds": process}
        )
        for r in out["results"]:
            done.setdefault("texts", {}).setdefault(r["text"], []).append(r)
        cache.write_text(json.dumps(done))
    return done


def capture_windows(model, ids: torch.Tensor, prompt: int, w: int):
    """One full-cache forward: each layer's attention rows of the observation window
    ([head, w, P]) and the NLL of every next token (as `masked_nll` with no masks)."""
    from attn_sink_circuits.core.sites import hook_name, parse_hook

    windows: list = [None] * model.cfg.n_layers

    def grab(pattern, hook) -> None:
        windows[parse_hook(hook.name)[1]] = pattern[0, :, prompt - w : prompt, :prompt].float()

    hooks = [(hook_name("pattern", layer), grab) for layer in range(model.cfg.n_layers)]
    with torch.inference_mode():
        logits = model.run_with_hooks(ids[None], return_type="logits", fwd_hooks=hooks)
    nll = torch.nn.functional.cross_entropy(logits[0, :-1].float(), ids[1:], reduction="none")
    return torch.stack(windows), nll


def timed(fn):
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w0, time.process_time() - c0


def library_rows(model, t: int, ids, args, kvp: list[dict], done: dict, save) -> None:
    """Every library measurement of text `t` not in `done` (each `save`d as it finishes)."""
    from attn_sink_circuits.studies.kv import KVConfig, keep_masks, masked_nll

    p, n = args.prompt, len(ids)
    n_heads, n_layers = model.cfg.n_heads, model.cfg.n_layers
    kvpress = {(r["press"], r["budget"]): r for r in kvp}
    windows = None

    def need_windows():
        nonlocal windows
        if windows is None:
            (windows, full), secs, cpu = timed(lambda: capture_windows(model, ids, p, OBSERVATION))
            if ("full", p, "circuits") not in done:
                save({"text": t, "policy": "full", "budget": p, "variant": "circuits",
                      "nll": full[p - 1 :].tolist(), "seconds": secs, "cpu_seconds": cpu})  # fmt: skip
        return windows

    def masked(masks):
        return masked_nll(model, ids, masks)[p - 1 :]

    for policy in ("streaming_llm", "snapkv"):
        config = KVConfig(sinks=SINKS, observation=OBSERVATION, pool=POOL, prefix=p, score_from=p)
        for b in args.budgets:
            theirs = positions_to_keep_layers(kvpress[(policy, b)]["kept"], p)
            if (policy, b, "circuits") not in done:

                def run(policy=policy, b=b, config=config):
                    masks = keep_masks(model, ids, policy, b, config)
                    return masks, masked(masks)

                (masks, nll), secs, cpu = timed(run)
                ours = torch.stack([m[p, :p] for m in masks])[:, None]  # [layer, 1, P]
                row = {"text": t, "policy": policy, "budget": b, "variant": "circuits",
                       "nll": nll.tolist(), "seconds": secs, "cpu_seconds": cpu,
                       "kept_per_layer": int(ours.sum(-1).max()),
                       "overlap_with_kvpress": overlap(ours, theirs)}  # fmt: skip
                if policy == "snapkv":
                    mine = torch.stack([snap_choice(x, b, 1, "max") for x in need_windows()])
                    row["helper_matches_library"] = bool((mine == ours).all())
                    n_kv = theirs.shape[1]
                    again = torch.stack([snap_choice(x, b, n_kv, "avg") for x in need_windows()])
                    row["helper_kvpress_sets_equal"] = float(
                        (again == theirs).all(-1).float().mean()
                    )
                    row["helper_kvpress_overlap"] = overlap(again, theirs)
                else:
                    row["kept_same_as_kvpress"] = bool((ours == theirs).all())
                save(row)
                del masks
            if policy != "snapkv":
                continue
            for variant in args.variants:
                if (policy, b, variant) in done:
                    continue
                if variant == "kvpress_kept":
                    keep = theirs
                else:
                    groups = 1 if variant == "layer_avg" else theirs.shape[1]
                    pool = "avg" if variant == "layer_avg" else "max"
                    keep = torch.stack([snap_choice(x, b, groups, pool) for x in need_windows()])
                masks = LazyMasks(lambda layer, keep=keep: head_mask(keep[layer], n, n_heads),
                                  n_layers)  # fmt: skip
                nll, secs, cpu = timed(lambda masks=masks: masked(masks))
                save({"text": t, "policy": policy, "budget": b, "variant": variant,
                      "nll": nll.tolist(), "seconds": secs, "cpu_seconds": cpu,
                      "overlap_with_kvpress": overlap(keep, theirs)})  # fmt: skip
    if ("full", p, "circuits") not in done:
        need_windows()


def positions_to_keep_layers(kept, prompt: int) -> torch.Tensor:
    """kvpress's kept positions, [layer][kv head][...], as [layer, kv head, P] booleans."""
    return torch.stack([positions_to_keep(layer, prompt) for layer in kept])


def first_token_kept(model, texts: dict, args, kvp: dict) -> dict:
    """Per text and SnapKV budget, where each choice keeps the prompt's first token (position
    0: BOS where the model has one): the (layer, group) pairs that drop it, for the library's
    choice (one set per layer), the two variants and kvpress's kept positions. One full-cache
    forward per text (`capture_windows`)."""
    out = {}
    for t, ids in texts.items():
        windows, _ = capture_windows(model, ids, args.prompt, OBSERVATION)
        runs = {r["budget"]: r for r in kvp["texts"][str(t)] if r["press"] == "snapkv"}
        for b in args.budgets:
            theirs = positions_to_keep_layers(runs[b]["kept"], args.prompt)
            n_kv = theirs.shape[1]
            choices = {"circuits": (1, "max"), "layer_avg": (1, "avg"),
                       "kv_head_max": (n_kv, "max")}  # fmt: skip
            kept = {name: torch.stack([snap_choice(x, b, g, pool) for x in windows])
                    for name, (g, pool) in choices.items()}  # fmt: skip
            kept["kvpress"] = theirs
            out[f"text {t} budget {b}"] = {
                name: {"groups": int(k[:, :, 0].numel()),
                       "dropping": [[int(layer), int(g)] for layer, g in
                                    (~k[:, :, 0]).nonzero().tolist()]}
                for name, k in kept.items()
            }  # fmt: skip
    return out


def key(row: dict) -> tuple:
    return (row["policy"], row["budget"], row["variant"])


# --- tables --------------------------------------------------------------------------------


def table(measured: list[dict], kvpress: dict) -> list[dict]:
    """One row per text, policy and budget: both sides' perplexity of the same tokens, their
    relative difference, the largest per-token NLL difference, wall / CPU seconds, and for
    SnapKV the variants' perplexities."""
    out = []
    by = {(r["text"], *key(r)): r for r in measured}
    for text, runs in sorted(kvpress["texts"].items(), key=lambda kv: int(kv[0])):
        t = int(text)
        for k in runs:
            policy = "full" if k["press"] == "none" else k["press"]
            ours = by.get((t, policy, k["budget"], "circuits"))
            if ours is None:
                continue
            diff = max(abs(a - b) for a, b in zip(ours["nll"], k["nll"], strict=True))
            row = {"text": t, "policy": policy, "budget": k["budget"],
                   "n_scored": len(ours["nll"]),
                   "perplexity_circuits": perplexity(ours["nll"]),
                   "perplexity_kvpress": perplexity(k["nll"])}  # fmt: skip
            row["relative_difference"] = relative(row["perplexity_kvpress"],
                                                  row["perplexity_circuits"])  # fmt: skip
            row["max_token_nll_difference"] = diff
            row |= {"seconds_circuits": ours["seconds"], "cpu_seconds_circuits": ours["cpu_seconds"],
                    "seconds_kvpress": k["seconds"], "cpu_seconds_kvpress": k["cpu_seconds"],
                    "prefill_seconds_kvpress": k["prefill_seconds"],
                    "compression_ratio": k["compression_ratio"],
                    "kvpress_cache_lengths": k["cache_lengths"]}  # fmt: skip
            for name in ("kept_per_layer", "overlap_with_kvpress", "kept_same_as_kvpress",
                         "helper_matches_library", "helper_kvpress_sets_equal",
                         "helper_kvpress_overlap"):  # fmt: skip
                if name in ours:
                    row[name] = ours[name]
            for variant in VARIANTS:
                v = by.get((t, policy, k["budget"], variant))
                if v is not None:
                    row[f"perplexity_{variant}"] = perplexity(v["nll"])
                    row[f"seconds_{variant}"] = v["seconds"]
                    row[f"overlap_{variant}"] = v["overlap_with_kvpress"]
                    if variant == "kvpress_kept":
                        row["relative_difference_kvpress_kept"] = relative(
                            row["perplexity_kvpress"], row["perplexity_kvpress_kept"]
                        )
                        row["max_token_nll_difference_kvpress_kept"] = max(
                            abs(a - b) for a, b in zip(v["nll"], k["nll"], strict=True)
                        )
            out.append(row)
    return out


def pooled(measured: list[dict], kvpress: dict) -> list[dict]:
    """Per policy, budget and side: the perplexity of every text's scored tokens together."""
    groups: dict = {}
    for r in measured:
        groups.setdefault((r["policy"], r["budget"], r["variant"]), []).extend(r["nll"])
    for runs in kvpress["texts"].values():
        for k in runs:
            policy = "full" if k["press"] == "none" else k["press"]
            groups.setdefault((policy, k["budget"], "kvpress"), []).extend(k["nll"])
    return [{"policy": p, "budget": b, "side": side, "n_scored": len(nll),
             "perplexity": perplexity(nll)} for (p, b, side), nll in groups.items()]  # fmt: skip


# --- main ----------------------------------------------------------------------------------


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--texts", type=int, nargs="+", default=[0, 2], help="rows of long.jsonl")
    p.add_argument("--tokens", type=int, default=TOKENS)
    p.add_argument("--prompt", type=int, default=PROMPT, help="P: the compressed prompt")
    p.add_argument("--budgets", type=int, nargs="+", default=list(BUDGETS))
    p.add_argument("--variants", nargs="*", default=list(VARIANTS), choices=VARIANTS)
    p.add_argument("--kvpenv", default="/tmp/kvpenv", help="kvpress's virtual environment")
    p.add_argument("--out", type=Path, help="run folder (default docs/kv/kvpress/MODEL)")
    p.add_argument("--progress", type=Path, help="rows file (default /tmp/kvpress-MODEL.jsonl)")
    p.add_argument("--write-only", action="store_true", help="write the folder from the rows")
    args = p.parse_args()
    if not all(OBSERVATION < b < args.prompt for b in args.budgets):
        raise SystemExit(f"budgets must be in {OBSERVATION + 1} .. {args.prompt - 1}")
    if not args.prompt < args.tokens - 1:
        raise SystemExit("the prompt must leave at least 2 tokens of continuation")

    from attn_sink_circuits.models import load_model

    torch.set_num_threads(1)
    progress = args.progress or Path(f"/tmp/kvpress-{args.model}.jsonl")
    model = load_model(args.model)
    texts = {t: tokens_of(model, t, args.tokens) for t in args.texts}
    short = [t for t, ids in texts.items() if len(ids) < args.tokens]
    if short:
        raise SystemExit(f"texts {short} have fewer than {args.tokens} tokens")
    kvp = kvpress_side(args, texts, progress.with_name(progress.stem + "-kvpress.json"))
    measured = [json.loads(x) for x in progress.read_text().splitlines()] if (
        progress.exists()) else []  # fmt: skip

    check_cached(args, measured, kvp)

    def save(row: dict) -> None:
        measured.append(row)
        with progress.open("a") as fh:
            fh.write(json.dumps(row) + "\n")
        extra = f" (ppl {perplexity(row['nll']):.4f}, {row['seconds']:.0f} s)"
        print(f"circuits text {row['text']} {' '.join(map(str, key(row)))}{extra}", flush=True)

    if not args.write_only:
        for t, ids in texts.items():
            done = {key(r) for r in measured if r["text"] == t}
            library_rows(model, t, ids, args, kvp["texts"][str(t)], done, save)
    write(args, model, texts, measured, kvp)


def check_cached(args, measured: list[dict], kvp: dict) -> None:
    """Refuse rows a run with another prompt, length or budgets left in the progress files."""
    n = args.tokens - args.prompt
    runs = {("none", args.prompt)} | {(p, b) for p in ("streaming_llm", "snapkv")
                                      for b in args.budgets}  # fmt: skip
    for t in args.texts:
        theirs = kvp["texts"][str(t)]
        have = {(r["press"], r["budget"]) for r in theirs}
        if not runs <= have or any(len(r["nll"]) != n for r in theirs):
            raise SystemExit(f"the kvpress results cached for text {t} are of another setting")
    if any(len(r["nll"]) != n for r in measured):
        raise SystemExit("the progress file holds rows of another setting: give --progress")


def write(args, model, texts: dict, measured: list[dict], kvp: dict) -> None:
    import pandas as pd

    from attn_sink_circuits.runs.io import atomic_folder, write_csv, write_json
    from attn_sink_circuits.runs.provenance import provenance, stamped

    measured = [r for r in measured if r["text"] in texts]
    kvp = {**kvp, "texts": {k: v for k, v in kvp["texts"].items() if int(k) in texts}}
    rows = table(measured, kvp)
    out = args.out or ROOT / "docs" / "kv" / "kvpress" / args.model
    settings = {"tokens": args.tokens, "prompt": args.prompt, "budgets": args.budgets,
                "texts": args.texts, "sinks": SINKS, "observation": OBSERVATION, "pool": POOL,
                "variants": {t: sorted({r["variant"] for r in measured if r["text"] == t}
                                       - {"circuits"}) for t in texts},
                "scored": f"tokens {args.prompt} .. {args.tokens - 1}",
                "positions": "kept (not re-indexed), both sides",
                "budget": "prompt keys kept per layer (kvpress: per kv head), the SnapKV "
                          "observation window and StreamingLLM's sinks included"}  # fmt: skip
    record = provenance(model, [ids.tolist() for ids in texts.values()], settings=settings,
                        source=f"data/texts/{LONG.name} rows {args.texts}")  # fmt: skip
    meta = kvp.get("meta", [])
    kvpress_env = {"path": args.kvpenv, "versions": meta[0]["versions"] if meta else None,
                   "runs": [{k: m[k] for k in ("texts", "model_class", "attn_implementation",
                                               "dtype", "threads", "load_seconds",
                                               "process_seconds")} for m in meta]}  # fmt: skip
    summary = {"rows": rows, "pooled": pooled(measured, kvp), "kvpress": kvpress_env,
               "first_token": first_token_kept(model, texts, args, kvp)}  # fmt: skip
    with atomic_folder(out, {"measured": "kv kvpress", "model": args.model}, record) as tmp:
        write_csv(tmp / "rows.csv", pd.DataFrame(rows))
        write_json(tmp / "summary.json", stamped(summary, record))
    print(f"wrote {len(rows)} rows to {out}")
    for r in rows:
        line = (f"text {r['text']} {r['policy']:<13} B {r['budget']:>4}: circuits "
                f"{r['perplexity_circuits']:.4f} kvpress {r['perplexity_kvpress']:.4f} "
                f"rel {r['relative_difference']:+.2e}")  # fmt: skip
        for v in VARIANTS:
            if f"perplexity_{v}" in r:
                line += f" {v} {r[f'perplexity_{v}']:.4f}"
        print(line)


if __name__ == "__main__":
    main()
