"""Benchmark: attn_sink_circuits.patching against TransformerLens's own activation patching.

The same sweeps done two ways in one run, on each model:
  (a) transformer_lens.patching (get_act_patch_attn_head_out_by_pos, get_act_patch_resid_pre):
      one full forward per patched cell; a hook hands the internal activation to its
      logits-only metric function. Run under torch.no_grad (its best case).
  (b) attn_sink_circuits.patching.sweep: batched, truncated forwards; and attribute(), attribution patching.
Sweeps: heads x positions (attn.hook_z) and resid_pre x positions, denoising (clean run patched
into the corrupt run), with the metric read at a middle layer (P0 attention there) and at the
logits (logit difference). TransformerLens is too slow to run whole grids here, so it runs a
seeded random subset of cells: per-cell times and values are compared on that subset, the engine
runs the whole grid. Peak memory is the resident-set high-water mark above the level at the start
of each phase, sampled every 2 ms.

Usage: .venv/bin/python scripts/bench_patching.py [--models smollm2-135m qwen2.5-0.5b]
       [--threads 1] [--batch-size 64] [--json results.json] [--quick]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import random
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("TQDM_DISABLE", "1")  # TransformerLens's per-patch progress bars

import pandas as pd  # noqa: E402
import torch  # noqa: E402
from transformer_lens import patching as tl_patching  # noqa: E402

from attn_sink_circuits.models import load_model  # noqa: E402
from attn_sink_circuits.patching import (  # noqa: E402
    Value,
    attribute,
    check_attribution,
    head_grid,
    logit_diff,
    p0_attention,
    position_grid,
    sweep,
)

CLEAN = "When John and Mary went to the store on Monday morning, John gave a bottle of water to"
CORRUPT = "After Lisa and Tom came to the house on Friday evening, Lisa handed a glass of juice to"
# Grid size per model: Qwen2.5-0.5B is ~4x SmolLM2's cost per token, so it sweeps every 4th
# layer and every 2nd position, and TransformerLens runs fewer cells.
PLANS = {
    "smollm2-135m": {"layer_step": 1, "pos_step": 1, "tl_cells": 48},
    "qwen2.5-0.5b": {"layer_step": 4, "pos_step": 2, "tl_cells": 12},
}
QUICK = {"layer_step": 7, "pos_step": 5, "tl_cells": 4}
TARGETS = {"middle": 10.0, "logits": 3.0, "attribution": 100.0}
MAX_DIFF = 1e-4


class PeakRSS:
    """Resident-set high-water mark (MB) above the level at entry, sampled in a thread."""

    def __enter__(self):
        try:  # hand freed heap back to the OS so that the entry level is a fair zero
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except OSError:
            pass
        self._page = os.sysconf("SC_PAGE_SIZE")
        self.start = self.peak = self._rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _rss(self) -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * self._page

    def _sample(self):
        while not self._stop.wait(0.002):
            self.peak = max(self.peak, self._rss())

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._rss())
        self.mb = (self.peak - self.start) / 2**20


def tl_subset(model, corrupt, cache, metric, grid, cells):
    """TransformerLens on the chosen cells: (values, seconds, peak MB)."""
    sites = [grid.cells[i][0].site for i in cells]
    if grid.site == "head":
        fn = tl_patching.get_act_patch_attn_head_out_by_pos
        index = pd.DataFrame(
            {
                "layer": [s.layer for s in sites],
                "pos": [s.pos[0] for s in sites],
                "head": [s.head for s in sites],
            }
        )
    else:
        fn = tl_patching.get_act_patch_resid_pre
        index = pd.DataFrame({"layer": [s.layer for s in sites], "pos": [s.pos[0] for s in sites]})
    seen = {}

    def capture(name):
        def hook(act, hook):
            seen[name] = act

        return hook

    def tl_metric(logits):  # TL's metric sees only logits; the hooks supply the rest
        return metric(seen, logits if metric.logits else None)[0]

    with PeakRSS() as mem, torch.no_grad():
        with model.hooks(fwd_hooks=[(h, capture(h)) for h in metric.hooks]):
            t0 = time.perf_counter()
            values = fn(model, corrupt, cache, tl_metric, index_df=index, index_axis_names=None)
            seconds = time.perf_counter() - t0
    return values, seconds, mem.mb


def block_seconds(model, tokens, batch_size):
    """Seconds per block per sequence at the engine's batch size (no unembedding)."""
    x = tokens.repeat(batch_size, 1)
    with torch.no_grad():
        model(x, stop_at_layer=-1)  # warm-up
        t0 = time.perf_counter()
        model(x, stop_at_layer=-1)
    return (time.perf_counter() - t0) / (batch_size * (model.cfg.n_layers - 1))


