"""This library side by side with the reference implementation of MIB's circuit track (Hanna et
al.'s `hannamw/EAP-IG` at the commit `hannamw/MIB-circuit-track` pins, and MIB's evaluation),
on the same weights, the same pairs and the same graph.

    .venv/bin/python scripts/mib_reference.py [--device cpu] [--model smollm2-135m]
        [--n-pairs 8] [--steps 5] [--methods eap eap_ig_inputs eap_ig_activations]
        [--ig-input-run full|mib_code]
        [--ref /tmp/mibref] [--out runs/mib_reference] [--threads 1]

Setup of the reference (its own environment; nothing of it enters this repository):

    git clone <EAP-IG> $REF/EAP-IG && git -C $REF/EAP-IG checkout 7af394a   # MIB's submodule
    git clone <MIB-circuit-track> $REF/MIB-circuit-track
    python3 -m venv $REF/.venv && $REF/.venv/bin/pip install torch==2.13.0 \
        transformer-lens==2.16.1 transformers==4.51.3 datasets==3.2.0 "pyarrow<19" tabulate

Pairs: this library's IOI prompts with MIB's s2_io_flip partner, padded (MIB's own IOI data set
is on the Hugging Face hub, `mib-bench/ioi`, out of reach here), written as MIB's EAPDataset CSV.
Graph: MIB's (k / v per query head; `kv_inputs="ungrouped"` here). Per method each side runs in
its own process (`--side ours` here, `scripts/mib_reference_worker.py` there): attribution wall
time and CPU time (the machine is shared: CPU seconds of one thread are the fair measure), the
process's peak RSS (model load included) and its RSS after loading; the scores
(mean over pairs, MIB's sign) compared edge by edge: Spearman, top-k overlap (by |score|), max
|difference| over the largest |score|. Then MIB's own evaluation (`evaluate_area_under_curve`)
scores this library's exported eap_ig_inputs file: CPR / CMD and f at every size, beside this
library's `mib_curve` on the same pairs. Printed as a table and written to OUT/side_by_side.json.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from attn_sink_circuits.discovery.config import INPUT_RUNS

MIB_NAMES = {
    "eap": "EAP",
    "eap_ig_inputs": "EAP-IG-inputs",
    "eap_ig_activations": "EAP-IG-activations",
}
HERE = Path(__file__).resolve()


def make_pairs(model, args):
    from attn_sink_circuits.studies.ioi.prompts import ioi_pairs

    return ioi_pairs(model, args.n_pairs, seed=args.seed, partner="s2_io_flip", pad=True, bos=True)


def our_scores(args) -> dict:
    """This library's side of one method (run in its own process)."""
    import resource

    import torch

    from attn_sink_circuits.discovery import attribution as at
    from attn_sink_circuits.discovery.forward import EdgeRunner
    from attn_sink_circuits.graph.eap_ig import eap_ig_dict, shape_of
    from attn_sink_circuits.models import load_model

    torch.set_num_threads(args.threads)
    model = load_model(args.model, device=args.device)
    pairs, _ = make_pairs(model, args)
    rss_load = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0, c0 = time.perf_counter(), time.process_time()
    runner = EdgeRunner(model, pairs, None, positions=None, ablation="resample",
                        kv_inputs="ungrouped")  # fmt: skip
    fn = {"eap": lambda r: at.eap(r),
          "eap_ig_inputs": lambda r: at.eap_ig_inputs(r, args.steps, grid="left"),
          "eap_ig_activations": lambda r: at.eap_ig_activations(
              r, args.steps, input_run=args.ig_input_run)}[args.method]  # fmt: skip
    values = fn(runner).mean(0)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    edges = {n: (float(v), False) for n, v in zip(runner.space.edge_names(), values, strict=True)}
    scores = eap_ig_dict(edges, shape_of(model), 1)
    out = {"seconds": seconds, "cpu_seconds": cpu, "rss_after_load_mb": rss_load, "n_edges": runner.space.n_edges,
           "tokens": pairs.clean.tolist(), "last": pairs.last.tolist(),
           "scores": {k: e["score"] for k, e in scores["edges"].items()}}  # fmt: skip
    if args.device.startswith("cuda"):
        out["cuda_peak_mb"] = torch.cuda.max_memory_allocated() / 2**20
    if args.method == "eap_ig_inputs":
        out["mib"] = our_curve(runner, values)
        Path(args.out).with_suffix(".importances.json").write_text(json.dumps(scores))
    return out


