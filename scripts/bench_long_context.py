"""Sink scores of one long text in bounded memory: seconds and peak RSS per length.

The text is the Python-reference paragraphs (`data/texts/python_reference.jsonl`) joined with
blank lines, repeated as needed and cut to exactly N tokens. Each length runs in a fresh
subprocess; "peak RSS" is the process's high-water mark (VmHWM) during the measurement alone
(reset after the model is loaded), "load peak" the one of loading. With `--full` the
same text is also measured from the full patterns (TransformerLens's own attention) and the
largest |difference| of the sink scores, P0 mass and alpha is printed (only where the full
patterns fit: 14 heads x N^2 x 4 B per layer on Qwen2.5-0.5B).

    python scripts/bench_long_context.py --model qwen2.5-0.5b --tokens 2048 4096 16384 [--full]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEXTS = ROOT / "data" / "texts" / "python_reference.jsonl"


def long_tokens(model, n: int) -> list[int]:
    paragraphs = [json.loads(line)["text"] for line in TEXTS.read_text().splitlines()]
    ids: list[int] = model.to_tokens(paragraphs[0], truncate=False)[0].tolist()
    i = 1
    while len(ids) < n:
        more = model.to_tokens("\n\n" + paragraphs[i % len(paragraphs)], prepend_bos=False)
        ids += more[0].tolist()
        i += 1
    return ids[:n]


def one(model_key: str, n: int, full: bool, chunk: int) -> dict:
    from attn_sink_circuits.models import load_model
    from attn_sink_circuits.sinks.runner import Batching, measure_tokens

    t0 = time.perf_counter()
    model = load_model(model_key)
    load_s = time.perf_counter() - t0
    load_peak = _peak_rss_gb()
    ids = long_tokens(model, n)
    _reset_peak()
    t0, cpu0 = time.perf_counter(), _cpu_seconds()
    report = measure_tokens(
        model,
        [ids],
        batching=Batching(max_batch_tokens=n, chunked=True, max_chunk_elements=chunk),
        progress=False,
    )
    seconds = time.perf_counter() - t0
    cpu = [after - before for after, before in zip(_cpu_seconds(), cpu0, strict=True)]
    text = report.texts[0]
    row = {
        "model": model_key,
        "tokens": n,
        "seconds": round(seconds, 1),
        "cpu_seconds": {k: round(v, 1) for k, v in zip(("user", "system"), cpu, strict=True)},
        "load_seconds": round(load_s, 1),
        "load_peak_rss_gb": round(load_peak, 2),
        "peak_rss_gb": round(_peak_rss_gb(), 2),
        "sink_position": text.sink.position,
        "p0_mass_by_layer": [round(float(v), 4) for v in text.p0_mass.mean(-1)],
        "max_secondary_score": round(
            float(text.score[:, text.sink.position + 1 :].nan_to_num(0.0).max()), 4
        ),
        "events": len(text.events),
    }
    if full:
        _reset_peak()
        t0 = time.perf_counter()
        ref = measure_tokens(
            model, [ids], batching=Batching(max_batch_tokens=n, chunked=False), progress=False
        )
        row["full_seconds"] = round(time.perf_counter() - t0, 1)
        row["full_peak_rss_gb"] = round(_peak_rss_gb(), 2)
        r = ref.texts[0]
        row["max_abs_diff"] = max(
            float((getattr(r, f) - getattr(text, f)).abs().nan_to_num(0.0).max())
            for f in ("score", "p0_mass", "alpha", "cosine")
        )
    return row


def _cpu_seconds() -> tuple[float, float]:
    """This process's (user, system) CPU seconds so far: on a shared machine they move less
    than wall time, and system time counts the page faults of large fresh tensors."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime


def _reset_peak() -> None:
    """Reset the high-water mark of the resident set (Linux: 5 -> /proc/self/clear_refs)."""
    Path("/proc/self/clear_refs").write_text("5")


def _peak_rss_gb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 2**20  # kB
    raise RuntimeError("no VmHWM in /proc/self/status (Linux only)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-0.5b")
    parser.add_argument("--tokens", type=int, nargs="+", default=[2048, 4096])
    parser.add_argument("--full", action="store_true", help="also measure from full patterns")
    parser.add_argument("--chunk", type=int, default=2**24, help="scores per query chunk")
    parser.add_argument("--out", type=Path, help="append one JSON line per length here")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.model, args.tokens[0], args.full, args.chunk)))
        return
    for n in args.tokens:
        cmd = [sys.executable, __file__, "--one", "--model", args.model, "--tokens", str(n)]
        cmd += ["--chunk", str(args.chunk)] + (["--full"] if args.full else [])
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode:
            print(f"{n} tokens: failed (exit {out.returncode})\n{out.stderr[-3000:]}", flush=True)
            continue
        row = json.loads(out.stdout.strip().splitlines()[-1])
        print(json.dumps(row), flush=True)
        if args.out:
            with args.out.open("a") as fh:
                fh.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
