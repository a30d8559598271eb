"""`claims`: every mechanism claim of the seeds measured on one model, as one table."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd
import torch
from matplotlib.figure import Figure
from transformer_lens.model_bridge import TransformerBridge

from circuits.claims import figures as fig
from circuits.claims.amplification import amplification_claims, direction_table
from circuits.claims.cone import cone_claims, cone_table
from circuits.claims.config import ClaimsConfig
from circuits.claims.heads import head_table
from circuits.claims.identification import identification_claims
from circuits.claims.inputs import prepare
from circuits.claims.jump import jump_shares
from circuits.claims.reading import reading_claims, score_split, writers
from circuits.claims.secondary import secondary_claims
from circuits.claims.table import ClaimsTable
from circuits.tracing.result import TraceResult


@dataclass(repr=False)
class Claims(TraceResult):
    """A model's claims table (`table.rows`) with the measurements behind it (`table.tables`)."""

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
            "verdicts": self.table.verdicts(),
        }

    def tables(self) -> dict[str, pd.DataFrame]:
        return {"claims": self.frame(), **self.table.tables}

    def figures(self) -> dict[str, Figure]:
        return fig.claim_figures(self.table.tables, self.model, self.run.get("jump_layers", ()))

    def text(self) -> str:
        return f"# Mechanism claims: {self.model}\n\n" + self.table.markdown()


def p0_claims(
    model: TransformerBridge, texts: Sequence[str], config: ClaimsConfig, seconds: dict
) -> tuple[ClaimsTable, dict]:
    """Identification, amplification, the cone model and reading, on `texts`."""
    t = time.perf_counter()
    inputs = prepare(model, texts, config)
    shares = jump_shares(model, inputs, level=config.level, seed=config.seed)
    heads = head_table(model, inputs, config.local_window)
    directions = direction_table(model, inputs)
    cone = cone_table(model, inputs)
    split = score_split(model, inputs, config.eps)
    written = writers(model, inputs)
    rows = identification_claims(inputs, heads, shares, config)
    rows += amplification_claims(inputs, shares, directions, config)
    rows += cone_claims(inputs, cone, config)
    rows += reading_claims(inputs, split, written, shares, config)
    seconds["p0"] = time.perf_counter() - t
    f = inputs.formation
    run = {
        "p0": inputs.main,
        "jump_layers": f.jump_layers,
        "p0_norm_jump": inputs.formed,
        "p0_norm_growth": inputs.growth(),
        "p0_norm_ratio_after_jump": f.norm_ratio[f.last_jump],
        "p0_state_massive": f.norm_ratio[f.last_jump] > config.massive_ratio,
        "n_texts": len(inputs.tokens),
        "n_tokens": int(inputs.tokens.shape[1]),
        "first_token_variants": list(inputs.variants),
    }
    tables = {"jump_shares": shares, "heads": heads, "directions": directions, "cone": cone,
              "score_split": split, "writers": written}  # fmt: skip
    return ClaimsTable(rows, tables), run


def claims(
    model: TransformerBridge,
    texts: Sequence[str] | None = None,
    config: ClaimsConfig = ClaimsConfig(),  # noqa: B008 (frozen: a shared default is safe)
    *,
    secondary: Mapping[str, pd.DataFrame] | None = None,
) -> Claims:
    """The P0 claims (identification, amplification, cone, reading) measured on the first
    `config.n_texts` of `texts` (default: the P0 tracer's texts) cut to `config.n_tokens`, and,
    given a secondary-sink trace's tables (`SecondaryTrace.tables()` or the CSVs of its
    folder), the secondary-sink claims read from them. Works on any TransformerBridge."""
    from circuits.discovery import DEFAULT_TEXTS, read_texts

    torch.manual_seed(config.seed)
    texts = list(texts) if texts is not None else read_texts(DEFAULT_TEXTS)
    seconds: dict[str, float] = {}
    table, run = p0_claims(model, texts, config, seconds)
    if secondary is not None:
        table = table + secondary_claims(secondary, config)
    info = getattr(model, "circuits_info", None)
    name = info.key if info else model.cfg.model_name
    return Claims(name, config, table, run, seconds=seconds)
