"""`rounding_check`: one model and its roundings side by side. On each: the sink measures, the
P0 edge circuit (the late P0 attention of the reference model's late layers, so every circuit
serves one metric), every circuit judged on every model, the edge Jaccard index of each
rounding's circuit with the reference's, and the claims verdicts with those that change."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from attn_sink_circuits.core.tokens import token_rows
from attn_sink_circuits.runs.io import atomic_folder, write_csv, write_json
from attn_sink_circuits.runs.provenance import stamped
from attn_sink_circuits.studies.rounding.config import RoundingCheckConfig
from attn_sink_circuits.studies.rounding.measure import (
    edge_jaccard,
    judge_on,
    judging_runner,
    p0_circuit,
    relative_change,
    sink_measures,
)

CLAIM_COLUMNS = ["claim", "verdict", "value", "low", "high", "detail"]
"""The columns of a claims row the check keeps."""
CHANGE_COLUMNS = ["weights", "claim", "reference_verdict", "verdict", "reference_value", "value"]
"""The columns of a verdict that differs from the reference's."""


@dataclass
class RoundingCheck:
    """The check's tables, one row per model (`sinks`, `circuits`), per (circuit, model judged
    on) (`cross`), per model and claim (`claims`), per claim whose verdict differs from the
    reference's (`claim_changes`), per circuit edge (`edges`); `facts`: the reference's
    formation and the metric."""

    reference: str
    config: RoundingCheckConfig
    facts: dict
    sinks: pd.DataFrame
    circuits: pd.DataFrame
    cross: pd.DataFrame
    claims: pd.DataFrame
    claim_changes: pd.DataFrame
    edges: pd.DataFrame
    seconds: dict = field(default_factory=dict)

    def summary(self) -> dict:
        return {
            "reference": self.reference, "settings": self.config.to_dict(), **self.facts,
            "sinks": self.sinks.to_dict(orient="records"),
            "circuits": self.circuits.to_dict(orient="records"),
            "cross": self.cross.to_dict(orient="records"),
            "claim_changes": self.claim_changes.to_dict(orient="records"),
            "seconds": self.seconds,
        }  # fmt: skip

    def save(self, folder: str | Path, record: dict, texts: Mapping[str, str] = {}) -> Path:  # noqa: B006 (read only)
        """An atomic run folder: summary.json (stamped with `record`, the provenance), one CSV
        per table and the text files `texts` (file name -> content, e.g. Markdown tables)."""
        with atomic_folder(folder, {"report": "rounding check"}, record) as tmp:
            write_json(tmp / "summary.json", stamped(self.summary(), record))
            for name in ("sinks", "circuits", "cross", "claims", "claim_changes", "edges"):
                write_csv(tmp / f"{name}.csv", getattr(self, name))
            for name, text in texts.items():
                (tmp / name).write_text(text, encoding="utf-8")
        return Path(folder)


def rounding_rows(path: Path) -> list[dict]:
    """The per-tensor rows a rounded folder records (`round_folder`'s rounding.json); none for
    a folder that was not rounded or a registry key."""
    doc = path / "rounding.json" if isinstance(path, Path) else None
    if doc is None or not doc.is_file():
        return []
    return json.loads(doc.read_text(encoding="utf-8"))["tensors"]


def measure_all(models: Mapping[str, object], paths: Mapping, texts: Sequence[str],
                config: RoundingCheckConfig, progress: bool = False) -> tuple[dict, dict, dict]:  # fmt: skip
    """Sink measures and P0 circuit on every model (the first is the reference, whose formation
    block fixes the metric for all): (sink rows, circuits, facts with the metric)."""
    from attn_sink_circuits.patching.metrics import p0_attention
    from attn_sink_circuits.studies.p0.formation import find_formation

    sinks, fits, facts = {}, {}, {}
    for name, model in models.items():
        first = model.tokenizer.bos_token_id
        tokens = token_rows(model, list(texts[: config.n_texts]), config.n_tokens, first=first)
        sinks[name] = sink_measures(model, tokens, config)
        sinks[name]["largest_tensor_change"] = relative_change(rounding_rows(paths[name]))
        if not facts:
            ref = sinks[name]
            formation = find_formation(ref["p0_norm"], ref["p0_norm_ratio"],
                                       jump_factor=config.jump_factor,
                                       massive_ratio=config.massive_ratio)  # fmt: skip
            facts = {"jump_layers": formation.jump_layers, "late_layers": formation.late_layers,
                     "metric": p0_attention(formation.late_layers, 0)}  # fmt: skip
        fits[name] = p0_circuit(model, texts[config.n_texts :], facts["metric"], config.edge, first)
        if progress:
            print(f"{name}: sinks and P0 circuit measured", file=sys.stderr, flush=True)
    return sinks, fits, facts


