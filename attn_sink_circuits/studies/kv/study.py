"""The KV study end to end: `run(model, data, config) -> KVResult` (what `circuits kv` runs).
The texts (a file, a list, or the bundled long texts) are cut into token rows, each scored
under every policy and budget (`policy_table`), with the run's provenance. A `KVResult` is a
`attn_sink_circuits.studies.result.Result`: its summary opens with which policy keeps the
perplexity closest to the full cache's at the smallest budget, `save(folder)` writes
policies.csv, summary.json and kv.png in one atomic folder, `figures()` the budget figure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from attn_sink_circuits.core.texts import PLAIN_KIND, read_kinded_texts
from attn_sink_circuits.studies.kv.config import DEFAULT_TEXTS, KVRunConfig, check_plan
from attn_sink_circuits.studies.kv.table import policy_table, pooled

FILES = ("policies.csv", "summary.json", "kv.png")
DATA_HELP = (
    "give a texts file (JSONL with 'text' and optionally 'kind', or one text a line), a "
    "non-empty list of texts, or None (the bundled long texts)"
)


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

    def closest(self) -> dict | None:
        """At the smallest budget scored: the policy whose pooled perplexity is closest to the
        full cache's, with both perplexities and its excess (a share of the full cache's);
        None when no policy but the full cache was scored."""
        table = pooled(self.table)
        evicting = table[table.policy != "full"]
        if evicting.empty:
            return None
        full = float(table[table.policy == "full"].perplexity.iloc[0])
        budget = int(min(evicting.budget))
        best = evicting[evicting.budget == budget].sort_values("perplexity").iloc[0]
        return {"budget": budget, "policy": best.policy, "perplexity": float(best.perplexity),
                "full_perplexity": full, "excess": float(best.perplexity) / full - 1}  # fmt: skip

    def finding(self) -> str:
        """The finding in one sentence, with its numbers."""
        table = pooled(self.table)
        full = float(table[table.policy == "full"].perplexity.iloc[0])
        n = int(table.texts.iloc[0])
        best = self.closest()
        if best is None:
            return f"Only the full cache was scored: perplexity {full:.3f} over {n} texts."
        budget = best["budget"]
        others = table[(table.policy != "full") & (table.budget == budget)]
        others = others[others.policy != best["policy"]].sort_values("perplexity")
        rest = "; ".join(f"{r.policy} {r.perplexity:.3f} ({r.perplexity / full - 1:+.1%})"
                         for r in others.itertuples())  # fmt: skip
        return (
            f"At the smallest budget, {budget} cached tokens a query per layer, "
            f"{best['policy']} keeps the perplexity closest to the full cache's: "
            f"{best['perplexity']:.3f} against {full:.3f} ({best['excess']:+.1%}) over {n} "
            f"texts" + (f"; then {rest}." if rest else ".")
        )

    def summary(self) -> dict:
        """The finding first, then the closest policy at the smallest budget, the perplexity
        pooled over texts per policy and budget, and the sinks kept."""
        return {"finding": self.finding(), "closest": self.closest(),
                "pooled": pooled(self.table).to_dict(orient="records"),
                "sinks_kept": [{"text": t, "by_layers": runs} for t, runs in self.kept().items()]}  # fmt: skip

    def identity(self) -> dict:
        """What the run folder's marker names the run by: the study and the model's key."""
        return {"measured": "kv", "model": self.record.get("model", {}).get("key")}

    def title(self) -> str:
        """The figure's title: the model's displayed name and how many texts."""
        from attn_sink_circuits.models.registry import display_name

        return f"{display_name(self.identity()['model'])}: {len(set(self.table.text))} texts"

    def figures(self) -> dict:
        """Name -> figure: "kv", perplexity against the budget per policy (`budget_figure`)."""
        from attn_sink_circuits.studies.kv.plots import budget_figure

        return {"kv": budget_figure(self.table, self.title())}

    def text(self) -> str:
        """The finding, the pooled table and the sinks kept per text, for a terminal."""
        lines = [self.finding(), "", pooled(self.table).to_string(index=False)]
        for t, runs in self.kept().items():
            shown = "; ".join(f"layers {a}-{b}: {p}" for (a, b), p in
                              ((r["layers"], r["positions"]) for r in runs))  # fmt: skip
            lines.append(f"text {t}, sinks kept (positions per layer): {shown}")
        return "\n".join(lines)

    def save(
        self, folder: str | Path, identity: dict | None = None, title: str | None = None
    ) -> Path:
        """Write `FILES` to `folder` as a whole (an atomic folder with the run's identity and
        provenance). `identity` and `title` default to the result's own (`identity()`,
        `title()`); giving them is the earlier form, kept working."""
        from attn_sink_circuits.report.draw import save_figure
        from attn_sink_circuits.runs.io import atomic_folder, write_csv, write_json
        from attn_sink_circuits.runs.provenance import stamped
        from attn_sink_circuits.studies.kv.plots import budget_figure

        with atomic_folder(folder, identity or self.identity(), self.record) as tmp:
            write_csv(tmp / "policies.csv", self.table)
            write_json(tmp / "summary.json", stamped(self.summary(), self.record))
            save_figure(budget_figure(self.table, title or self.title()), tmp / "kv.png")
        return Path(folder)

    def __repr__(self) -> str:
        return f"KVResult({self.finding()})"


def study_texts(
    data: str | Path | Sequence[str] | None, n_texts: int | None
) -> tuple[list[str], list[str], str | Path | None]:
    """(texts, kinds, source file) of `run`'s `data`, the first `n_texts` (None: all)."""
    if data is None:
        data = DEFAULT_TEXTS
    if isinstance(data, (str, Path)):
        texts, kinds = read_kinded_texts(data)
        source = data
    elif isinstance(data, Sequence) and data and all(isinstance(t, str) for t in data):
        texts, kinds, source = list(data), [PLAIN_KIND] * len(data), None
    else:
        raise ValueError(f"kv.run: data is a {type(data).__name__}; {DATA_HELP}")
    return texts[:n_texts], kinds[:n_texts], source


