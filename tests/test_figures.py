"""Blue and orange mean a role in every figure the library writes (blue supports the sink,
orange opposes it: `attn_sink_circuits.graph.convention`), never a category: checked on the figure objects
(their legends, lines, patches, collections, images and texts), not on the PNGs."""

from __future__ import annotations

import colorsys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from attn_sink_circuits.graph.convention import ROLE_COLORS
from attn_sink_circuits.graph.io import read

DOCS = Path(__file__).parents[1] / "docs" / "p0" / "smollm2-135m"
ROLE_WORDS = {"blue": "support", "orange": "oppos"}
"""A text that explains a role colour says what the role does."""
ROLE_VERBS = {"blue": "supports", "orange": "opposes"}


def _hue(color) -> float:
    return colorsys.rgb_to_hsv(*to_rgba(color)[:3])[0] * 360


ROLE_HUES = {"blue": _hue(ROLE_COLORS["supports"]), "orange": _hue(ROLE_COLORS["opposes"])}


def family(color) -> str | None:
    """ "blue" or "orange" when `color` reads as a role's colour (hue within 20 degrees of it,
    saturated and bright enough to be seen as a colour), else None."""
    r, g, b, a = to_rgba(color)
    h, s, v = colorsys.rgb_to_hsv(r, g, b)
    if a < 0.05 or s < 0.2 or v < 0.3:
        return None
    for name, hue in ROLE_HUES.items():
        d = abs(h * 360 - hue)
        if min(d, 360 - d) <= 20:
            return name
    return None


def _colors(artist) -> list:
    """Every colour an artist paints with (a colour map's too); none for an invisible one."""
    if not artist.get_visible() or artist.get_alpha() == 0:
        return []
    out = []
    cmap = getattr(artist, "get_cmap", lambda: None)()
    if cmap is not None and getattr(artist, "get_array", lambda: None)() is not None:
        out += [cmap(x) for x in np.linspace(0, 1, 9)]
    if isinstance(artist, Line2D):  # a line's colour shows only where it has a line
        if artist.get_linestyle() not in ("None", "", " "):
            out.append(artist.get_color())
        if artist.get_marker() not in ("None", "", " ", None):
            out += [artist.get_markerfacecolor(), artist.get_markeredgecolor()]
    elif hasattr(artist, "get_color") and not hasattr(artist, "get_facecolor"):
        out.append(artist.get_color())  # a text
    for getter in ("get_facecolor", "get_edgecolor", "get_facecolors", "get_edgecolors"):
        if hasattr(artist, getter):
            value = getattr(artist, getter)()
            arr = np.atleast_2d(np.asarray(value, dtype=object))
            if isinstance(value, str):
                out.append(value)
            elif len(arr) and arr.shape[-1] == 4:
                out += [tuple(float(x) for x in row) for row in arr]
    colors = []
    for c in out:
        try:
            colors.append(to_rgba(c))
        except (ValueError, TypeError):
            continue
    return colors


