"""Which circuit of the grown curve is the circuit (`DiscoveryConfig.size_rule`), and the curve's
faithfulness split by kind of text.

- "target": the smallest grown circuit whose faithfulness on the fit texts reaches `target`;
  none does: the largest.
- "band_by_kind" (the default): the smallest grown circuit whose faithfulness on the fit texts
  lies inside `target_band` for every kind of fit text and for all fit texts together (a margin
  for texts that differ from the fit texts); none does: the one nearest the band, i.e. with the
  smallest largest distance from the band over the kinds and all (ties: the smallest). A kind
  whose model and empty runs agree (f undefined) is skipped.

Grown circuits only: a method's own circuits (the mask sweep's) are on the curve for
comparison but never chosen, under either rule.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from jaxtyping import Float

from attn_sink_circuits.discovery.evaluation import faithfulness

ALL = "all"
"""The column / row of every text together."""


def faithfulness_by_kind(
    values: Float[np.ndarray, "circuit text"],
    model_values: Float[np.ndarray, " text"],
    empty_values: Float[np.ndarray, " text"],
    kinds: Sequence[str] | None,
) -> pd.DataFrame:
    """Faithfulness of each circuit (a row) on the texts of each kind (a column, in order of
    first appearance) and on all of them (`ALL`, the last column). `kinds`: one per text, or
    None (one kind: only `ALL`)."""
    n = values.shape[1]
    kinds = list(kinds) if kinds is not None else []
    if kinds and len(kinds) != n:
        raise ValueError(f"{len(kinds)} kinds for {n} texts; give one kind a text")
    labels = np.asarray(kinds)
    columns = {}
    for kind in [*dict.fromkeys(kinds), ALL]:
        sel = labels == kind if kind != ALL else np.ones(n, dtype=bool)
        m, e = model_values[sel], empty_values[sel]
        columns[kind] = [faithfulness(v[sel], m, e) for v in values]
    return pd.DataFrame(columns)


def meets(f_by_kind: pd.DataFrame, rule: str, target: float, band: Sequence[float]) -> pd.Series:
    """Per circuit, whether it meets `rule` (see the module docstring)."""
    if rule == "target":
        return f_by_kind[ALL] >= target
    if rule == "band_by_kind":
        inside = f_by_kind.ge(band[0]) & f_by_kind.le(band[1])
        return (inside | f_by_kind.isna()).all(axis=1) & f_by_kind.notna().any(axis=1)
    raise ValueError(f"unknown size rule {rule!r}; use band_by_kind or target")


def first_meeting(
    f_by_kind: pd.DataFrame, rule: str, target: float, band: Sequence[float]
) -> int | None:
    """Position of the first (smallest, the rows being sorted by size) circuit meeting `rule`."""
    ok = meets(f_by_kind, rule, target, band).to_numpy()
    return int(ok.argmax()) if ok.any() else None


def fallback(f_by_kind: pd.DataFrame, rule: str, band: Sequence[float]) -> int:
    """The circuit taken when none meets `rule`: the largest (target) or the nearest the band
    (band_by_kind: smallest largest distance from the band over the columns; ties: first)."""
    if rule == "target":
        return len(f_by_kind) - 1
    lo, hi = band
    distance = (lo - f_by_kind).clip(lower=0) + (f_by_kind - hi).clip(lower=0)
    worst = distance.max(axis=1, skipna=True).fillna(np.inf).to_numpy()
    return int(worst.argmin())


def fired_text(rule: str, met: bool) -> str:
    """What the summary records as the rule that chose the circuit."""
    if met:
        return rule
    if rule == "target":
        return "target not reached: the largest grown circuit"
    return "band_by_kind: none inside the band for every kind; the nearest"


def rule_text(rule: str, target: float, band: Sequence[float], units: str = "texts") -> str:
    """The size rule in words, e.g. for "the smallest circuit whose faithfulness ..."."""
    if rule == "target":
        return f"whose faithfulness on the fit {units} reaches {target}"
    return (
        f"whose faithfulness on the fit {units} lies in [{band[0]}, {band[1]}] for every kind "
        f"of {units[:-1] if units.endswith('s') else units} and overall"
    )


def curve_by_kind(
    curve: pd.DataFrame, fit: pd.DataFrame, heldout: pd.DataFrame, counts: dict
) -> pd.DataFrame:
    """The curve in long form, one row per circuit and kind: top_n, n_edges, source, kind,
    n_fit / n_heldout (texts of that kind) and faithfulness_fit / faithfulness_heldout (NaN
    where that set has no text of the kind). `fit`, `heldout`: `faithfulness_by_kind` of the
    curve's circuits; `counts`: {"fit": {kind: n}, "heldout": {kind: n}}."""
    kinds = list(dict.fromkeys([*fit.columns, *heldout.columns]))
    kinds = [k for k in kinds if k != ALL] + [ALL]
    rows = []
    for i, row in enumerate(curve.itertuples()):
        for kind in kinds:
            rows.append(
                {
                    "top_n": row.top_n,
                    "n_edges": row.n_edges,
                    "source": row.source,
                    "kind": kind,
                    "n_fit": counts["fit"].get(kind, 0),
                    "faithfulness_fit": fit[kind].iloc[i] if kind in fit else np.nan,
                    "n_heldout": counts["heldout"].get(kind, 0),
                    "faithfulness_heldout": heldout[kind].iloc[i] if kind in heldout else np.nan,
                }
            )
    return pd.DataFrame(rows)


def kind_counts(kinds: Sequence[str] | None, n: int) -> dict[str, int]:
    """Texts per kind, and `ALL`."""
    out: dict[str, int] = {}
    for kind in kinds or []:
        out[kind] = out.get(kind, 0) + 1
    return {**out, ALL: n}


__all__ = [
    "ALL",
    "curve_by_kind",
    "faithfulness_by_kind",
    "fallback",
    "fired_text",
    "first_meeting",
    "kind_counts",
    "meets",
    "rule_text",
]
