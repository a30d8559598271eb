"""The project's one sign and colour convention, named once; every figure, table, graph file and
text follows it:

- a component or edge **supports the sink** (or the metric) when removing it *lowers* the sink,
  a negative change under ablation: **blue**;
- it **opposes it** when removing it *raises* the sink, a positive change: **orange**.

Tables give changes under removal (negative supports) with a `role` column that says it in
words; graphs whose values are attributions say so in their `effect_meaning` attribute and are
coloured by role, not by sign (`support_sign`, `circuits.graph.roles`).
"""

from __future__ import annotations

ROLE_COLORS = {
    "supports": "#1f6fb4",
    "opposes": "#e0620d",
    "neutral": "#7f7f7f",
    "observed": "#8c8c8c",
    "structure": "#b5b5b5",
}
"""A colour per role, told apart by colour-blind readers too (blue / orange / greys)."""

SIGN_COLORS = {-1: ROLE_COLORS["supports"], 1: ROLE_COLORS["opposes"]}
"""The colour of an effect's sign, for changes under removal (an edge's `sign`)."""

COLOR_WORDS = {
    "supports": "blue",
    "opposes": "orange",
    "neutral": "grey",
    "observed": "dashed grey",
    "structure": "light grey",
}
"""Each role's colour in words, as every legend names it."""

SIGN_CONVENTION = (
    "blue: supports the sink (removing it lowers the sink); orange: opposes it (removing it "
    "raises the sink)"
)
"""The convention in one line, for captions of figures of removal effects."""


def role(change: float) -> str:
    """The role of a change under removal: "supports" (< 0), "opposes" (> 0), "neutral"."""
    return "supports" if change < 0 else "opposes" if change > 0 else "neutral"


def role_cmap():
    """Diverging colour map for changes under removal: negative (supports) blue, zero white,
    positive (opposes) orange."""
    from matplotlib.colors import LinearSegmentedColormap

    return LinearSegmentedColormap.from_list(
        "supports_opposes", [ROLE_COLORS["supports"], "#ffffff", ROLE_COLORS["opposes"]]
    )


__all__ = ["COLOR_WORDS", "ROLE_COLORS", "SIGN_COLORS", "SIGN_CONVENTION", "role", "role_cmap"]