def _texts(fig: Figure) -> list[str]:
    words = [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text"))]
    for ax in fig.axes:
        words += [ax.get_xlabel(), ax.get_ylabel(), ax.get_title()]
    return [w for w in words if isinstance(w, str) and w]


def _legends(fig: Figure):
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    for legend in legends:
        yield from zip(legend.legend_handles, legend.get_texts(), strict=True)


def role_colour_misuse(fig: Figure) -> list[str]:
    """What in `fig` gives blue or orange a meaning other than a role: a legend entry in a role
    colour whose text does not name that role, or a role colour used where no text of the
    figure says what it means."""
    FigureCanvasAgg(fig).draw()
    problems = []
    for handle, text in _legends(fig):
        label = text.get_text()
        for fam in {family(c) for c in _colors(handle)} - {None}:
            if ROLE_WORDS[fam] not in label.lower():
                problems.append(f"legend entry {label!r} is {fam} but names no role")
    said = " ".join(_texts(fig)).lower()
    used = set()
    for ax in fig.axes:
        artists = [*ax.lines, *ax.patches, *ax.collections, *ax.images, *ax.texts]
        for artist in artists:
            used |= {family(c) for c in _colors(artist)} - {None}
    problems += [
        f"{fam} is used but no text says it {ROLE_VERBS[fam]} anything"
        for fam in sorted(used)
        if ROLE_WORDS[fam] not in said
    ]
    return sorted(set(problems))


# -- the checker itself -------------------------------------------------------------------------


def test_the_checker_flags_blue_and_orange_categories_and_passes_roles():
    bad = Figure()
    ax = bad.subplots()
    ax.plot([0, 1], [0, 1], label="fit (6 texts)")  # matplotlib's default: blue, then orange
    ax.plot([0, 1], [1, 0], label="held-out (6 texts)")
    ax.legend()
    assert role_colour_misuse(bad) == [
        "blue is used but no text says it supports anything",
        "legend entry 'fit (6 texts)' is blue but names no role",
        "legend entry 'held-out (6 texts)' is orange but names no role",
        "orange is used but no text says it opposes anything",
    ]
    good = Figure()
    ax = good.subplots()
    ax.bar([0, 1], [-1, 1], color=[ROLE_COLORS["supports"], ROLE_COLORS["opposes"]])
    ax.set_title("blue: supports the sink; orange: opposes it")
    assert role_colour_misuse(good) == []
    unexplained = Figure()
    unexplained.subplots().imshow(np.eye(3), cmap="Blues")  # a blue map, no word on it
    assert role_colour_misuse(unexplained) == ["blue is used but no text says it supports anything"]


# -- every figure the library writes ------------------------------------------------------------


def _p0_figures() -> dict[str, Figure]:
    from test_draw import p0_figures  # the SmolLM2 P0 figures drawn from the tables in docs/

    return {f"p0 {name}": fig for name, fig in p0_figures().items()}


def _faithfulness_figure() -> Figure:
    from attn_sink_circuits.studies.figures import faithfulness_figure

    sizes = np.array([10, 100, 400, 1000, 3000])
    circuit = SimpleNamespace(
        curve=pd.DataFrame(
            {"n_edges": sizes, "faithfulness_fit": [0.1, 0.5, 0.8, 0.95, 1.0],
             "faithfulness_heldout": [0.1, 0.4, 0.7, 0.9, 1.0]}
        ),
        heldout=SimpleNamespace(n_texts=6, random_mean=0.0, random_sd=0.05,
                                random_faithfulness=[0.0] * 5),
        config=SimpleNamespace(target=0.8, target_band=(0.9, 1.1), size_rule="target",
                               method="eap_ig"),
        scores=np.zeros((6, 3)),
        n_edges=400,
        runner=SimpleNamespace(space=SimpleNamespace(n_edges=30_000),
                               metric=SimpleNamespace(name="p0_attention(layers=[2, 3, 4])")),
    )  # fmt: skip
    return faithfulness_figure(circuit, "tiny")


def _secondary_figures() -> dict[str, Figure]:
    from attn_sink_circuits.studies.secondary import figures as sf

    layers = pd.DataFrame({"layer": range(4), "p0_mass": [0.2, 0.5, 0.6, 0.7],
                           "p0_mass_max_head": [0.4, 0.9, 0.9, 0.95],
                           "n_active@0.9": [0, 2, 1, 0], "n_active@0.95": [0, 1, 0, 0]})  # fmt: skip
    types = pd.DataFrame({"tau": [0.9, 0.9], "token_type": ["punct", "word"],
                          "n_secondary": [3, 1], "n_noise": [2, 5], "n_tokens": [9, 9]})  # fmt: skip
    forming = pd.DataFrame({"group": ["sink", "control"] * 3, "mlp_norm": [1.0, 2, 3, 4, 5, 6],
                            "mlp_cos": [0.9, 0.1, 0.8, 0.0, 0.7, 0.2]})  # fmt: skip
    points = pd.DataFrame({"log_mlp_norm": [0.0, 1, 2], "log_score": [0.1, 0.5, 0.9],
                           "lifetime": [1, 3, 4]})  # fmt: skip
    fits = pd.DataFrame({"y": ["log_score"], "slope": [0.4], "intercept": [0.1], "r2": [0.9],
                         "n": [3]})  # fmt: skip
    causal = pd.DataFrame({"direction": ["into", "from"], "source": ["sink", "ctrl"],
                           "site": ["mlp", "mlp"], "layer": [3, 3], "formed_share": [0.2, 0.9]})  # fmt: skip
    scale = pd.DataFrame({"event": [0, 0, 1, 1], "factor": [0.5, 1, 0.5, 1],
                          "cos": [0.5, 0.9, 0.4, 0.8], "score": [0.1, 0.3, 0.2, 0.4],
                          "lifetime": [1, 3, 2, 4]})  # fmt: skip
    spectrum = pd.DataFrame({"layer": [3] * 4, "group": ["sink", "sink", "control", "control"],
                             "component": [1, 2, 1, 2], "explained": [0.7, 0.2, 0.3, 0.2]})  # fmt: skip
    return {
        "secondary primary dip": sf.plot_primary_dip(layers, [0.9, 0.95]),
        "secondary token types": sf.plot_token_types(types),
        "secondary cosines": sf.plot_cosine_hist(
            pd.DataFrame({"left": [0.0, 0.5], "right": [0.5, 1.0], "count": [10, 3]}), {0.9: 2}
        ),
        "secondary forming": sf.plot_forming(forming),
        "secondary norm fit": sf.plot_norm_fit(points, fits),
        "secondary swaps": sf.plot_swaps(causal),
        "secondary rescale": sf.plot_rescale(scale),
        "secondary pca": sf.plot_pca(spectrum),
    }


def _claims_figures() -> dict[str, Figure]:
    from attn_sink_circuits.studies.claims.figures import claim_figures

    tables = {
        "heads": pd.DataFrame({"component": ["L0.H0", "L0.H1"], "nonlocal": [[0.2], [0.8]],
                               "norm_ratio:bos": [[2.0], [30.0]]}),
        "jump_shares": pd.DataFrame({"kind": ["head", "head"], "component": ["L0.H0", "L0.H1"],
                                     "share": [0.05, 0.4]}),
        "directions": pd.DataFrame({"layer": [0, 1, 2], "cos_texts_pre": [0.5, 0.9, 0.99],
                                    "cos_texts_post": [0.4, 0.9, 0.98],
                                    "cos_variants_pre": [0.3, 0.8, 0.97],
                                    "cos_variants_post": [0.3, 0.8, 0.96]}),
        "score_split": pd.DataFrame({"component": ["L2.H0", "L2.H1"], "layer": [2, 2],
                                     "head": [0, 1], "p0_mass": [0.8, 0.6],
                                     "dir_share": [[0.7], [0.5]], "key_share": [[0.9], [0.8]],
                                     "const_query_share": [[0.8], [0.6]]}),
        "cone": pd.DataFrame({"layer": [0, 1, 2], "p0_norm": [1.0, 40, 50],
                              "later_median_norm": [1.0, 2, 3]}),
    }  # fmt: skip
    return {f"claims {k}": v for k, v in claim_figures(tables, "tiny", [1]).items()}


def _trigger_figures() -> dict[str, Figure]:
    from attn_sink_circuits.studies.trigger import plots as trigger_plots

    def run(kind, seed):
        checkpoints = [SimpleNamespace(step=s, max_bos_nontrigger=0.1 * s, rel_error_trigger=1 / s)
                       for s in (1, 2, 3)]  # fmt: skip
        return SimpleNamespace(
            row=lambda: {"size": "2x2"},
            measurement=SimpleNamespace(attention=kind, bos_nontrigger_per_example=[0.2, 0.9]),
            train=SimpleNamespace(losses=[1.0, 0.5, 0.2 + seed], checkpoints=checkpoints),
        )

    from attn_sink_circuits.studies.trigger.experiment import TriggerExperiment

    # The plots read only the runs: an experiment holding three stand-in runs (no training).
    exp = object.__new__(TriggerExperiment)
    object.__setattr__(exp, "runs", [run("softmax", 0), run("relu", 0), run("softmax", 1)])
    return {
        "trigger bos": trigger_plots.bos_distributions(exp),
        "trigger loss": trigger_plots.loss_curves(exp),
        "trigger sink": trigger_plots.sink_over_training(exp),
    }


def _model_figures(model) -> dict[str, Figure]:
    from attn_sink_circuits.patching import Value, head_grid, p0_attention, sweep
    from attn_sink_circuits.report import sink_plots
    from attn_sink_circuits.report.patching_plots import plot_sweep
    from attn_sink_circuits.sinks import measure

    texts = ["The cat sat on the mat, and then it ran away.", "Sinks hold attention now."]
    report = measure(model, texts, progress=False, tau=0.5)
    tokens = model.to_tokens(texts[1])
    grid = head_grid(model, tokens, Value.zero(), positions=[0], per_position=False)
    result = sweep(model, tokens, grid, p0_attention(model.cfg.n_layers - 1), progress=False)
    return {
        "sink p0 mass": sink_plots.p0_mass_heatmap(report),
        "sink state norms": sink_plots.state_norms(report),
        "sink primary score": sink_plots.primary_score(report),
        "sink levels": sink_plots.sink_level_histogram(report),
        "sink raster": sink_plots.secondary_raster(report.texts[0], report.model),
        "patching sweep": plot_sweep(result),
    }


def test_no_figure_gives_blue_or_orange_any_meaning_but_a_role(tiny):
    from attn_sink_circuits.report.draw import draw_circuit

    figures = {
        "circuit drawing": draw_circuit(read(DOCS / "circuit.graphml")),
        "faithfulness curve": _faithfulness_figure(),
        **_p0_figures(),
        **_secondary_figures(),
        **_claims_figures(),
        **_trigger_figures(),
        **_model_figures(tiny),
    }
    found = {name: role_colour_misuse(fig) for name, fig in figures.items()}
    assert {name: p for name, p in found.items() if p} == {}


@pytest.mark.parametrize("name", ["p0 variants", "p0 position"])
def test_categories_are_told_apart_by_more_than_colour(name):
    fig = _p0_figures()[name]
    for ax in fig.axes:
        lines = [line for line in ax.lines if line.get_label()[:1] != "_"]
        looks = {(line.get_color(), line.get_linestyle(), line.get_marker()) for line in lines}
        assert len(looks) == len(lines)  # each category its own colour, line style and marker
        assert len({(line.get_linestyle(), line.get_marker()) for line in lines}) == len(lines)
