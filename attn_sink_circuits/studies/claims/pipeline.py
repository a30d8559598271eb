"""`claims`: every mechanism claim of the seeds measured on one model, as one table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch
from matplotlib.figure import Figure
from transformer_lens.model_bridge import TransformerBridge

from attn_sink_circuits.models.registry import display_name
from attn_sink_circuits.runs.io import atomic_write, write_json
from attn_sink_circuits.runs.provenance import provenance, stamped
from attn_sink_circuits.runs.record_paths import portable_path
from attn_sink_circuits.runs.steps import Steps
from attn_sink_circuits.studies.claims import figures as fig
from attn_sink_circuits.studies.claims.amplification import amplification_claims, direction_table
from attn_sink_circuits.studies.claims.cone import cone_claims, cone_table
from attn_sink_circuits.studies.claims.config import ClaimsConfig
from attn_sink_circuits.studies.claims.controls import secondary_controls
from attn_sink_circuits.studies.claims.heads import head_table
from attn_sink_circuits.studies.claims.identification import identification_claims
from attn_sink_circuits.studies.claims.inputs import Basis, prepare
from attn_sink_circuits.studies.claims.jump import jump_shares
from attn_sink_circuits.studies.claims.location import location_claims
from attn_sink_circuits.studies.claims.reading import reading_claims, score_split, writers
from attn_sink_circuits.studies.claims.secondary import secondary_claims
from attn_sink_circuits.studies.claims.table import ClaimsTable
from attn_sink_circuits.studies.result import TraceResult


@dataclass(repr=False)
class Claims(TraceResult):
    """A model's claims table (`table.rows`) with the measurements behind them (`table.tables`)."""

    title = "Mechanism claims"
    model: str
    config: ClaimsConfig
    table: ClaimsTable
    run: dict = field(default_factory=dict)
    graph: None = None
    seconds: dict[str, float] = field(default_factory=dict)

    def frame(self) -> pd.DataFrame:
        return self.table.frame()

    def settings(self) -> dict:
        return {**self.run, **self.config.to_dict()}

    def summary(self) -> dict:
        rows = self.table.rows
        return {
            "model": self.model,
            **self.run,
            "n_claims": len(rows),
            "n_hold": sum(r.holds for r in rows),
            "by_paper": self.table.by_paper(),
            "verdicts": self.table.verdicts(),
        }

    def tables(self) -> dict[str, pd.DataFrame]:
        return {"claims": self.frame(), **self.table.tables}

    def figures(self) -> dict[str, Figure]:
        return fig.claim_figures(self.table.tables, self.model, self.run.get("jump_layers", ()))

    def text(self) -> str:
        return f"# Mechanism claims: {display_name(self.model)}\n\n" + self.table.markdown()

    def claims_json(self, record: dict | None = None) -> dict:
        """claims.json: the schema version, the provenance `record` (default: the result's
        own; ended now), the model and the rows."""
        doc = {"model": self.model, "by_paper": self.table.by_paper(),
               "claims": self.table.records()}  # fmt: skip
        return stamped(doc, record or self.provenance)

    def save(self, folder: str | Path, model=None) -> Path:
        """The trace folder (`TraceResult.save`: summary.json with provenance, claims.csv, the
        measurement tables, figures, report.html) plus claims.json and claims.md; returns
        report.html's path."""
        from attn_sink_circuits.report.trace import trace_record

        report = super().save(folder, model)
        write_json(Path(folder) / "claims.json", self.claims_json(trace_record(self, model)))
        with atomic_write(Path(folder) / "claims.md") as f:
            f.write(self.text() + "\n")
        return report


def write_claims(result: Claims, out: str | Path) -> Path:
    """`result.save(out)` (kept for the callers that write a claims folder this way)."""
    return result.save(out)


def run_facts(inputs: Basis, config: ClaimsConfig) -> dict:
    """What the run found about the P0 state, beside the rows: P0, the jump blocks, the growth,
    the norm ratio after the last jump and after each block, and after which blocks the state is
    massive (ratio > massive_ratio)."""
    f = inputs.formation
    return {
        "p0": inputs.main,
        "jump_layers": f.jump_layers,
        "p0_norm_jump": inputs.formed,
        "p0_norm_growth": inputs.growth,
        "p0_norm_ratio_after_jump": f.norm_ratio[f.last_jump],
        "p0_state_massive": f.norm_ratio[f.last_jump] > config.massive_ratio,
        "p0_norm_ratio_by_block": f.norm_ratio,
        "p0_massive_after_blocks": [b for b, r in enumerate(f.norm_ratio)
                                    if r > config.massive_ratio],
        "n_texts": inputs.n_texts,
        "n_tokens": inputs.n_tokens,
    }  # fmt: skip


def judge_p0(inputs: Basis, tables: Mapping[str, pd.DataFrame], config: ClaimsConfig) -> list:
    """The P0 rows (location, identification, amplification, cone, reading) from the
    measurement tables (`p0_claims` measures them; `attn_sink_circuits.studies.claims.rejudge` reads them)."""
    t = tables
    rows = location_claims(inputs, config)
    rows += identification_claims(inputs, t["heads"], t["jump_shares"], config)
    rows += amplification_claims(inputs, t["jump_shares"], t["directions"], config)
    rows += cone_claims(inputs, t["cone"], config)
    rows += reading_claims(inputs, t["score_split"], t["writers"], t["jump_shares"], config)
    return rows