def bench_model(key, args):
    plan = QUICK if args.quick else PLANS[key]
    model = load_model(key)
    n_layers = model.cfg.n_layers
    clean, corrupt = model.to_tokens(CLEAN), model.to_tokens(CORRUPT)
    if clean.shape != corrupt.shape:
        raise RuntimeError(
            f"{key}: clean/corrupt token lengths differ: {clean.shape} {corrupt.shape}"
        )
    n_pos = corrupt.shape[1]
    middle = n_layers // 2
    metrics = {
        "middle": p0_attention([middle]),
        "logits": logit_diff(model.to_single_token(" Mary"), model.to_single_token(" John")),
    }
    value = Value.from_run(clean)
    layers = list(range(0, n_layers, plan["layer_step"]))
    positions = list(range(0, n_pos, plan["pos_step"]))
    grids = {
        "heads x pos": head_grid(model, corrupt, value, layers=layers, positions=positions),
        "resid_pre x pos": position_grid(model, corrupt, value, positions=positions),
    }
    with torch.no_grad():
        _, cache = model.run_with_cache(clean)
    t_block = block_seconds(model, corrupt, args.batch_size)
    print(
        f"\n== {key}: {n_layers} layers, {model.cfg.n_heads} heads, {n_pos} tokens, "
        f"{torch.get_num_threads()} thread(s), batch size {args.batch_size}; "
        f"middle-layer metric at L{middle} ==",
        flush=True,
    )
    print(
        f"engine block cost: {t_block * 1e3:.2f} ms per block per sequence at batch {args.batch_size}"
    )
    rows, attributions = [], []
    for where, metric in metrics.items():
        for name, grid in grids.items():
            n = len(grid.cells)
            cells = sorted(random.Random(0).sample(range(n), min(plan["tl_cells"], n)))
            tl_values, tl_s, tl_mb = tl_subset(model, corrupt, cache, metric, grid, cells)
            with PeakRSS() as mem:
                ours = sweep(
                    model, corrupt, grid, metric, batch_size=args.batch_size, progress=False
                )
            st = ours.stats
            diff = (ours.values.flatten()[cells] - tl_values).abs().max().item()
            # The compared cells must move the metric, or equal values would prove little.
            subset_effect = (tl_values - ours.baseline).abs().max().item()
            tl_cell, our_cell = tl_s / len(cells), st["seconds"] / n
            row = {
                "model": key,
                "sweep": name,
                "metric": where,
                "metric_name": metric.name,
                "cells": n,
                "tl_cells": len(cells),
                "tl_s_per_cell": tl_cell,
                "engine_s_per_cell": our_cell,
                "engine_s": st["seconds"],
                "speedup": tl_cell / our_cell,
                "max_abs_diff": diff,
                "tl_subset_max_abs_effect": subset_effect,
                "tl_peak_mb": tl_mb,
                "engine_peak_mb": mem.mb,
                "floor": st["blocks_floor"] / st["blocks_full"],
                "engine_blocks": st["blocks_run"] / st["blocks_full"],
                "skipped_noop": st["n_noop"],
                "skipped_after_metric": st["n_runs"] - st["n_run"] - st["n_noop"],
                "time_vs_floor": st["seconds"] / (st["blocks_floor"] * t_block),
                "max_abs_effect": ours.effects.abs().max().item(),
            }
            rows.append(row)
            print(
                f"[{where:6}] {name:15} {n:5} cells | TL {len(cells)} cells {tl_cell:.3f} s/cell | "
                f"engine {our_cell * 1e3:.1f} ms/cell ({st['seconds']:.1f} s) | "
                f"speedup {row['speedup']:.1f}x | max|diff| {diff:.1e} (max |effect| "
                f"{subset_effect:.1e} on those cells) | "
                f"peak MB TL {tl_mb:.0f} engine {mem.mb:.0f} "
                f"(x{mem.mb / max(tl_mb, 1):.1f}) | FLOP floor {row['floor']:.3f} of full forwards, "
                f"engine ran {row['engine_blocks']:.3f} (skipped {row['skipped_noop']} no-op and "
                f"{row['skipped_after_metric']} after-metric cells), engine time = "
                f"{row['time_vs_floor']:.2f} x floor blocks at batch cost",
                flush=True,
            )
            if name == "heads x pos":
                with PeakRSS() as mem:
                    t0 = time.perf_counter()
                    approx = attribute(model, corrupt, grid, metric)
                    a_s = time.perf_counter() - t0
                check = check_attribution(
                    model, corrupt, grid, metric, k=20, attribution=approx, exact=ours
                )
                a = {
                    "model": key,
                    "metric": where,
                    "cells": n,
                    "seconds": a_s,
                    "tl_full_sweep_s": tl_cell * n,
                    "speedup": tl_cell * n / a_s,
                    "peak_mb": mem.mb,
                    **check.to_dict(),
                }
                attributions.append(a)
                print(
                    f"[{where:6}] attribution over the {n}-cell head grid: {a_s:.2f} s vs TL full "
                    f"sweep {tl_cell * n:.0f} s (extrapolated) -> {a['speedup']:.0f}x | peak "
                    f"{mem.mb:.0f} MB | vs exact: top-20 overlap {check.overlap:.2f}, Spearman "
                    f"{check.spearman:.3f}, max |error| {check.max_abs_error:.2e}",
                    flush=True,
                )
    del model, cache
    return rows, attributions


