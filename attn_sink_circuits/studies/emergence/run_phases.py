"""The phase measurements over a training run's checkpoints (`measure_run`) and on a final
model (`measure_final`), judged by the phase rule (`attn_sink_circuits.studies.emergence.phase_rule`)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from attn_sink_circuits.studies.emergence.config import PhaseRuleConfig
from attn_sink_circuits.studies.emergence.phase_rule import run_verdicts
from attn_sink_circuits.studies.emergence.phases import measure_model

N_TEXTS = 32
"""Held-out windows per checkpoint (each the run's context long, Gu et al. use 64 tokens)."""


def run_settings(run: Path) -> dict:
    path = Path(run) / "run.json"
    if not path.is_file():
        raise ValueError(f"{run} has no run.json: pass a folder written by train_lm")
    return json.loads(path.read_text(encoding="utf-8"))


def run_windows(run: Path, corpus, n_texts: int = N_TEXTS):
    """The run's held-out windows: its context, its <bos> setting, evenly spaced."""
    from attn_sink_circuits.training.train import heldout_windows

    doc = run_settings(run)
    return heldout_windows(corpus, doc["model"]["n_ctx"], n_texts, doc["train"].get("bos", True))


def checkpoint_rows(run: Path, tokens, config: PhaseRuleConfig, progress: bool) -> list[dict]:
    """One measured row per checkpoint of `run`, in step order."""
    from transformers import LlamaForCausalLM

    folders = sorted((Path(run) / "checkpoints").glob("step_*"))
    rows = []
    for folder in folders:
        if not (folder / "config.json").is_file():
            continue
        training = json.loads((folder / "training.json").read_text(encoding="utf-8"))
        model = LlamaForCausalLM.from_pretrained(folder, attn_implementation="eager")
        row = {k: training.get(k) for k in ("step", "tokens", "heldout_loss")}
        rows.append(row | measure_model(model, tokens, config))
        if progress:
            print(f"[phases] {Path(run).name} step {row['step']}: Gu rate "
                  f"{rows[-1]['gu_rate'][0]:.3f}, jump block {rows[-1]['jump_block']}",
                  file=sys.stderr, flush=True)  # fmt: skip
    if not rows:
        raise ValueError(f"{run}/checkpoints holds no finished checkpoint; train the run first")
    return sorted(rows, key=lambda r: r["step"])


def measure_run(run: str | Path, corpus, config: PhaseRuleConfig = PhaseRuleConfig(),  # noqa: B008
                n_texts: int = N_TEXTS, progress: bool = True) -> dict:  # fmt: skip
    """Every checkpoint of `run` measured on `n_texts` held-out windows of `corpus`, and what
    the phase rule says of the series."""
    t0 = time.perf_counter()
    run = Path(run)
    doc = run_settings(run)
    rows = checkpoint_rows(run, run_windows(run, corpus, n_texts), config, progress)
    steps = [r["step"] for r in rows]
    losses = [r["heldout_loss"] for r in rows]
    verdicts = run_verdicts(rows, steps, losses, doc["model"]["n_layers"], config)
    return {
        "run": run.name,
        "settings": doc,
        "rule": config.to_dict(),
        "n_texts": n_texts,
        "rows": rows,
        "summary": verdicts,
        "seconds": time.perf_counter() - t0,
    }


def measure_final(key: str, config: PhaseRuleConfig = PhaseRuleConfig(),  # noqa: B008
                  n_texts: int = N_TEXTS, n_tokens: int = 64) -> dict:  # fmt: skip
    """One released model (`circuits.load_model` key or folder) measured like a checkpoint, on
    `n_texts` windows of the standard library's held-out files (`<bos>` first when the model
    prepends one): its phase by the rule and the row."""
    from attn_sink_circuits.discovery.texts import token_rows
    from attn_sink_circuits.models import load_model
    from attn_sink_circuits.studies.emergence.phase_rule import checkpoint_phase, place
    from attn_sink_circuits.studies.emergence.series import stdlib_texts

    model = load_model(key)
    info = model.circuits_info
    first = model.tokenizer.bos_token_id if info.prepend_bos else None
    tokens = token_rows(model, stdlib_texts(n_texts, n_tokens), n_tokens, first=first)
    row = measure_model(model, tokens, config)
    n_layers = len(row["sink_heads_by_layer"])
    return {
        "model": key,
        "source": info.source,
        "bos_first": first is not None,
        "n_layers": n_layers,
        "phase": checkpoint_phase(row, n_layers, config),
        "place_state": place(row["jump_block"], n_layers, config),
        "place_attention": place(row["onset_layer"], n_layers, config),
        "row": row,
    }