P0_STEPS = ("inputs", "jump shares", "heads", "directions", "cone", "score split", "writers")
"""The measurements of `p0_claims`, in order: the inputs (P0 state, formation, norms, first-token
variants), then one table each; the progress bar names them, `Claims.seconds` times them."""


def p0_claims(
    model: TransformerBridge, texts: Sequence[str], config: ClaimsConfig, steps: Steps
) -> tuple[ClaimsTable, dict]:
    """Location, identification, amplification, the cone model and reading, on `texts`, each
    measurement a step of `steps` (`P0_STEPS`)."""
    inputs = steps.run("inputs", prepare, model, texts, config)
    c, run = config, steps.run
    tables = {
        "jump_shares": run("jump shares", jump_shares, model, inputs, level=c.level, seed=c.seed),
        "heads": run("heads", head_table, model, inputs, c.local_window),
        "directions": run("directions", direction_table, model, inputs),
        "cone": run("cone", cone_table, model, inputs),
        "score_split": run("score split", score_split, model, inputs, c.eps),
        "writers": run("writers", writers, model, inputs),
    }
    tables["p0_norm"] = inputs.norm_table()
    rows = judge_p0(inputs, tables, config)
    facts = run_facts(inputs, config) | {"first_token_variants": list(inputs.variants)}
    return ClaimsTable(rows, tables), facts


def claims(
    model: TransformerBridge,
    texts: Sequence[str] | None = None,
    config: ClaimsConfig = ClaimsConfig(),  # noqa: B008 (frozen: a shared default is safe)
    *,
    secondary: Mapping[str, pd.DataFrame] | None = None,
    progress: bool = True,
) -> Claims:
    """The P0 claims (location, identification, amplification, cone, reading) measured on the
    first `config.n_texts` of `texts` (default: the P0 tracer's texts) cut to
    `config.n_tokens`, and, given a secondary-sink trace's tables (`read_secondary(folder)`,
    or `SecondaryTrace.tables()`), the secondary-sink claims read from them, with their
    controls measured on the model when the tables come from a folder. Works on any
    TransformerBridge. With `progress`, a bar on stderr names each measurement as it runs
    (`P0_STEPS`, then "secondary controls")."""
    from attn_sink_circuits.discovery import DEFAULT_TEXTS, read_texts

    torch.manual_seed(config.seed)
    texts = list(texts) if texts is not None else read_texts(DEFAULT_TEXTS)
    with Steps(len(P0_STEPS) + (secondary is not None), "claims", progress) as steps:
        table, run = p0_claims(model, texts, config, steps)
        if secondary is not None:
            measured = steps.run("secondary controls", secondary_controls, model, secondary, config)
            table = table + secondary_claims({**secondary, **measured}, config)
            run["secondary"] = portable_path(getattr(secondary, "folder", None) or "given tables")
    seconds = steps.seconds
    info = getattr(model, "circuits_info", None)
    name = portable_path(info.key if info else model.cfg.model_name)  # a folder: no machine path
    result = Claims(name, config, table, run, seconds=seconds)
    result.provenance = provenance(model, texts[: config.n_texts], settings=result.settings())
    return result


def run(
    model: TransformerBridge | None,
    data: str | Path | Sequence[str] | None = None,
    config: ClaimsConfig | None = None,
    *,
    secondary: str | Path | Mapping[str, pd.DataFrame] | None = None,
    trigger: bool = False,
    progress: bool = True,
) -> Claims:
    """The claims study in one call: `claims` on `data` (a list of texts, a text file, or None:
    the P0 tracer's texts) with `config` (a `ClaimsConfig`; None: the defaults) and, given a
    secondary trace's tables or the folder `circuits secondary` wrote them to
    (`read_secondary`), the secondary-sink claims. With `trigger`, instead of a model (give
    `model` and `data` None): Ran-Milo's theorems on small models trained on the trigger task
    (`trigger_claims`). The result is a `Result`; `circuits claims` runs this."""
    from attn_sink_circuits.core.texts import texts_and_kinds
    from attn_sink_circuits.studies.claims.secondary_tables import read_secondary

    if not isinstance(config, ClaimsConfig | None):
        raise ValueError(f"config is a {type(config).__name__}; give a ClaimsConfig (or None)")
    config = config or ClaimsConfig()
    if trigger:
        from attn_sink_circuits.studies.claims.trigger import trigger_claims

        if model is not None or data is not None or secondary is not None:
            raise ValueError("trigger claims train their own models: give no model, data or "
                             "secondary tables")  # fmt: skip
        return Claims("trigger-task", config, trigger_claims(config, progress=progress))
    if isinstance(secondary, str | Path):
        secondary = read_secondary(secondary)
    texts, _ = texts_and_kinds(data)
    return claims(model, texts, config, secondary=secondary, progress=progress)
