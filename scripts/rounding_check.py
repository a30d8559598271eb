"""What 4- and 8-bit rounding changes on a model trained here in fp32 with a P0 sink (issue 57,
item 5): the checkpoint and its Q4_0, Q4_1 and Q8_0 roundings (`gguf` block arithmetic,
dequantised as the loader does; vectors and norm weights stay F32), each measured for its P0
mass, Gu's per-text Sink^0.3 rate, the P0 state's size, the P0 edge circuit (each circuit judged
on every model) and the claims verdicts. Writes a run folder (summary.json with provenance, one
CSV per table, the Markdown tables docs/ground_truth/README.md includes):

    OMP_NUM_THREADS=1 python scripts/rounding_check.py CHECKPOINT_FOLDER
    OMP_NUM_THREADS=1 python scripts/rounding_check.py --smollm2   # the released SmolLM2,
        # as loaded and rounded again to Q4_0 and Q8_0 (each tensor to the type its file uses)

Texts: windows of the held-out part of the standard-library corpus (never trained on) for a
checkpoint; the P0 tracer's texts for SmolLM2.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

OUT = ROOT / "docs" / "ground_truth" / "rounding_trained"
SMOLLM2_OUT = ROOT / "docs" / "ground_truth" / "rounding_smollm2"
SMOLLM2 = "smollm2-135m"


def _row(cells) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _table(header: list[str], rows: list[list]) -> str:
    return "\n".join([_row(header), _row(["---"] * len(header)), *map(_row, rows)]) + "\n"


def _ci(value: float, low: float, high: float, fmt: str = ".3f") -> str:
    return f"{value:{fmt}} [{low:{fmt}}, {high:{fmt}}]"


def sinks_md(check) -> str:
    header = ["weights", "largest tensor change (relative RMS)", "P0 mass",
              "Sink^0.3 per text [95 %]", "P0 norm / median (largest, block)",
              "P0 max \\|entry\\| / median", "massive block"]  # fmt: skip
    rows = [[r.weights, f"{r.largest_tensor_change:.4f}", f"{r.p0_mass:.4f}",
             _ci(r.gu_rate, r.gu_rate_low, r.gu_rate_high),
             f"{r.p0_norm_ratio_max:.3f} ({r.p0_norm_ratio_block})",
             f"{r.p0_entry_ratio_max:.2f}",
             "none" if r.massive_block is None or r.massive_block != r.massive_block
             else int(r.massive_block)] for r in check.sinks.itertuples()]  # fmt: skip
    return _table(header, rows)


def circuits_md(check) -> str:
    names = list(check.circuits.weights)
    cross = {(r.circuit_of, r.judged_on): r for r in check.cross.itertuples()}
    header = ["circuit of", "edges (of all)", f"Jaccard with {names[0]} (shared)",
              *[f"faithfulness on {n} [95 %]" for n in names]]  # fmt: skip
    rows = []
    for r in check.circuits.itertuples():
        cells = [_ci(c.faithfulness, c.faithfulness_low, c.faithfulness_high) for c in
                 (cross[r.weights, n] for n in names)]  # fmt: skip
        rows.append([r.weights, f"{r.n_edges} ({r.n_edges_total})",
                     f"{r.jaccard_with_reference:.3f} ({r.shared_with_reference})", *cells])  # fmt: skip
    return _table(header, rows)


def claims_md(check) -> str:
    names = list(check.sinks.weights)
    table = check.claims
    header = ["claim", *names]
    rows = []
    for claim, group in table.groupby("claim", sort=False):
        by = {r.weights: r for r in group.itertuples()}
        ref = by[names[0]].verdict
        rows.append([claim, *[_verdict(by[n], n != names[0] and by[n].verdict != ref)
                              for n in names]])  # fmt: skip
    return _table(header, rows)


def _verdict(r, changed: bool) -> str:
    value = "" if r.value != r.value else f" ({r.value:.3g})"
    text = f"{r.verdict}{value}"
    return f"**{text}**" if changed else text


def checkpoint_paths(folder: Path, kinds: list[str], work: Path) -> dict:
    from attn_sink_circuits.studies.rounding import rounded_copies

    return rounded_copies(folder, kinds, work)


def smollm2_paths(kinds: list[str]) -> dict:
    """SmolLM2 as the loader gives it, and its dequantised weights rounded again, each tensor to
    the type its file uses (`file_plan`; the rounded folders are cached)."""
    from attn_sink_circuits.models.rounding import cached_rounding

    return {"as loaded": SMOLLM2, **{kind: cached_rounding(SMOLLM2, kind) for kind in kinds}}


def checkpoint_record(folder: Path) -> dict:
    """What names the checkpoint: its training step and tokens, and its weights' hash."""
    import hashlib

    training = folder / "training.json"
    doc = json.loads(training.read_text(encoding="utf-8")) if training.is_file() else {}
    digest = hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    return {"step": doc.get("step"), "tokens": doc.get("tokens"), "weights_sha256": digest,
            "n_layers": config.get("num_hidden_layers"), "d_model": config.get("hidden_size")}  # fmt: skip