def run(
    model,
    data: str | Path | Sequence[str] | None = None,
    config: KVRunConfig | None = None,
    *,
    progress=None,
) -> KVResult:
    """Score the texts of `data` (a texts file, a list of texts, None: the bundled long texts
    `circuits kv` reads) under `config`'s policies and budgets (None: `circuits kv`'s
    defaults). Bad input (a missing or malformed file, a plan that evicts nothing, a text with
    no token after `score_from`) is refused with a ValueError in one line. `progress` (e.g.
    `print`) gets one line per text, policy and budget scored."""
    config = KVRunConfig() if config is None else config
    if not isinstance(config, KVRunConfig):
        raise ValueError(f"kv.run: config is a {type(config).__name__}; give a KVRunConfig")
    check_plan(config)
    texts, kinds, source = study_texts(data, config.n_texts)
    return run_kv(model, texts, kinds, config, source, progress=progress)


def run_kv(
    model,
    texts: Sequence[str],
    kinds: Sequence[str],
    config: KVRunConfig,
    source: str | Path | None = None,
    progress=print,
) -> KVResult:
    """Score `texts` (of `kinds`, read from `source`) under `config`'s policies and budgets.
    A text with no token after `config.kv.score_from` is refused with a ValueError. The
    earlier entry, kept working: `run` reads the texts itself and checks the plan first."""
    from attn_sink_circuits.runs.provenance import provenance

    rows = [model.to_tokens(t, truncate=False, move_to_device=False)[0] for t in texts]
    short = [i for i, r in enumerate(rows) if len(r) <= config.kv.score_from]
    if short:
        raise ValueError(f"texts {short} have no tokens after --score-from {config.kv.score_from}")
    table = policy_table(model, rows, config, kinds, progress)
    record = provenance(model, texts, kinds, settings=config.to_dict(), source=source)
    return KVResult(table, record)


__all__ = ["FILES", "KVResult", "run", "run_kv", "study_texts"]
