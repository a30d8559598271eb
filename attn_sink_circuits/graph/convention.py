"""The project's one sign and colour convention, named once; every figure, table, graph file and
text follows it:

- a component or edge **supports the sink** (or the metric) when removing it *lowers* the sink,
  a negative change under ablation: **blue**;
- it **opposes it** when removing it *raises* the sink, a positive change: **orange**;
- blue and orange mean nothing else: magnitudes use a sequential colour map (`SEQUENTIAL_CMAP`),
  signed quantities that are not roles a purple-green one (`DIVERGING_CMAP`), and categories
  (fit / held-out, BOS / no BOS, policies, kinds of box) `CATEGORY_STYLES`: black, purple,
  green, magenta, greys, each with its own line style and marker.

Tables give changes under removal (negative supports) with a `role` column that says it in
words; graphs whose values are attributions say so in their `effect_meaning` attribute and are
coloured by role, not by sign (`support_sign`, `attn_sink_circuits.graph.roles`).
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


CATEGORY_COLORS = ("#1a1a1a", "#762a83", "#1b7837", "#c51b7d", "#8c8c8c", "#6b6b00")
"""Colours for categories (black, purple, green, magenta, grey, olive): none near the blue or
the orange of a role."""

CATEGORY_STYLES = tuple(
    {"color": c, "linestyle": ls, "marker": m}
    for c, ls, m in zip(
        CATEGORY_COLORS * 2,
        ("-", "--", "-.", ":", "-", "--", ":", "-.", "--", "-", ":", "-."),
        ("o", "s", "^", "D", "v", "P", "X", "o", "s", "^", "D", "v"),
        strict=True,
    )
)
"""Twelve distinct looks for the lines of categories (colour, line style, marker)."""

SEQUENTIAL_CMAP = "Greys"
"""The colour map of magnitudes (counts, masses, norms): light = small, dark = large."""

DIVERGING_CMAP = "PRGn"
"""The colour map of signed quantities that are not roles (e.g. a cosine): purple - white -
green."""


def category_style(i: int) -> dict:
    """The look (colour, line style, marker) of the `i`-th category (`CATEGORY_STYLES`)."""
    return dict(CATEGORY_STYLES[i % len(CATEGORY_STYLES)])


def category_cycle():
    """A matplotlib property cycle of `CATEGORY_STYLES`, for `ax.set_prop_cycle(...)`: lines
    drawn without a colour of their own then never take blue or orange."""
    from cycler import cycler

    return cycler(**{k: [s[k] for s in CATEGORY_STYLES] for k in ("color", "linestyle", "marker")})


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


__all__ = [
    "CATEGORY_COLORS",
    "CATEGORY_STYLES",
    "COLOR_WORDS",
    "DIVERGING_CMAP",
    "ROLE_COLORS",
    "SEQUENTIAL_CMAP",
    "SIGN_COLORS",
    "SIGN_CONVENTION",
    "category_cycle",
    "category_style",
    "role",
    "role_cmap",
]
