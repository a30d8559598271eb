"""MIB's held-out areas of saved IOI runs with their bootstrap intervals, for runs saved before
the intervals were: each run's held-out pairs made again from its record (checked against the
hash of the pairs it recorded), its edges ranked from its importance file, MIB's ten circuits of
each ranking judged again on those pairs (their edge counts and areas must match the run's),
and CPR / CMD written with their 95 % intervals over the pairs (the run's own n_boot and seed)
to RUN/area_intervals.json, whose provenance names this command and the run re-judged.

    .venv/bin/python scripts/mib_intervals.py docs/mib/runs/smollm2-135m-s2_io_flip-eap_ig-100 \\
        --importances /tmp/mibruns          # ROOT/<run name>/importances.mib.json

The importance files (9 MB and more) are not committed; without --importances each run's own
folder must hold its file.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

AREA_TOLERANCE = 2e-3
"""How far a re-judged area may lie from the run's own (float noise of other batch shapes)."""


def held_out_pairs(model, summary: dict):
    """The run's held-out pairs, made again as `scripts/mib_ioi.py` made them; refused unless
    all its pairs hash as the run recorded."""
    from circuits.discovery.protocol import protocol
    from circuits.provenance import texts_identity
    from circuits.tasks.ioi import ioi_pairs

    record, command = summary["provenance"], summary["provenance"]["command"]
    seed = int(command[command.index("--pair-seed") + 1]) if "--pair-seed" in command else 0
    texts = record["texts"]
    n_fit, n = len(texts["fit_indices"]), texts["n"]
    proto = protocol(summary["protocol"])
    pairs, _ = ioi_pairs(model, n, seed=seed, partner=summary["partner"], pad=proto.pad,
                         bos=proto.bos)  # fmt: skip
    again = texts_identity(pairs.rows(), split=(range(n_fit), range(n_fit, n)))
    if again["sha256"] != texts["sha256"]:
        raise SystemExit(f"the pairs made again do not hash as the run's ({texts['sha256']})")
    return pairs[n_fit:]


def intervals(model, summary: dict, importances: Path) -> dict:
    """CPR and CMD on the run's held-out pairs with their intervals (see the module docstring)."""
    import torch

    from circuits.discovery.areas import mib_scores
    from circuits.discovery.chunk_runner import judging_runner
    from circuits.discovery.config import RankBy
    from circuits.discovery.evaluation import evaluate
    from circuits.discovery.protocol import read_mib_scores

    settings = summary["provenance"]["settings"]
    held = held_out_pairs(model, summary)
    runner = judging_runner(model, held, batch_size=settings["batch_size"],
                            kv_inputs=settings["kv_inputs"], seed=settings["seed"])  # fmt: skip
    scores = read_mib_scores(importances, runner.space)
    empty = evaluate(runner, torch.zeros(1, runner.space.n_edges, dtype=torch.bool))[0]
    direction = 1.0 if runner.clean.metric.mean() >= empty.mean() else -1.0
    key = {RankBy.SIGNED: scores * direction, RankBy.ABS: scores.abs()}
    again = mib_scores(runner, key, empty, batch_size=settings["batch_size"],
                       n_boot=settings["n_boot"], seed=settings["seed"])  # fmt: skip
    out = {"direction": direction, "n_boot": settings["n_boot"], "seed": settings["seed"]}
    ran = summary["mib"]["heldout"]
    for rank, area in (("signed", "cpr"), ("abs", "cmd")):
        n, value = again[f"n_edges_{rank}"], again[area]
        if n != ran[f"n_edges_{rank}"] or abs(value - ran[area]) > AREA_TOLERANCE:
            raise SystemExit(f"{area}: re-judged {value:.4f} on {n} edges, the run had "
                             f"{ran[area]:.4f} on {ran[f'n_edges_{rank}']}")  # fmt: skip
        out[f"{area}_heldout"], out[f"{area}_heldout_ci"] = value, again[f"{area}_ci"]
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", help="folders scripts/mib_ioi.py wrote")
    p.add_argument("--importances", help="ROOT holding <run name>/importances.mib.json")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()

    import torch

    from circuits._io import atomic_write
    from circuits.models import load_model
    from circuits.provenance import code_identity, provenance, stamped

    code_identity()  # the code's state now, before any commit made while this runs
    torch.set_num_threads(args.threads)
    for run in map(Path, args.runs):
        summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
        root = Path(args.importances) / run.name if args.importances else run
        importances = root / "importances.mib.json"
        if not importances.is_file():
            raise SystemExit(f"{importances}: no importance file; give --importances ROOT")
        model = load_model(summary["model"])
        out = intervals(model, summary, importances)
        record = provenance(settings={"run": str(run), "importances": str(importances)})
        record["rejudged"] = {"folder": str(run), "original": summary["provenance"]}
        with atomic_write(run / "area_intervals.json") as fh:
            fh.write(json.dumps(stamped(out, record), indent=1) + "\n")
        print(f"{run.name}: CPR {out['cpr_heldout']:.3f} {out['cpr_heldout_ci']}, CMD "
              f"{out['cmd_heldout']:.4f} {out['cmd_heldout_ci']}")  # fmt: skip


if __name__ == "__main__":
    main()
