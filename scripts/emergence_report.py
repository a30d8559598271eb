"""Issue 37: the compact tables and figures of the measured runs (`scripts/emergence_runs.py`
wrote `ROOT/<run>/phases.json`), for docs/emergence/.

    python scripts/emergence_report.py --root runs/e37 --out docs/emergence/sinks-8l \
        --real docs/emergence/real-models/rows.json

Writes, replaced as a whole: `runs.md` (one row a run: shape, tokens, wall time, final loss,
Gu's rate, formation, locations, the verdicts), `runs.csv`, `overview.json` (the figures over
all runs that the README quotes), `levers.md` (Gu et al.'s levers: Sink^0.3 per weight decay and
learning rate and seed), `claims.md` (seed 001's
predictions, a column per run and per released model of `--real`), and per run `<run>/checkpoints.csv`
(one row a checkpoint), `<run>/maps.csv` (gzip'd when large; layer x step: P0 and position-1 mass, sink heads,
most-attended position; block x step: P0 norm ratio), `<run>/summary.json` and
`<run>/phases.png`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from attn_sink_circuits.runs.io import atomic_folder, write_csv, write_json  # noqa: E402
from attn_sink_circuits.runs.provenance import provenance  # noqa: E402
from attn_sink_circuits.studies.emergence.watch import checkpoints_frame  # noqa: E402

MAPS = {
    "p0_mass_by_layer": "P0 attention mass",
    "p1_mass_by_layer": "position-1 attention mass",
    "sink_heads_by_layer": "sink heads (alpha_0 > 0.3)",
    "p0_norm_ratio": "P0 norm ratio (row 0: embedding)",
}


def maps_frame(doc: dict) -> pd.DataFrame:
    recs = []
    for r in doc["rows"]:
        for key in [*MAPS, "top_position_by_layer"]:
            for i, v in enumerate(r[key]):
                recs.append({"step": r["step"], "map": key, "row": i, "value": v})
    return pd.DataFrame(recs)


SCALES = {"p0_mass_by_layer": (0, 1), "p1_mass_by_layer": (0, 1)}


def _heat(ax, doc: dict, key: str, title: str) -> None:
    data = np.array([r[key] for r in doc["rows"]], dtype=float).T
    heads = (0, doc["settings"]["model"]["n_heads"])
    vmin, vmax = heads if key == "sink_heads_by_layer" else SCALES.get(key, (None, None))
    im = ax.imshow(data, aspect="auto", origin="lower", cmap="viridis", interpolation="nearest",
                   vmin=vmin, vmax=vmax)  # fmt: skip
    steps = [r["step"] for r in doc["rows"]]
    ticks = np.linspace(0, len(steps) - 1, 6).astype(int)
    ax.set_xticks(ticks, [str(steps[t]) for t in ticks])
    ax.set(title=title, xlabel="step (checkpoints evenly drawn)", ylabel="layer / block")
    plt.colorbar(im, ax=ax, fraction=0.046)


def _rates(ax, doc: dict) -> None:
    f = checkpoints_frame(doc["rows"], doc["summary"]["phases"])
    x = np.arange(len(f))
    ax.fill_between(x, f.gu_rate_lo, f.gu_rate_hi, alpha=0.3)
    ax.plot(x, f.gu_rate, label="Gu Sink^0.3 at P0")
    ax.fill_between(x, f.gu_rate_p1_lo, f.gu_rate_p1_hi, alpha=0.3, color="C3")
    ax.plot(x, f.gu_rate_p1, color="C3", label="same at position 1")
    ax.plot(x, f.all_head_p0_mass, color="C2", ls="--", label="all-head P0 mass")
    rule = doc["rule"]
    ax.axhline(rule["formed_rate"], color="k", lw=0.8, ls=":")
    ax.axhline(rule["p1_rate"], color="C3", lw=0.8, ls=":")
    loss = ax.twinx()
    loss.plot(x, f.heldout_loss, color="gray", lw=0.8)
    loss.set_ylabel("held-out loss (gray)")
    ticks = np.linspace(0, len(f) - 1, 6).astype(int)
    ax.set_xticks(ticks, [str(f.step[t]) for t in ticks])
    ax.set(title="rates (95 % intervals over windows)", xlabel="step", ylim=(0, 1))
    ax.legend(fontsize=7, loc="upper left")


def run_figure(doc: dict):
    fig, axes = plt.subplots(2, 3, figsize=(16, 8.5))
    _rates(axes[0, 0], doc)
    for ax, (key, title) in zip(axes.flat[1:], MAPS.items(), strict=False):
        _heat(ax, doc, key, title)
    _heat(axes[1, 2], doc, "top_position_by_layer", "most-attended position")
    fig.suptitle(f"{doc['run']}: phases over training")
    fig.tight_layout()
    return fig


def _layers(at: dict | None) -> str:
    if at is None:
        return "-"
    return f"jump {at['jump_block']}, onset {at['onset_layer']}"


def wall_minutes(run: Path) -> float | None:
    """Minutes from the step-0 checkpoint to the last one being written (a killed and resumed
    run's gap included)."""
    folders = sorted((run / "checkpoints").glob("step_*"))
    if len(folders) < 2:
        return None
    return round((folders[-1].stat().st_mtime - folders[0].stat().st_mtime) / 60, 1)


def run_record(doc: dict, root: Path) -> dict:
    s, settings = doc["summary"], doc["settings"]
    last = doc["rows"][-1]
    return {
        "run": doc["run"], "layers": settings["model"]["n_layers"],
        "d_model": settings["model"]["d_model"], "bos": settings["train"]["bos"],
        "lr": settings["train"]["lr"], "weight_decay": settings["train"]["weight_decay"],
        "seed": settings["train"]["seed"], "tokens": last["tokens"],
        "wall_min": wall_minutes(root / doc["run"]),
        "final_loss": round(last["heldout_loss"], 3),
        "gu_final": "{:.3f} [{:.3f}, {:.3f}]".format(*last["gu_rate"]),
        "max_head_alpha0": round(last["max_head_alpha0"], 3),
        "formation_step": None if s["formation"] is None else s["formation"]["step"],
        "library_rule_step": s["library_sink_step"],
        "layers_first": _layers(s["formation"]), "layers_last": _layers(s["final"]),
        "position_1_steps": " ".join(map(str, s["position_1_steps"])) or "-",
        **s["verdicts"], "settled_step": s["convergence"]["settled_step"],
        "plateau_step": s["convergence"]["plateau_step"],
        "convergence": s["convergence"]["verdict"],
    }  # fmt: skip


def markdown(frame: pd.DataFrame) -> str:
    cols = list(frame.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for rec in frame.astype(object).where(frame.notna(), "-").to_dict(orient="records"):
        lines.append("| " + " | ".join(str(rec[c]) for c in cols) + " |")
    return "\n".join(lines) + "\n"


PREDICTIONS = {
    "mid_layer_first_state": "1. middle first (jump block at formation)",
    "position_1_phase": "2. a position-1 phase (>= 10 % of heads)",
    "final_first_two_state": "3. settles in blocks 0-1 (jump block, last 3)",
    "convergence": "settled = loss plateau",
    "mid_layer_first_attention": "1'. middle first (lowest sink-head layer)",
    "final_first_two_attention": "3'. settles in blocks 0-1 (lowest sink-head layer)",
}


def real_verdicts(real: dict) -> dict[str, str]:
    """A released model's final weights: only the final location can be read (one checkpoint)."""
    from attn_sink_circuits.studies.emergence.config import PhaseRuleConfig
    from attn_sink_circuits.studies.emergence.phase_rule import EARLY, FAILS, HOLDS, has_sink

    formed = has_sink(real["row"], PhaseRuleConfig())
    out = dict.fromkeys(PREDICTIONS, "not testable (final weights only)")
    for key, place in (("final_first_two_state", real["place_state"]),
                       ("final_first_two_attention", real["place_attention"])):  # fmt: skip
        if formed and place is not None:
            out[key] = HOLDS if place == EARLY else FAILS
    return out


def claims_markdown(frame: pd.DataFrame, real: list[dict]) -> str:
    """Seed 001's predictions: a column each, a row per run and per released model."""
    rows = {r["run"]: r for r in frame.to_dict(orient="records")}
    rows |= {m["model"]: real_verdicts(m) for m in real}
    lines = ["| run or model | " + " | ".join(PREDICTIONS.values()) + " |",
             "|" + "---|" * (len(PREDICTIONS) + 1)]  # fmt: skip
    for name, row in rows.items():
        lines.append(f"| {name} | " + " | ".join(str(row[k]) for k in PREDICTIONS) + " |")
    return "\n".join(lines) + "\n"


def overview(docs: list[dict]) -> dict:
    """The figures docs/emergence/README.md quotes, over every run and checkpoint: how many,
    the highest Gu rate and strongest head (with run and step), the final all-head P0 mass's
    range, and the runs in which a sink formed by the rule."""
    rows = [(d["run"], r) for d in docs for r in d["rows"]]
    rate_run, rate_row = max(rows, key=lambda x: x[1]["gu_rate"][0])
    head_run, head_row = max(rows, key=lambda x: x[1]["max_head_alpha0"])
    finals = [d["rows"][-1]["all_head_p0_mass"] for d in docs]
    return {
        "n_runs": len(docs), "n_checkpoints": len(rows),
        "max_tokens": max(d["rows"][-1]["tokens"] for d in docs),
        "max_gu_rate": rate_row["gu_rate"][0], "max_gu_rate_run": rate_run,
        "max_gu_rate_step": rate_row["step"],
        "max_head_alpha0": head_row["max_head_alpha0"], "max_head_alpha0_run": head_run,
        "max_head_alpha0_step": head_row["step"],
        "final_p0_mass_min": min(finals), "final_p0_mass_max": max(finals),
        "final_gu_rate_max": max(d["rows"][-1]["gu_rate"][0] for d in docs),
        "max_gu_rate_p1": max(r["gu_rate_p1"][0] for _, r in rows),
        "runs_above_zero": {
            d["run"]: [r["step"] for r in d["rows"] if r["gu_rate"][0] > 0]
            for d in docs if any(r["gu_rate"][0] > 0 for r in d["rows"])
        },
        "runs_formed": [d["run"] for d in docs if d["summary"]["formation"] is not None],
        "n_runs_formed": sum(d["summary"]["formation"] is not None for d in docs),
    }  # fmt: skip


def levers_markdown(docs: list[dict]) -> str:
    """Gu et al.'s levers at this scale: on the mixed corpus with `<bos>`, per weight decay (at
    lr 0.002) and per learning rate (at weight decay 0.1), each seed's final and peak Sink^0.3
    and its strongest head ever (alpha_0 at P0, any checkpoint)."""
    recs = []
    for d in docs:
        train = d["settings"]["train"]
        if not d["run"].startswith("mix-bos") or train["steps"] != 4000:
            continue
        rows = d["rows"]
        rec = {"seed": train["seed"], "final": rows[-1]["gu_rate"][0],
               "peak": max(r["gu_rate"][0] for r in rows),
               "strongest": max(r["max_head_alpha0"] for r in rows)}  # fmt: skip
        if train["lr"] == 0.002:
            recs.append({"lever": "weight decay", "setting": train["weight_decay"], **rec})
        if train["weight_decay"] == 0.1:
            recs.append({"lever": "learning rate", "setting": train["lr"], **rec})
    lines = ["| lever | setting | seeds | final Sink^0.3 | peak Sink^0.3 | strongest head ever |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    frame = pd.DataFrame(recs).sort_values(["lever", "setting", "seed"])
    for (lever, setting), g in frame.groupby(["lever", "setting"], sort=False):
        cells = [", ".join(f"{v:{fmt}}" for v in g[c]) for c, fmt in
                 (("final", ".3f"), ("peak", ".4f"), ("strongest", ".2f"))]  # fmt: skip
        seeds = ", ".join(map(str, g.seed))
        lines.append(f"| {lever} | {setting:g} | {seeds} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_report(root: Path, out: Path, real: Path | None = None) -> pd.DataFrame:
    docs = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(root.glob("*/phases.json"))]
    if not docs:
        raise ValueError(f"no */phases.json under {root}: run scripts/emergence_runs.py first")
    frame = pd.DataFrame([run_record(d, root) for d in docs])
    settings = {"root": str(root), "out": str(out), "real": str(real) if real else None,
                "runs": [d["run"] for d in docs]}  # fmt: skip
    with atomic_folder(out, {"report": "emergence runs"}, provenance(settings=settings)) as tmp:
        write_csv(tmp / "runs.csv", frame)
        write_json(tmp / "overview.json", overview(docs))
        (tmp / "levers.md").write_text(levers_markdown(docs), encoding="utf-8")
        (tmp / "runs.md").write_text(markdown(frame), encoding="utf-8")
        models = json.loads(real.read_text(encoding="utf-8"))["models"] if real else []
        (tmp / "claims.md").write_text(claims_markdown(frame, models), encoding="utf-8")
        for doc in docs:
            folder = tmp / doc["run"]
            folder.mkdir()
            write_csv(
                folder / "checkpoints.csv", checkpoints_frame(doc["rows"], doc["summary"]["phases"])
            )
            write_csv(folder / "maps.csv", maps_frame(doc), lean=True)
            keep = {k: doc[k] for k in ("run", "settings", "rule", "n_texts", "summary")}
            write_json(folder / "summary.json", keep)
            fig = run_figure(doc)
            fig.savefig(folder / "phases.png", dpi=70)
            plt.close(fig)
    return frame


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--root", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--real", type=Path, help="rows.json of scripts/emergence_real.py")
    args = p.parse_args(argv)
    print(markdown(write_report(args.root, args.out, args.real)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
