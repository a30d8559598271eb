"""Seconds and peak memory of measuring sinks on the corpus: `measure()` against a plain
`run_with_cache()` of every hook followed by the same metrics.

Each (model, variant) runs in a fresh subprocess. Memory is the process's resident set, sampled
every 5 ms from /proc (Linux) while the variant runs; "peak +GB" is that peak minus the RSS
after the model was loaded and warmed up on one short text. Variants:
- measure:         attn_sink_circuits.sinks.measure_corpus, batched (default chunking);
- measure b=1:     the same, one text per forward;
- run_with_cache:  one text per forward, `run_with_cache(tokens)` with no names_filter, then the
                   same metric functions on the cached patterns and block outputs.
All three must give the same numbers; the script checks the P0 mass and cosine agree.

    python scripts/bench_sinks.py [--models smollm2-135m qwen2.5-0.5b] [--n N]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = ("measure", "measure b=1", "run_with_cache")


def rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PeakRSS:
    """Samples the resident set in a thread; `peak` is the largest value seen."""

    def __init__(self, interval: float = 0.005) -> None:
        self.interval, self.peak, self._stop = interval, rss_bytes(), threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_bytes())
            time.sleep(self.interval)

    def __enter__(self) -> PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_bytes())


def corpus_for(key: str, n: int | None):
    from attn_sink_circuits.core.traces import PROBLEMS_PATH, read_corpus

    traces = ROOT / "data" / "traces" / f"{key}.jsonl"
    return read_corpus(traces if traces.is_file() else PROBLEMS_PATH)[:n]


def cache_all(model, corpus):
    """The plain way: cache every hook of one text at a time, then the same metrics."""
    import torch

    from attn_sink_circuits.core.identity import model_key
    from attn_sink_circuits.core.traces import Trace
    from attn_sink_circuits.sinks import SinkReport, TextSinks, gu_alpha, sink_score

    texts = []
    n_layers = model.cfg.n_layers
    for index, item in enumerate(corpus):
        ids = item.tokens if isinstance(item, Trace) else model.to_tokens(item)[0].tolist()
        tokens = torch.tensor([ids])
        with torch.no_grad():
            _, cache = model.run_with_cache(tokens)
        pattern = torch.stack([cache[f"blocks.{i}.attn.hook_pattern"][0] for i in range(n_layers)])
        resid = torch.stack([cache[f"blocks.{i}.hook_resid_post"][0] for i in range(n_layers)])
        texts.append(
            TextSinks.from_activations(
                resid,
                sink_score(pattern),
                gu_alpha(pattern),
                model.tokenizer.batch_decode([[t] for t in ids]),
                index=index,
            )
        )
        del cache
    return SinkReport(model_key(model), n_layers, model.cfg.n_heads, texts)


def worker(key: str, variant: str, n: int | None) -> None:
    import torch

    from attn_sink_circuits.models import load_model
    from attn_sink_circuits.sinks import Batching, measure, measure_corpus

    model = load_model(key)
    corpus = corpus_for(key, n)
    measure(model, "warm up the kernels once", progress=False)
    base = rss_bytes()
    start = time.perf_counter()
    with PeakRSS() as rss:
        if variant == "run_with_cache":
            report = cache_all(model, corpus)
        else:
            size = 1 if variant == "measure b=1" else 16
            report = measure_corpus(
                model, corpus, batching=Batching(max_batch_size=size), progress=False
            )
    seconds = time.perf_counter() - start
    n_tokens = sum(t.n_tokens for t in report.texts)
    print(
        json.dumps(
            {
                "seconds": seconds,
                "peak_gb": rss.peak / 2**30,
                "peak_increase_gb": (rss.peak - base) / 2**30,
                "n_texts": len(report.texts),
                "n_tokens": n_tokens,
                "p0_mass": torch.stack([t.p0_mass for t in report.texts]).tolist(),
                "cos_sum": [float(t.cosine.sum()) for t in report.texts],
                "sink_rate": report.sink_rate,
            }
        )
    )


def run(key: str, variant: str, n: int | None) -> dict:
    cmd = [sys.executable, __file__, "--worker", key, variant]
    if n is not None:
        cmd += ["--n", str(n)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["smollm2-135m", "qwen2.5-0.5b"])
    parser.add_argument("--n", type=int, help="first N texts of each corpus (default: all)")
    parser.add_argument("--worker", nargs=2, metavar=("MODEL", "VARIANT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker, args.n)
        return
    import torch

    print(f"torch threads per process: {torch.get_num_threads()}")
    print(f"{'model':<14} {'variant':<15} {'texts':>5} {'tokens':>6} {'seconds':>8} "
          f"{'peak GB':>8} {'peak +GB':>9}  sink rate")  # fmt: skip
    for key in args.models:
        results = {variant: run(key, variant, args.n) for variant in VARIANTS}
        for variant, r in results.items():
            print(
                f"{key:<14} {variant:<15} {r['n_texts']:>5} {r['n_tokens']:>6} "
                f"{r['seconds']:>8.2f} {r['peak_gb']:>8.2f} {r['peak_increase_gb']:>9.3f}  "
                f"{r['sink_rate']:.4f}",
                flush=True,
            )
        ref = torch.tensor(results["run_with_cache"]["p0_mass"])
        for variant in VARIANTS[:2]:
            diff = (torch.tensor(results[variant]["p0_mass"]) - ref).abs().nan_to_num(0).max()
            cos = max(
                abs(a - b)
                for a, b in zip(
                    results[variant]["cos_sum"], results["run_with_cache"]["cos_sum"], strict=True
                )
            )
            print(f"{'':<14} {variant} vs run_with_cache: max |dP0 mass| {diff:.2e}, "
                  f"max |d sum cos| {cos:.2e}")  # fmt: skip


if __name__ == "__main__":
    main()
