"""Measuring a training run as it goes: each checkpoint, when `train_lm` writes it, is measured
with the phase rule's measurements (`attn_sink_circuits.studies.emergence.phases.phase_row`, Gu's rate counted per
text) on the run's held-out windows, and its row appended to `<run>/phases.jsonl`. The rows are
what a run commits (not the checkpoint weights); a restarted run first measures the checkpoints
it finds without a row."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd

from attn_sink_circuits.studies.emergence.config import PhaseRuleConfig
from attn_sink_circuits.studies.emergence.phases import measure_model
from attn_sink_circuits.studies.emergence.run_phases import N_TEXTS, run_windows

ROWS = "phases.jsonl"


def read_rows(run: str | Path) -> list[dict]:
    """The measured rows of `run`, one per step, in step order (a line cut short by a kill is
    skipped: its checkpoint is measured again)."""
    path = Path(run) / ROWS
    if not path.is_file():
        return []
    rows = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        rows[row["step"]] = row
    return [rows[s] for s in sorted(rows)]


def _ends_with_newline(path: Path) -> bool:
    """Whether the file's last byte is a newline (an empty file counts as ending cleanly),
    read from its end, not whole."""
    with open(path, "rb") as fh:
        if fh.seek(0, 2) == 0:
            return True
        fh.seek(-1, 2)
        return fh.read(1) == b"\n"


class CheckpointWatch:
    """A `train_lm` checkpoint hook: measures the checkpoint folder it is given and appends
    its row to `<run>/phases.jsonl`."""

    def __init__(self, run: str | Path, corpus, config: PhaseRuleConfig = PhaseRuleConfig(),  # noqa: B008
                 n_texts: int = N_TEXTS) -> None:  # fmt: skip
        self.run, self.config, self.corpus, self.n_texts = Path(run), config, corpus, n_texts
        self.tokens = None  # read at the first checkpoint: train_lm writes run.json first
        self.done = {r["step"] for r in read_rows(self.run)}

    def __call__(self, folder: Path, training: dict) -> None:
        from transformers import LlamaForCausalLM

        if training["step"] in self.done:
            return
        t0 = time.perf_counter()
        if self.tokens is None:
            self.tokens = run_windows(self.run, self.corpus, self.n_texts)
        model = LlamaForCausalLM.from_pretrained(folder, attn_implementation="eager")
        row = {k: training.get(k) for k in ("step", "tokens", "heldout_loss")}
        row |= measure_model(model, self.tokens, self.config)
        row["measure_seconds"] = time.perf_counter() - t0
        path = self.run / ROWS
        cut = path.is_file() and not _ends_with_newline(path)  # a kill mid-line
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(("\n" if cut else "") + json.dumps(row) + "\n")
        self.done.add(row["step"])

    def catch_up(self) -> int:
        """Measure the run's finished checkpoints that have no row; returns how many."""
        n = 0
        for folder in sorted((self.run / "checkpoints").glob("step_*")):
            meta = folder / "training.json"
            if meta.is_file() and (folder / "config.json").is_file():
                training = json.loads(meta.read_text(encoding="utf-8"))
                n += training["step"] not in self.done
                self(folder, training)
        return n


def checkpoints_frame(rows: list[dict], phases: list[str]) -> pd.DataFrame:
    """One line a checkpoint: loss, Gu's rates (per text, with intervals; the window-mean
    count beside where measured), the strongest head, the all-head P0 mass, the jump block,
    the onset layer, the most-attended position per layer and the rule's phase."""
    recs = []
    for r, phase in zip(rows, phases, strict=True):
        g, p = r["gu_rate"], r["gu_rate_p1"]
        recs.append({
            "step": r["step"], "tokens": r["tokens"], "heldout_loss": r["heldout_loss"],
            "gu_rate": g[0], "gu_rate_lo": g[1], "gu_rate_hi": g[2],
            "gu_rate_window_mean": r.get("gu_rate_window_mean", [None])[0],
            "gu_rate_p1": p[0], "gu_rate_p1_lo": p[1], "gu_rate_p1_hi": p[2],
            "all_head_p0_mass": r["all_head_p0_mass"], "max_head_alpha0": r["max_head_alpha0"],
            "jump_block": r["jump_block"], "onset_layer": r["onset_layer"],
            "top_positions": " ".join(map(str, r["top_position_by_layer"])), "phase": phase,
        })  # fmt: skip
    return pd.DataFrame(recs)