def verdict(rows, attributions):
    print("\n== targets ==")
    ok = True
    for r in rows:
        want = TARGETS[r["metric"]]
        good = r["speedup"] >= want and r["max_abs_diff"] <= MAX_DIFF
        ok &= good
        print(
            f"{'PASS' if good else 'FAIL'} {r['model']:13} {r['sweep']:15} [{r['metric']:6}] "
            f"speedup {r['speedup']:.1f}x (target >= {want:g}x), max|diff| "
            f"{r['max_abs_diff']:.1e} (<= {MAX_DIFF:g})"
        )
    for a in attributions:
        good = a["speedup"] >= TARGETS["attribution"]
        ok &= good
        print(
            f"{'PASS' if good else 'FAIL'} {a['model']:13} attribution     [{a['metric']:6}] "
            f"speedup {a['speedup']:.0f}x (target >= {TARGETS['attribution']:g}x)"
        )
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", default=list(PLANS), choices=list(PLANS))
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads (1: the 2 cores here are shared)"
    )
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--json", type=Path, help="also write all figures to this JSON file")
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: tiny grids, 4 TL cells (no targets)"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    rows, attributions = [], []
    for key in args.models:
        r, a = bench_model(key, args)
        rows += r
        attributions += a
    ok = verdict(rows, attributions)
    if args.json:
        out = {"threads": args.threads, "batch_size": args.batch_size, "sweeps": rows}
        out["attribution"] = attributions
        fd, tmp = tempfile.mkstemp(dir=args.json.parent, prefix=args.json.name + ".")
        with os.fdopen(fd, "w") as f:
            json.dump(out, f, indent=2)
        os.replace(tmp, args.json)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
