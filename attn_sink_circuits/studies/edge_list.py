"""The one list of a circuit's strongest edges every text of a trace names, ordered by the value
it is labelled with (the exact direct effect where edges were measured exactly, else the
method's estimate, labelled so), and where the method's estimate and the exact effect disagree
in sign, the sentence that says so and which of the two the drawing uses."""

from __future__ import annotations

import math

import pandas as pd

from attn_sink_circuits._repr import number

N_STRONGEST = 5
"""Edges in the strongest-edges list."""

SHOWN = 0.0005
"""An |effect| below this prints as +0.000 at three decimals: never called strong."""

METHOD_NAMES = {"eap_ig": "EAP-IG", "eap": "EAP", "mask": "mask"}


def _method(method: str) -> str:
    return METHOD_NAMES.get(method, method)


def strongest_edges(frame: pd.DataFrame, n: int = N_STRONGEST) -> tuple[pd.DataFrame, str]:
    """The `n` strongest edges of an `EdgeCircuit.edges_frame()` and the column they are
    ordered and labelled by: `direct_effect` (exact) when any edge was measured exactly, else
    `estimated_effect`; edges whose value prints as +0.000 are left out."""
    exact = frame[frame.direct_effect.map(lambda v: math.isfinite(float(v)))]
    column = "direct_effect" if len(exact) else "estimated_effect"
    rows = exact if len(exact) else frame
    rows = rows[rows[column].abs() >= SHOWN]
    return rows.loc[rows[column].abs().sort_values(ascending=False).index[:n]], column


def strongest_edges_text(frame: pd.DataFrame, method: str, n: int = N_STRONGEST) -> str:
    """ "Strongest edges by their exact direct effect (...; 20 measured exactly): A -> B
    (-0.037); ..." or, without exact effects, by the method's estimate, labelled so."""
    top, column = strongest_edges(frame, n)
    if top.empty:
        return "No edge has an effect that shows at three decimals."
    measured = int(frame.direct_effect.map(lambda v: math.isfinite(float(v))).sum())
    if column == "direct_effect":
        what = (
            f"by their exact direct effect (metric change when that edge alone is ablated; "
            f"negative: it supports the metric; {measured} of the {len(frame):,} edges were "
            "measured exactly)"
        )
    else:
        what = (
            f"by the {_method(method)} estimate of their effect (minus its score; no edge was "
            "measured exactly; negative: it supports the metric)"
        )
    edges = "; ".join(
        f"{r.sender} -> {r.receiver} ({number(getattr(r, column), '+.3f')})"
        for r in top.itertuples()
    )
    return f"Strongest edges {what}: {edges}."


def sign_disagreement_text(frame: pd.DataFrame, method: str) -> str:
    """Where the method's estimate and the exact effect of an edge have opposite signs: how
    many, the largest case, and which value the drawing and the edge table use ("" when they
    never disagree)."""
    both = frame[frame.direct_effect.map(lambda v: math.isfinite(float(v)))]
    both = both[(both.direct_effect.abs() >= SHOWN) & (both.estimated_effect.abs() >= SHOWN)]
    differ = both[(both.direct_effect > 0) != (both.estimated_effect > 0)]
    if differ.empty:
        return ""
    worst = differ.loc[differ.direct_effect.abs().idxmax()]
    name = _method(method)
    return (
        f"For {len(differ)} of the {len(both)} exactly measured edges the {name} estimate has "
        f"the opposite sign to the exact effect (largest: {worst.sender} -> {worst.receiver}, "
        f"exact {number(worst.direct_effect, '+.3f')}, estimated "
        f"{number(worst.estimated_effect, '+.3f')}): the estimate ranks edges, it does not "
        "measure them. The drawing and the edge table colour and label an edge by its exact "
        f"effect where one was measured, by the {name} estimate elsewhere."
    )


__all__ = [
    "N_STRONGEST",
    "SHOWN",
    "sign_disagreement_text",
    "strongest_edges",
    "strongest_edges_text",
]
