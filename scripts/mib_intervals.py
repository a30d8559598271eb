"""MIB's held-out areas of saved IOI runs with their bootstrap intervals, for runs saved before
the intervals were: each run's held-out pairs made again from its record (checked against the
hash of the pairs it recorded), its edges ranked from its importance file, MIB's ten circuits of
each ranking judged again on those pairs (their edge counts and areas must match the run's),
and CPR / CMD written with their 95 % intervals over the pairs (the run's own n_boot and seed)
to RUN/area_intervals.json, whose provenance names this command and the run re-judged.

With `--on OTHER` each run's rankings are judged instead on the held-out pairs of OTHER (a run
of the same model and graph), with the run's judging settings, and written to
RUN/areas_on_<OTHER's name>.json: two runs judged on the same pairs, e.g. 100 against 1,000
attribution pairs with the held-out set held fixed (OTHER's own areas are its summary's).

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


def judged(model, settings: dict, held, importances: Path) -> dict:
    """MIB's scores (`areas.mib_scores`) of the importance file's two rankings on the pairs
    `held`, judged with a run's `settings` (batch size, bootstrap resamples and seed)."""
    from circuits.discovery.areas import mib_scores
    from circuits.discovery.chunk_runner import judging_runner
    from circuits.discovery.config import RankBy
    from circuits.discovery.evaluation import empty_metric
    from circuits.discovery.protocol import read_mib_scores

    runner = judging_runner(model, held, batch_size=settings["batch_size"],
                            kv_inputs=settings["kv_inputs"], seed=settings["seed"])  # fmt: skip
    scores = read_mib_scores(importances, runner.space)
    empty = empty_metric(runner)
    direction = 1.0 if runner.clean.metric.mean() >= empty.mean() else -1.0
    key = {RankBy.SIGNED: scores * direction, RankBy.ABS: scores.abs()}
    out = mib_scores(runner, key, empty, batch_size=settings["batch_size"],
                     n_boot=settings["n_boot"], seed=settings["seed"])  # fmt: skip
    return {"direction": direction, "n_boot": settings["n_boot"], "seed": settings["seed"], **out}


def intervals(model, summary: dict, importances: Path) -> dict:
    """CPR and CMD on the run's held-out pairs with their intervals (see the module docstring)."""
    settings = summary["provenance"]["settings"]
    again = judged(model, settings, held_out_pairs(model, summary), importances)
    out = {k: again[k] for k in ("direction", "n_boot", "seed")}
    ran = summary["mib"]["heldout"]
    for rank, area in (("signed", "cpr"), ("abs", "cmd")):
        n, value = again[f"n_edges_{rank}"], again[area]
        if n != ran[f"n_edges_{rank}"] or abs(value - ran[area]) > AREA_TOLERANCE:
            raise SystemExit(f"{area}: re-judged {value:.4f} on {n} edges, the run had "
                             f"{ran[area]:.4f} on {ran[f'n_edges_{rank}']}")  # fmt: skip
        out[f"{area}_heldout"], out[f"{area}_heldout_ci"] = value, again[f"{area}_ci"]
    return out


def on_other_pairs(model, summary: dict, other: dict, importances: Path) -> dict:
    """The run's areas on `other`'s held-out pairs (see the module docstring): refused unless
    both runs are of one model and graph."""
    for key in ("model", "n_edges_total", "protocol"):
        if summary.get(key) != other.get(key):
            raise SystemExit(
                f"the runs differ in {key} ({summary.get(key)} against {other.get(key)}): "
                "judge on the pairs of a run of the same model and graph"
            )
    settings = summary["provenance"]["settings"]
    out = judged(model, settings, held_out_pairs(model, other), importances)
    texts = other["provenance"]["texts"]
    pairs = {"sha256": texts["sha256"], "heldout_indices": texts["heldout_indices"]}
    areas = {f"{a}_heldout{ci}": out[f"{a}{ci}"] for a in ("cpr", "cmd") for ci in ("", "_ci")}
    return {"pairs_of": other["provenance"]["command"], "pairs": pairs, **areas, "mib": out}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", help="folders scripts/mib_ioi.py wrote")
    p.add_argument("--importances", help="ROOT holding <run name>/importances.mib.json")
    p.add_argument("--on", help="a run folder: judge on its held-out pairs instead")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()

    import torch

    from circuits._io import atomic_write
    from circuits.models import load_model
    from circuits.provenance import code_identity, provenance, stamped

    code_identity()  # the code's state now, before any commit made while this runs
    torch.set_num_threads(args.threads)
    other = None if args.on is None else _summary(Path(args.on))
    for run in map(Path, args.runs):
        summary = _summary(run)
        root = Path(args.importances) / run.name if args.importances else run
        importances = root / "importances.mib.json"
        if not importances.is_file():
            raise SystemExit(f"{importances}: no importance file; give --importances ROOT")
        model = load_model(summary["model"])
        if other is None:
            out, name = intervals(model, summary, importances), "area_intervals.json"
        else:
            out = on_other_pairs(model, summary, other, importances)
            name = f"areas_on_{Path(args.on).name}.json"
        record = provenance(settings={"run": str(run), "importances": str(importances),
                                      "on": args.on})  # fmt: skip
        record["rejudged"] = {"folder": str(run), "original": summary["provenance"]}
        with atomic_write(run / name, "w") as fh:
            fh.write(json.dumps(stamped(out, record), indent=1) + "\n")
        print(f"{run.name} -> {name}: CPR {out['cpr_heldout']:.3f} {out['cpr_heldout_ci']}, "
              f"CMD {out['cmd_heldout']:.4f} {out['cmd_heldout_ci']}")  # fmt: skip


def _summary(run: Path) -> dict:
    path = run / "summary.json"
    if not path.is_file():
        raise SystemExit(f"{path}: not a scripts/mib_ioi.py run folder (no summary.json)")
    return json.loads(path.read_text(encoding="utf-8"))


if __name__ == "__main__":
    main()