def our_curve(runner, values) -> dict:
    """This library's MIB curves (signed: CPR, |score|: CMD) of `values` on the runner's pairs."""
    from attn_sink_circuits.discovery.areas import MIB_FRACTIONS, mib_areas, mib_curve
    from attn_sink_circuits.discovery.evaluation import empty_metric

    empty = empty_metric(runner)
    out = {}
    for key, rank, area in (("cpr", values, 0), ("cmd", values.abs(), 1)):
        counts, f, _ = mib_curve(runner, rank, empty)
        out[key] = {"area": mib_areas(MIB_FRACTIONS, f)[area], "faithfulness": f,
                    "edge_counts": counts}  # fmt: skip
    return out


def run_side(cmd: list[str], out: Path) -> dict:
    """Run one side's process; its JSON result with wall time and peak RSS (MB) added."""
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} ... failed (status {status})")
    result = json.loads(out.read_text())
    result["process_seconds"] = time.perf_counter() - t0
    result["peak_rss_mb"] = usage.ru_maxrss / 1024
    return result


def write_csv(args, out: Path) -> tuple[Path, dict]:
    """The pairs as MIB's EAPDataset reads them (task 'ioi'), and the run's provenance record
    (model and weights hash, the pairs' token rows hashed, settings, code, command)."""
    from attn_sink_circuits.models import load_model
    from attn_sink_circuits.runs.provenance import provenance

    model = load_model(args.model)
    pairs, prompts = make_pairs(model, args)
    path = out / "pairs.csv"
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["clean", "corrupted", "correct_idx", "incorrect_idx"])
        for p, a, b in zip(prompts, pairs.answer.tolist(), pairs.wrong.tolist(), strict=True):
            w.writerow([p.clean, p.corrupt, a, b])
    return path, provenance(model, pairs.rows(), settings=vars(args), source=path)


def compare(ours: dict, ref: dict, batch: int, ks=(100, 1000)) -> dict:
    """Edge by edge. The reference's scores are its loss's batch mean attributed and then
    divided by the number of pairs again (`scores /= total_items`): the mean over pairs divided
    by the batch size, here one batch of every pair, so they are multiplied back by it."""
    from scipy.stats import spearmanr

    names = list(ref["scores"])
    a = batch * np.array([ref["scores"][n] for n in names])
    b = np.array([ours["scores"][n] for n in names])
    out = {"n_edges": len(names), "spearman": float(spearmanr(a, b).statistic),
           "max_abs_diff": float(np.abs(a - b).max()), "max_abs_score": float(np.abs(a).max())}  # fmt: skip
    out["max_diff_share"] = out["max_abs_diff"] / out["max_abs_score"]
    for k in ks:
        top_a, top_b = set(np.argsort(-np.abs(a))[:k]), set(np.argsort(-np.abs(b))[:k])
        out[f"top{k}_overlap"] = len(top_a & top_b) / k
    return out


def side_by_side(args, out: Path, pairs_csv: Path) -> dict:
    ref_py = Path(args.ref) / ".venv" / "bin" / "python"
    folder = Path.home() / ".cache" / "circuits" / "models" / args.model
    common = ["--device", args.device, "--threads", str(args.threads), "--steps", str(args.steps)]
    rows = {}
    for method in args.methods:
        mine, theirs = out / f"ours_{method}.json", out / f"ref_{method}.json"
        ours = run_side([sys.executable, str(HERE), "--side", "ours", "--method", method,
                         "--model", args.model, "--n-pairs", str(args.n_pairs), "--seed",
                         str(args.seed), "--out", str(mine), "--ig-input-run",
                         args.ig_input_run, *common], mine)  # fmt: skip
        ref = run_side([str(ref_py), str(HERE.with_name("mib_reference_worker.py")), "--ref",
                        args.ref, "--folder", str(folder), "--pairs", str(pairs_csv),
                        "--method", MIB_NAMES[method], "--batch", str(args.n_pairs),
                        "--out", str(theirs), *common], theirs)  # fmt: skip
        rows[method] = {"ours": _light(ours), "ref": _light(ref),
                        **compare(ours, ref, args.n_pairs)}  # fmt: skip
        rows[method]["same_tokens"] = _same_tokens(ours, ref)
    if "eap_ig_inputs" in args.methods and not args.no_evaluation:
        evaluated = out / "ref_evaluation.json"
        importances = (out / "ours_eap_ig_inputs.json").with_suffix(".importances.json")
        rows["mib_evaluation"] = run_side(
            [str(ref_py), str(HERE.with_name("mib_reference_worker.py")), "--ref", args.ref,
             "--folder", str(folder), "--pairs", str(pairs_csv), "--evaluate", str(importances),
             "--batch", str(args.n_pairs), "--out", str(evaluated), *common], evaluated)  # fmt: skip
        rows["mib_evaluation"]["ours"] = json.loads((out / "ours_eap_ig_inputs.json").read_text())[
            "mib"
        ]
    return rows


