"""The KV study end to end (what `circuits kv` runs): texts cut into token rows, each scored
under every policy and budget (`policy_table`), with the run's provenance; saved as
policies.csv, summary.json and kv.png in one atomic folder."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from attn_sink_circuits.studies.kv.config import KVRunConfig
from attn_sink_circuits.studies.kv.run import policy_table, pooled

FILES = ("policies.csv", "summary.json", "kv.png")


@dataclass(frozen=True)
class KVResult:
    """A policy table (`policy_table`'s columns) and the run's provenance record."""

    table: pd.DataFrame
    record: dict

    def kept(self) -> dict:
        """text -> the sinks the sink-aware policy kept, as runs of layers (`kept_by_layers`)."""
        from attn_sink_circuits.studies.kv.sinks import kept_by_layers

        sinks = self.table.attrs.get("sinks", {})
        return {t: kept_by_layers(by_layer) for t, by_layer in sinks.items()}

    def summary(self) -> dict:
        """The perplexity pooled over texts, per policy and budget, and the sinks kept."""
        return {"pooled": pooled(self.table).to_dict(orient="records"),
                "sinks_kept": [{"text": t, "by_layers": runs} for t, runs in self.kept().items()]}  # fmt: skip

    def save(self, folder: str | Path, identity: dict, title: str) -> Path:
        """Write `FILES` to `folder` as a whole (an atomic folder with `identity`)."""
        from attn_sink_circuits.report.draw import save_figure
        from attn_sink_circuits.runs.io import atomic_folder, write_csv, write_json
        from attn_sink_circuits.runs.provenance import stamped
        from attn_sink_circuits.studies.kv.plots import budget_figure

        with atomic_folder(folder, identity, self.record) as tmp:
            write_csv(tmp / "policies.csv", self.table)
            write_json(tmp / "summary.json", stamped(self.summary(), self.record))
            save_figure(budget_figure(self.table, title), tmp / "kv.png")
        return Path(folder)


def run_kv(
    model,
    texts: Sequence[str],
    kinds: Sequence[str],
    config: KVRunConfig,
    source: str | Path | None = None,
) -> KVResult:
    """Score `texts` (of `kinds`, read from `source`) under `config`'s policies and budgets.
    A text with no token after `config.kv.score_from` is refused with a ValueError."""
    from attn_sink_circuits.runs.provenance import provenance

    rows = [model.to_tokens(t, truncate=False, move_to_device=False)[0] for t in texts]
    short = [i for i, r in enumerate(rows) if len(r) <= config.kv.score_from]
    if short:
        raise ValueError(f"texts {short} have no tokens after --score-from {config.kv.score_from}")
    table = policy_table(model, rows, config, kinds)
    record = provenance(model, texts, kinds, settings=config.to_dict(), source=source)
    return KVResult(table, record)


__all__ = ["FILES", "KVResult", "run_kv"]
