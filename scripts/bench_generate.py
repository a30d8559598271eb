"""Greedy trace generation one problem at a time against batches, side by side in one process.

The same model, problems and settings (EOS forbidden, so every trace has exactly N new tokens)
are decoded with each `--batch-sizes` value; the script prints new tokens per second, the
speed-up over the first batch size and whether the tokens are identical to its traces.

    python scripts/bench_generate.py --model smollm2-135m --n 8 --tokens 64 --batch-sizes 1 8
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from attn_sink_circuits.core.traces import load_problems
from attn_sink_circuits.decoding import Decoding
from attn_sink_circuits.generation import generate_long_traces
from attn_sink_circuits.models import load_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--n", type=int, default=8, help="problems")
    parser.add_argument("--tokens", type=int, default=64, help="new tokens per trace")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = load_model(args.model)
    problems = load_problems()[: args.n]
    print(f"{args.model}: {args.n} problems x {args.tokens} new tokens, {args.threads} thread(s)")
    print(f"{'batch':>5} {'seconds':>8} {'tok/s':>7} {'speed-up':>8}  tokens equal to batch "
          f"{args.batch_sizes[0]}")  # fmt: skip
    first = None
    for size in args.batch_sizes:
        decoding = Decoding(max_new_tokens=args.tokens, stop_at_eos=False, batch_size=size)
        with tempfile.TemporaryDirectory() as folder:
            start = time.perf_counter()
            traces = generate_long_traces(
                model, problems, Path(folder) / "t.jsonl", decoding, progress=False
            )
            seconds = time.perf_counter() - start
        rate = args.n * args.tokens / seconds
        first = first or (traces, rate)
        same = sum(a.tokens == b.tokens for a, b in zip(first[0], traces, strict=True))
        print(f"{size:>5} {seconds:>8.1f} {rate:>7.2f} {rate / first[1]:>7.2f}x  "
              f"{same} of {args.n}")  # fmt: skip


if __name__ == "__main__":
    main()