def _light(side: dict) -> dict:
    return {k: v for k, v in side.items() if k not in ("scores", "tokens", "last", "mib")}


def _same_tokens(ours: dict, ref: dict) -> bool:
    """The reference tokenised the pairs as this library did (its rows padded to the batch's
    longest; ours likewise)."""
    theirs = [row for batch in ref["tokens"] for row in batch]
    return all(a[: n + 1] == b[: n + 1] for a, b, n in zip(ours["tokens"], theirs, ours["last"],
                                                          strict=True))  # fmt: skip


def show(rows: dict, args) -> None:
    print(f"model {args.model}, {args.n_pairs} IOI pairs (s2_io_flip, padded), {args.steps} IG "
          f"steps (eap_ig_activations input runs: {args.ig_input_run}), "
          f"device {args.device}, {args.threads} thread(s)")  # fmt: skip
    print(f"{'method':<20}{'edges':>8}{'Spearman':>10}{'top100':>8}{'top1000':>8}"
          f"{'max|d|/max|s|':>14}{'ref cpu':>9}{'ours cpu':>9}{'speed-up':>9}"
          f"{'ref MB':>8}{'ours MB':>8}{'tokens':>7}")  # fmt: skip
    for m in args.methods:
        r = rows[m]
        o, f = r["ours"], r["ref"]
        print(f"{m:<20}{r['n_edges']:>8}{r['spearman']:>10.6f}{r['top100_overlap']:>8.2f}"
              f"{r['top1000_overlap']:>8.2f}{r['max_diff_share']:>14.2e}{f['cpu_seconds']:>9.1f}"
              f"{o['cpu_seconds']:>9.1f}{f['cpu_seconds'] / o['cpu_seconds']:>8.1f}x"
              f"{f['peak_rss_mb']:>8.0f}"
              f"{o['peak_rss_mb']:>8.0f}{'same' if r['same_tokens'] else 'DIFF':>7}")  # fmt: skip
    if "mib_evaluation" in rows:
        e = rows["mib_evaluation"]
        print("this library's eap_ig_inputs file, scored on the same pairs:")
        print(
            f"  MIB's evaluation code: CPR {e['cpr']['area_under']:.4f}, CMD "
            f"{e['cmd']['area_from_1']:.4f} ({e['cpr']['seconds'] + e['cmd']['seconds']:.0f} s)"
        )
        print(
            f"  this library:          CPR {e['ours']['cpr']['area']:.4f}, CMD "
            f"{e['ours']['cmd']['area']:.4f}"
        )
        diff = max(
            abs(a - b)
            for k in ("cpr", "cmd")
            for a, b in zip(e[k]["faithfulness"], e["ours"][k]["faithfulness"], strict=True)
        )
        print(f"  max |f difference| over the 20 circuits: {diff:.2e}")  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--n-pairs", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--methods", nargs="+", default=list(MIB_NAMES), choices=list(MIB_NAMES))
    p.add_argument("--ref", default="/tmp/mibref", help="the reference clones and their venv")
    p.add_argument("--out", default="runs/mib_reference")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--no-evaluation", action="store_true", help="skip MIB's CPR / CMD of our file")
    p.add_argument("--ig-input-run", default="full", choices=INPUT_RUNS,
                   help="this library's eap_ig_activations: full or mib_code (config.IgInputRun)")  # fmt: skip
    p.add_argument("--side", choices=("ours",), help=argparse.SUPPRESS)
    p.add_argument("--method", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.side == "ours":
        Path(args.out).write_text(json.dumps(our_scores(args)))
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    pairs_csv, record = write_csv(args, out)
    rows = side_by_side(args, out, pairs_csv)
    from attn_sink_circuits.runs.provenance import stamped

    doc = stamped({"args": vars(args), **rows}, record)
    (out / "side_by_side.json").write_text(json.dumps(doc, indent=1))
    show(rows, args)


if __name__ == "__main__":
    main()
