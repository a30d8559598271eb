"""`circuits generate`: greedy reasoning traces on the math problems, resumable."""

from __future__ import annotations

import argparse

from attn_sink_circuits.cli.options import count_int, model_options, positive_int
from attn_sink_circuits.cli.parser import command


def run(args: argparse.Namespace) -> int:
    from attn_sink_circuits.core.lines import JSONL_SUFFIXES
    from attn_sink_circuits.runs.io import check_out_file

    check_out_file(args.out, JSONL_SUFFIXES)  # before torch is imported: refused at once
    import torch

    from attn_sink_circuits.decoding import Decoding
    from attn_sink_circuits.generation import generate_long_file

    decoding = Decoding(
        max_new_tokens=args.max_new_tokens, seed=args.seed, stop_at_eos=args.stop_at_eos,
        batch_size=args.batch_size,
    )  # fmt: skip
    traces = generate_long_file(
        args.model, args.out, decoding, n=args.n, threads=args.threads, device=args.device,
        dtype=getattr(torch, args.dtype),
    )  # fmt: skip
    n_new = sum(len(t.tokens) - t.prompt_len for t in traces)
    print(f"{len(traces)} traces, {n_new} generated tokens -> {args.out}")
    return 0


def add(sub) -> None:
    p = command(
        sub,
        "generate",
        "greedy reasoning traces on the math problems (JSONL), resumable",
        "Answer the math problems by greedy decoding into a trace file, rewritten after every "
        "problem (or batch): run the same command again to resume (the problems already in the "
        "file are kept when made with the same settings; other settings are refused).",
    )
    model_options(p)
    p.add_argument("--out", required=True, help="output trace file (.jsonl or .jsonl.gz)")
    p.add_argument("--n", type=positive_int, help="number of problems (default: all)")
    p.add_argument(
        "--max-new-tokens", type=positive_int, default=100, help="tokens per trace (%(default)s)"
    )
    p.add_argument("--seed", type=count_int, default=0, help="random seed (%(default)s)")
    p.add_argument(
        "--stop-at-eos",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="end a trace at the end-of-sequence token; --no-stop-at-eos forbids it, so every "
        "trace has exactly --max-new-tokens (where it would have ended is recorded as "
        "natural_end)",
    )
    p.add_argument(
        "--batch-size", type=positive_int, default=1,
        help="problems decoded together, left-padded (%(default)s): one pass a step for the "
        "batch, much faster for a large model on a CPU; the file is rewritten after each batch",
    )  # fmt: skip
    p.set_defaults(func=run)
