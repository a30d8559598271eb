"""The method table of issue 20: each edge-scoring method of the registry (eap; eap_ig over the
edge coefficients; eap_ig_inputs over the input; mask) on the P0-sink circuit of one model,
with the settings of `circuits p0` (16 fit + 16 held-out texts x 64 tokens split with seed 0,
stratified by kind as the CLI splits them, edges ablated at position 0 with the mean over the text's other positions, the late P0
attention of the saved P0 run as the metric).

Per method, in its own forked process (so that its peak memory is its own): the circuit at the
target (first size with fit faithfulness >= 0.8), the smallest circuit whose held-out
faithfulness lies in `target_band`, MIB's CPR and CMD on fit and held-out texts, wall time and
peak RSS. Writes docs/p0/methods/<model>.json; `--markdown` prints the table of every model
written so far.

    python scripts/method_table.py --model smollm2-135m [--methods eap eap_ig mask]
        [--texts FILE] [--checkpoint DIR] [--option mask_steps=32 ...]
    python scripts/method_table.py --markdown
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import time
from pathlib import Path

import torch

from attn_sink_circuits.circuit import p0_token
from attn_sink_circuits.core.texts import read_kinded_texts, split_indices
from attn_sink_circuits.core.tokens import token_rows
from attn_sink_circuits.discovery import DEFAULT_TEXTS, DiscoveryConfig, discover
from attn_sink_circuits.discovery.methods import METHODS
from attn_sink_circuits.graph import io as graph_io
from attn_sink_circuits.patching.metrics import build_metric
from attn_sink_circuits.runs.io import json_records, stored, write_json

DOCS = Path(__file__).resolve().parents[1] / "docs" / "p0"
OUT = DOCS / "methods"
N_FIT, N_HELDOUT, N_TOKENS, SEED = 16, 16, 64, 0
"""The `circuits p0` defaults the saved P0 runs used."""


def _peak_rss_gb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1e6
    return float("nan")


def _inputs(model_key: str, texts_file: str):
    """The model, the saved run's metric spec, the fit and held-out token rows (the CLI's
    split, stratified by kind; the BOS at P0 when the model prepends one) and their kinds."""
    from attn_sink_circuits.models import load_model

    saved = graph_io.read(DOCS / model_key / "circuit.graphml").graph
    spec = json.loads(saved["metric_spec"])
    model = load_model(model_key)
    first = p0_token(model)
    texts, kinds = read_kinded_texts(texts_file)
    fit, held = split_indices(kinds, N_FIT, N_HELDOUT, SEED)

    def rows(items: list[int]):
        return token_rows(model, [texts[i] for i in items], N_TOKENS, first=first)

    return model, spec, rows(fit), rows(held), ([kinds[i] for i in fit], [kinds[i] for i in held])


def run_method(
    model_key: str, method: str, texts_file: str, checkpoint: str | None, options: list[str]
) -> dict:
    """One method's row (run in a child process)."""
    torch.manual_seed(SEED)
    model, spec, fit, held, kinds = _inputs(model_key, texts_file)
    cfg = DiscoveryConfig(method=method, n_exact_texts=0, seed=SEED).with_option_strings(options)
    start = time.perf_counter()
    folder = None
    if checkpoint:
        folder = Path(checkpoint) / f"{model_key}-{method}"
        folder.mkdir(parents=True, exist_ok=True)
    c = discover(model, fit, held, build_metric(spec), positions=[0], config=cfg,
                 progress=True, checkpoint=folder, kinds=kinds)  # fmt: skip
    wall = time.perf_counter() - start
    return {
        "method": method,
        "summary": c.summary(),
        "curve": json_records(c.curve),
        "mib": c.mib,
        "method_records": c.method_records,
        "wall_s": wall,
        "peak_rss_gb": _peak_rss_gb(),
        "metric_spec": spec,
        "config": cfg.to_dict(),
    }


def _row(model_key: str, r: dict) -> str:
    s = r["summary"]
    band = (
        f"{s['band_n_edges']:,} ({s['band_heldout_faithfulness']:.2f} held-out, "
        f"{s['band_fit_faithfulness']:.2f} fit; {s['band_source']})"
        if s.get("band_n_edges") is not None
        else "none on the curve"
    )
    target = (f"{s['n_edges']:,} ({s['fit_faithfulness']:.2f} fit, "
              f"{s['heldout_faithfulness']:.2f} held-out)")  # fmt: skip
    if not s["reached_on_fit"]:
        target += ", not reached"
    return (
        f"| {model_key} | {r['method']} | {target} | {band} | {s['cpr_fit']:.3f} / "
        f"{s['cpr_heldout']:.3f} | {s['cmd_fit']:.3f} / {s['cmd_heldout']:.3f} | "
        f"{r['wall_s'] / 60:.1f} min | {r['peak_rss_gb']:.1f} GB |"
    )


def markdown() -> str:
    lines = [
        "| model | method | edges at f >= 0.8 (fit; held-out f) | smallest circuit with held-out "
        "f in [0.9, 1.1] | CPR fit / held-out | CMD fit / held-out | wall | peak RSS |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for path in sorted(OUT.glob("*.json")):
        doc = json.loads(path.read_text())
        lines += [_row(doc["model"], r) for r in doc["methods"]]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", help="model key (its P0 run must be saved in docs/p0/)")
    parser.add_argument("--methods", nargs="*", default=list(METHODS), choices=METHODS)
    parser.add_argument("--texts", default=str(DEFAULT_TEXTS), help="text file (default texts)")
    parser.add_argument("--checkpoint", help="folder for the mask sweep's checkpoints")
    parser.add_argument("--markdown", action="store_true", help="print the table and stop")
    parser.add_argument(
        "--option", nargs="*", default=[], help="DiscoveryConfig fields KEY=VALUE (numbers)"
    )
    args = parser.parse_args()
    try:  # a bad option fails here, before a model loads
        DiscoveryConfig().with_option_strings(args.option)
    except ValueError as err:
        parser.error(str(err))
    if args.markdown:
        print(markdown())
        return
    if not args.model or not stored(DOCS / args.model / "circuit.graphml").is_file():
        parser.error(f"--model needs a saved P0 run in {DOCS}/<model>/circuit.graphml")
    path = OUT / f"{args.model}.json"
    ctx = multiprocessing.get_context("fork")
    for method in args.methods:
        with ctx.Pool(1) as pool:
            row = pool.apply(
                run_method, (args.model, method, args.texts, args.checkpoint, args.option)
            )
        # read just before writing: another run of this script may have added its rows meanwhile
        doc = (
            json.loads(path.read_text()) if path.is_file() else {"model": args.model, "methods": []}
        )
        doc["methods"] = [r for r in doc["methods"] if r["method"] != method] + [row]
        doc["texts"] = args.texts
        OUT.mkdir(parents=True, exist_ok=True)
        write_json(path, doc)
        print(_row(args.model, row), flush=True)


if __name__ == "__main__":
    main()