def texts_for(smollm2: bool, config) -> list[str]:
    need = config.n_texts + config.edge.n_fit + config.edge.n_heldout
    if smollm2:
        from attn_sink_circuits.discovery import DEFAULT_TEXTS, read_texts

        return read_texts(DEFAULT_TEXTS)
    from attn_sink_circuits.studies.emergence.series import heldout_texts

    return heldout_texts("stdlib", need, max(config.n_tokens, config.edge.n_tokens))


def run(args, config) -> Path:
    from attn_sink_circuits.runs.provenance import provenance
    from attn_sink_circuits.runs.record_paths import portable_path
    from attn_sink_circuits.studies.rounding import rounding_check

    started = time.time()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="rounding-") as work:
        if args.smollm2:
            paths, model = smollm2_paths(args.kinds), {"model": SMOLLM2}
        else:
            paths = checkpoint_paths(args.checkpoint, args.kinds, Path(work))
            name = args.name or portable_path(args.checkpoint, keep=4)
            model = {"checkpoint": name,
                     **checkpoint_record(args.checkpoint)}  # fmt: skip
        texts = texts_for(args.smollm2, config)
        check = rounding_check(paths, texts, config, progress=True)
    source = "P0 tracer texts" if args.smollm2 else "held-out standard-library windows"
    settings = {**model, "kinds": list(args.kinds), "texts": source, **config.to_dict()}
    record = provenance(settings=settings, started=started)
    out = args.out or (SMOLLM2_OUT if args.smollm2 else OUT)
    tables = {"sinks.md": sinks_md(check), "circuits.md": circuits_md(check),
              "claims.md": claims_md(check)}  # fmt: skip
    check.save(out, record, tables)
    print(tables["sinks.md"], tables["circuits.md"], tables["claims.md"], sep="\n")
    print(f"wrote {out} ({time.time() - started:.0f} s)")
    return out


def main(argv=None) -> int:
    from attn_sink_circuits.studies.rounding import RoundingCheckConfig

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", type=Path, nargs="?",
                        help="an fp32 model folder (a training checkpoint)")  # fmt: skip
    parser.add_argument("--smollm2", action="store_true",
                        help="the released SmolLM2 instead, rounded again (Q4_0, Q8_0)")  # fmt: skip
    parser.add_argument("--kinds", nargs="+", choices=("q4_0", "q4_1", "q8_0"), default=None)
    parser.add_argument("--out", type=Path, default=None,
                        help=f"run folder (default {OUT.relative_to(ROOT)}, or "
                        f"{SMOLLM2_OUT.relative_to(ROOT)} with --smollm2)")  # fmt: skip
    parser.add_argument("--name", default=None,
                        help="what the checkpoint is, as the record names it (e.g. the training "
                        "run and step it was copied from; default: its folder's path)")  # fmt: skip
    parser.add_argument("--set", nargs="+", default=[], metavar="NAME=VALUE",
                        help="config settings by flat name (e.g. edge_ig_steps=8)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.smollm2 == (args.checkpoint is not None):
        parser.exit(2, "give a checkpoint folder or --smollm2 (one of them)\n")
    if args.checkpoint is not None and not (args.checkpoint / "model.safetensors").is_file():
        parser.exit(2, f"{args.checkpoint}: no model.safetensors there; give a model folder\n")
    args.kinds = args.kinds or (["q4_0", "q8_0"] if args.smollm2 else ["q4_0", "q4_1", "q8_0"])
    try:
        config = RoundingCheckConfig().with_option_strings(args.set)
        config = config.with_options(kinds=tuple(args.kinds))
        run(args, config)
    except ValueError as err:
        parser.exit(2, f"{err}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
