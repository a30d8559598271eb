"""Bounded-memory streaming against one chunked forward, side by side (issue 35's target: a
16k-token text on Qwen2.5-0.5B in bounded memory, at most 3x the time of the library's chunked
sink path over the same tokens).

Each measurement runs in its own process (its peak RSS is its own), one after the other:

    chunked     `attn_sink_circuits.sinks.runner.measure_tokens` on the text (the chunked sink path of
                `docs/scale`: one forward, no whole pattern, sink scores per layer)
    POLICY      `attn_sink_circuits.studies.kv.stream.streaming_nll` of POLICY at BUDGET (perplexity of the tokens
                from 256 on; sink_aware measures its sinks first, inside its own timing)
    check       on the first CHECK tokens: the streaming NLL of each policy against
                `attn_sink_circuits.studies.kv.evaluate`'s full-pattern NLL (max abs difference)

The text: the rows of data/texts/long.jsonl joined in order (blank line between; no text is
repeated) and cut to TOKENS. Prints one table with the time and memory ratios to `chunked`,
and writes it with the provenance when --out is given.

    OMP_NUM_THREADS=1 python scripts/kv_bench.py --model qwen2.5-0.5b --tokens 16384
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
LONG = ROOT / "data" / "texts" / "long.jsonl"


def text_tokens(model, n: int):
    rows = [json.loads(line)["text"] for line in LONG.read_text().splitlines()]
    ids = model.to_tokens("\n\n".join(rows), truncate=False)[0][:n].cpu()
    if len(ids) < n:
        raise ValueError(f"{LONG.name} joined has {len(ids)} tokens, fewer than --tokens {n}")
    return ids


def one(args) -> dict:
    """One measurement in this process: its seconds, peak RSS and result."""
    import torch

    from attn_sink_circuits.models import load_model
    from attn_sink_circuits.studies.kv import KVConfig, keep_masks, masked_nll, measured_sinks
    from attn_sink_circuits.studies.kv.stream import streaming_nll

    torch.set_num_threads(args.threads)
    model = load_model(args.model, device=args.device)
    ids = text_tokens(model, args.tokens)
    config = KVConfig(sinks=4)
    t0, cpu0 = time.perf_counter(), cpu_seconds()
    out: dict = {"name": args.one, "tokens": len(ids)}
    if args.one == "chunked":
        from attn_sink_circuits.sinks.runner import measure_tokens

        measure_tokens(model, [ids.tolist()], progress=False)
    elif args.one == "check":
        short = ids[: args.check]
        out["tokens"] = len(short)
        sinks = measured_sinks(model, short.tolist(), config)
        for policy in args.policies:
            s = sinks if policy == "sink_aware" else None
            full = masked_nll(model, short, keep_masks(model, short, policy, args.budget_check,
                                                       config, s))  # fmt: skip
            streamed = streaming_nll(model, short, policy, args.budget_check, config, s)
            out[policy] = float((full - streamed).abs().max())
    else:
        sinks = measured_sinks(model, ids.tolist(), config) if args.one == "sink_aware" else None
        nll = streaming_nll(model, ids, args.one, args.budget, config, sinks)[255:]
        out["perplexity"] = float(nll.mean().exp())
    out["seconds"] = round(time.perf_counter() - t0, 1)
    out["cpu_seconds"] = round(cpu_seconds() - cpu0, 1)
    out["peak_rss_gb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)
    return out


def cpu_seconds() -> float:
    """User + system CPU seconds of this process (other jobs on a shared machine move them less
    than wall seconds)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="qwen2.5-0.5b")
    p.add_argument("--tokens", type=int, default=16384)
    p.add_argument("--budget", type=int, default=1024, help="streaming budget (keys per query)")
    p.add_argument("--policies", nargs="+", default=["streaming_llm", "sink_aware"])
    p.add_argument("--check", type=int, default=1024, help="tokens of the equality check")
    p.add_argument("--budget-check", type=int, default=128)
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path, help="write bench.json here (with provenance)")
    p.add_argument("--one", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        print(json.dumps(one(args)), flush=True)
        return
    rows = []
    for name in ["check", "chunked", *args.policies]:
        cmd = [sys.executable, __file__, "--one", name] + sys.argv[1:]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode:
            sys.exit(f"{name} failed:\n{done.stderr[-3000:]}")
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    table(rows)
    if args.out:
        write(args, rows)


def table(rows: list[dict]) -> None:
    base = next(r for r in rows if r["name"] == "chunked")
    head = ["measurement", "wall s", "x chunked", "CPU s", "x chunked", "peak RSS GB",
            "x chunked", "result"]  # fmt: skip
    print("\n| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for r in rows:
        if r["name"] == "check":
            continue
        cells = [r["name"]]
        for field in ("seconds", "cpu_seconds", "peak_rss_gb"):
            cells += [f"{r[field]}", f"{r[field] / base[field]:.2f}"]
        cells.append(f"perplexity {r['perplexity']:.3f}" if "perplexity" in r else "")
        print("| " + " | ".join(cells) + " |")
    check = next(r for r in rows if r["name"] == "check")
    skip = ("name", "tokens", "seconds", "cpu_seconds", "peak_rss_gb")
    diffs = {k: v for k, v in check.items() if k not in skip}
    print(f"streaming against the full-pattern NLL, first {check['tokens']} tokens:", diffs)


def write(args, rows: list[dict]) -> None:
    from attn_sink_circuits.models import load_model
    from attn_sink_circuits.runs.io import atomic_folder, write_json
    from attn_sink_circuits.runs.provenance import provenance, stamped

    model = load_model(args.model)
    ids = text_tokens(model, args.tokens)
    settings = {k: v for k, v in vars(args).items() if k not in ("out", "one")}
    record = provenance(model, [ids.tolist()], settings=settings, source=f"{LONG.name} joined")
    with atomic_folder(args.out, {"measured": "kv bench", "model": args.model}, record) as tmp:
        write_json(tmp / "bench.json", stamped({"rows": rows}, record))


if __name__ == "__main__":
    main()