def cross_table(models: Mapping, fits: Mapping, texts: Sequence[str], metric,
                config: RoundingCheckConfig) -> list[dict]:  # fmt: skip
    """Every circuit judged on every model, on the reference circuit's held-out texts (the
    split is seeded, so every model's held-out texts are the same)."""
    edge_texts = list(texts[config.n_texts :])
    held = next(iter(fits.values())).heldout_items
    rows = []
    for on, model in models.items():
        tokens = token_rows(model, [edge_texts[i] for i in held], config.edge.n_tokens,
                            first=model.tokenizer.bos_token_id)  # fmt: skip
        runner = judging_runner(model, fits[on], tokens, metric, config.edge)
        for of, fit in fits.items():
            rows.append({"circuit_of": of, "judged_on": on,
                         **judge_on(runner, fit.circuit.mask, config.edge)})  # fmt: skip
    return rows


def circuit_rows(fits: Mapping) -> tuple[list[dict], list[dict]]:
    """Per circuit: its size, held-out faithfulness with interval and edge Jaccard with the
    reference's; and one row per circuit edge."""
    ref = next(iter(fits.values())).circuit.mask
    rows, edges = [], []
    for name, fit in fits.items():
        c = fit.circuit
        low, high = c.heldout.faithfulness_ci
        rows.append({"weights": name, "n_edges": c.n_edges, "n_edges_total": len(c.mask),
                     "heldout_faithfulness": c.heldout.faithfulness, "heldout_low": low,
                     "heldout_high": high, "random_faithfulness": c.heldout.random_mean,
                     "jaccard_with_reference": edge_jaccard(c.mask, ref),
                     "shared_with_reference": int((c.mask & ref).sum())})  # fmt: skip
        frame = c.edges_frame()[["sender", "receiver", "estimated_effect", "direct_effect"]]
        edges += [{"weights": name, **r} for r in frame.to_dict(orient="records")]
    return rows, edges


def claim_tables(models: Mapping, texts: Sequence[str], config: RoundingCheckConfig):
    """Every model's claims rows (`studies.claims` on the first `config.claims.n_texts` texts)
    and the rows whose verdict differs from the reference's."""
    from attn_sink_circuits.studies.claims import claims

    frames = []
    for name, model in models.items():
        frame = claims(model, list(texts), config.claims, progress=False).frame()
        frames.append(frame[CLAIM_COLUMNS].assign(weights=name))
    table = pd.concat(frames, ignore_index=True)
    ref = table[table.weights == frames[0].weights.iloc[0]].set_index("claim")
    changed = [
        {"weights": r.weights, "claim": r.claim, "reference_verdict": ref.verdict[r.claim],
         "verdict": r.verdict, "reference_value": ref.value[r.claim], "value": r.value}
        for r in table.itertuples() if r.verdict != ref.verdict[r.claim]
    ]  # fmt: skip
    return table, pd.DataFrame(changed, columns=CHANGE_COLUMNS)


def rounding_check(
    paths: Mapping[str, str | Path],
    texts: Sequence[str],
    config: RoundingCheckConfig = RoundingCheckConfig(),  # noqa: B008 (frozen)
    *,
    progress: bool = False,
) -> RoundingCheck:
    """The check on the models at `paths` (name -> model folder or registry key; the first is
    the reference, e.g. `rounded_copies`' "fp32"), on `texts`: the first `config.n_texts` for
    the sink measures and the claims, the rest for the edge circuit's fit and held-out split.
    With `progress`, a line on stderr as each model's sinks and circuit are measured."""
    import time

    from attn_sink_circuits.models import load_model

    need = config.n_texts + config.edge.n_fit + config.edge.n_heldout
    if len(texts) < need:
        raise ValueError(f"{len(texts)} texts given, {need} needed (n_texts + edge n_fit + "
                         "edge n_heldout); give more texts or lower these")  # fmt: skip
    t0 = time.perf_counter()
    models = {name: load_model(p) for name, p in paths.items()}
    sinks, fits, facts = measure_all(models, paths, texts, config, progress)
    t1 = time.perf_counter()
    cross = cross_table(models, fits, texts, facts["metric"], config)
    t2 = time.perf_counter()
    circuits, edges = circuit_rows(fits)
    claims, changes = claim_tables(models, texts, config)
    seconds = {"sinks_and_circuits": t1 - t0, "cross": t2 - t1,
               "claims": time.perf_counter() - t2}  # fmt: skip
    sink_frame = pd.DataFrame([{"weights": n, **r} for n, r in sinks.items()])
    facts = {**facts, "metric": facts["metric"].name}
    return RoundingCheck(
        next(iter(paths)), config, facts, sink_frame, pd.DataFrame(circuits),
        pd.DataFrame(cross), claims, changes, pd.DataFrame(edges), seconds,
    )  # fmt: skip


__all__ = ["RoundingCheck", "rounding_check"]
