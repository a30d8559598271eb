"""The IOI edge circuit of one model with one or more methods, written to a folder of docs/ioi/.

    .venv/bin/python scripts/ioi_circuit.py --model smollm2-135m --methods eap eap_ig \\
        --out docs/ioi/smollm2-135m      # one folder per method inside

A shell over the library's IOI study (`attn_sink_circuits.studies.ioi.run` under the library's
protocol: ABC partner, one token length, metric logit(IO) - logit(S) at the last position,
resample-from-the-partner ablation at every position, with `heads`). Each method's folder is
`IOIResult.save`'s: summary.json (the finding, the circuit's summary, the model's own logit
difference and accuracy, timings), curve.csv, edges.csv, circuit.json, heads.json (every head's
attention from the last position to the IO and S tokens on the held-out clean prompts, direct
effect, copy score and name-mover verdict, and its edges in the circuit), faithfulness.png and
the MIB files. `--heads-only` rewrites heads.json from a saved circuit.json (no discovery).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from attn_sink_circuits.studies.ioi.config import IOIConfig


def settings(args: argparse.Namespace, method: str) -> IOIConfig:
    """The run's config: the library's protocol with the flags on top (a bad --option is a
    ValueError naming it)."""
    return IOIConfig.under(
        "library", method=method, ig_steps=args.ig_steps, n_curve=args.n_curve, seed=args.seed,
        n_fit=args.n_fit, n_heldout=args.n_heldout, pair_seed=args.seed, heads=True,
    ).with_option_strings(args.option)  # fmt: skip


def heads_only(model, args: argparse.Namespace, saved: Path) -> None:
    """Rewrite heads.json beside a saved circuit.json (the same held-out pairs made again)."""
    from attn_sink_circuits.graph.io import read
    from attn_sink_circuits.runs.io import write_json
    from attn_sink_circuits.studies.ioi.heads import head_table
    from attn_sink_circuits.studies.ioi.name_movers import NameMoverRule
    from attn_sink_circuits.studies.ioi.prompts import ioi_pairs

    pairs, _ = ioi_pairs(model, args.n_fit + args.n_heldout, seed=args.seed)
    table = head_table(model, read(saved), pairs[args.n_fit :])
    write_json(saved.parent / "heads.json", {"rule": NameMoverRule().to_dict(), "heads": table})


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--methods", nargs="+", default=["eap", "eap_ig"])
    p.add_argument("--n-fit", type=int, default=32)
    p.add_argument("--n-heldout", type=int, default=32)
    p.add_argument("--ig-steps", type=int, default=8)
    p.add_argument("--n-curve", type=int, default=12)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)
    p.add_argument("--option", nargs="*", default=[],
                   help="other DiscoveryConfig fields KEY=VALUE, e.g. grad_batch=4")  # fmt: skip
    p.add_argument("--heads-only", action="store_true",
                   help="no discovery: rewrite each method folder's heads.json from its saved "
                   "circuit.json (same pairs: same --n-fit, --n-heldout, --seed)")  # fmt: skip
    args = p.parse_args()
    try:  # a bad option fails here, before a model loads
        for method in args.methods:
            settings(args, method)
    except ValueError as err:
        p.error(str(err))
    from attn_sink_circuits.models import load_model
    from attn_sink_circuits.runs.io import stored
    from attn_sink_circuits.studies import ioi

    saved = {m: Path(args.out) / m / "circuit.json" for m in args.methods}
    missing = [str(path) for path in saved.values() if not stored(path).is_file()]
    if args.heads_only and missing:
        p.error(f"--heads-only needs a saved circuit; not found: {', '.join(missing)}")
    t0 = time.time()
    model = load_model(args.model)
    for method in args.methods:
        if args.heads_only:
            heads_only(model, args, stored(saved[method]))
            continue
        result = ioi.run(model, None, settings(args, method), progress=True)
        result.save(Path(args.out) / method)
        print(result.finding(), flush=True)
        print(f"{method}: {time.time() - t0:.0f} s since start", flush=True)


if __name__ == "__main__":
    main()
