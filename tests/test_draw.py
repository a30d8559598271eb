"""Circuit pictures: which edges are drawn, what their colours say, labels, layouts, files."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch

from attn_sink_circuits.graph.circuit import add_component, add_effect, new_graph, record_threshold
from attn_sink_circuits.graph.io import read
from attn_sink_circuits.graph.schema import SCHEMA_VERSION, upgrade
from attn_sink_circuits.report import sink_plots
from attn_sink_circuits.report.draw import (
    ROLE_COLORS,
    DrawOptions,
    circuit_edges,
    circuit_layout,
    draw_circuit,
    edge_label,
    edge_roles,
    format_value,
    save_circuit,
    save_figure,
    support_sign,
)
from attn_sink_circuits.runs.io import stored

# The node-level SmolLM2 P0 circuit as `circuits p0` wrote it before the edge circuits (69 edges).
P0_GRAPH = Path(__file__).parent / "data" / "smollm2_p0_node_graph.graphml"
# The edge circuit `circuits p0` writes now (docs/p0: its direct edges plus structure).
EDGE_GRAPH = Path(__file__).parents[1] / "docs" / "p0" / "smollm2-135m" / "circuit.graphml"
# The SmolLM2 P0 trace's tables (docs/p0), from which its figures are drawn without a model.
P0_TABLES = EDGE_GRAPH.parent
needs_dot = pytest.mark.skipif(
    shutil.which("dot") is None, reason="Graphviz dot not installed (apt-get install graphviz)"
)
LAYOUTS = ["multipartite", pytest.param("dot", marks=needs_dot)]


def ablation_graph():
    """L0.H0 supports the sink (ablating it lowers the target: -0.5), L1.MLP opposes it (+0.2),
    L2.H1 is observed (its P0 mass), L0.H0 -> L1.MLP a weak support (-0.01)."""
    g = new_graph("tiny", data="d", metric="relative change under zero-ablation", seed=0)
    add_component(g, "target:p0_mass", score=0.8)
    add_effect(g, "L0.H0", "target:p0_mass", -0.5, intervention="zero-ablation")
    add_effect(g, "L1.MLP", "target:p0_mass", 0.2, intervention="zero-ablation")
    add_effect(g, "L2.H1", "target:p0_mass", 0.9, intervention="none (observed P0 mass)")
    add_effect(g, "L0.H0", "L1.MLP", -0.01, intervention="zero-ablation")
    return g


def test_a_negative_effect_under_ablation_means_the_source_supports_its_target():
    g = ablation_graph()
    assert support_sign(g) == -1
    assert edge_roles(g) == {
        ("L0.H0", "target:p0_mass"): "supports",
        ("L0.H0", "L1.MLP"): "supports",
        ("L1.MLP", "target:p0_mass"): "opposes",
        ("L2.H1", "target:p0_mass"): "observed",
    }
    g.graph["support_sign"] = 1  # attributions: a positive value supports
    assert support_sign(g) == 1
    assert edge_roles(g)["L1.MLP", "target:p0_mass"] == "supports"
    assert edge_roles(g)["L2.H1", "target:p0_mass"] == "observed"
    g.graph["support_sign"] = 0
    with pytest.raises(ValueError, match="support_sign is 0, not -1 or"):
        support_sign(g)


def test_roles_come_from_typed_attributes_not_from_prose():
    g = ablation_graph()
    g.graph["effect_meaning"] = "attribution score: positive = the source supports the target"
    g.edges["L0.H0", "target:p0_mass"]["intervention"] = "none (observed)"
    assert support_sign(g) == -1  # the prose says nothing to a graph of schema 2
    assert edge_roles(g)["L0.H0", "target:p0_mass"] == "supports"


@pytest.mark.parametrize(
    ("meaning", "sign"),
    [
        ("relative change of the target under mean-ablation of the source", -1),
        ("negative = supports (the target drops without the source)", -1),
        ("change when the source is removed; a value < 0 means it supports the target", -1),
        ("positive values support the sink", 1),
        ("direct-effect attribution (EAP-IG)", 1),
        ("something else entirely", -1),
    ],
)
def test_an_older_graph_gets_its_sign_from_effect_meaning_once_when_read(meaning, sign):
    g = ablation_graph()
    for key in ("support_sign", "schema_version"):  # as saved before schema 2
        del g.graph[key]
    for *_, d in g.edges(data=True):
        del d["edge_kind"]
    g.graph["effect_meaning"] = meaning
    upgrade(g)
    assert support_sign(g) == sign and g.graph["schema_version"] == SCHEMA_VERSION
    assert edge_roles(g)["L2.H1", "target:p0_mass"] == "observed"  # from its intervention


def test_circuit_edges_follow_in_graph_then_thresholds_then_all():
    g = ablation_graph()
    assert circuit_edges(g).rule == "all edges" and len(circuit_edges(g).edges) == 4
    sel = circuit_edges(g, min_abs_effect=0.1)  # observed values stay
    assert set(sel.edges) == {
        ("L0.H0", "target:p0_mass"),
        ("L1.MLP", "target:p0_mass"),
        ("L2.H1", "target:p0_mass"),
    }
    assert sel.hidden == 1 and "0.1" in sel.rule
    record_threshold(g, "keep_share", 0.5)  # the share rule: per target and role
    sel = circuit_edges(g)
    assert ("L0.H0", "L1.MLP") in sel.edges  # the only support into L1.MLP: 100% of itself
    assert len(sel.edges) == 4 and "keep_share" in sel.rule
    add_effect(g, "L1.H2", "target:p0_mass", -0.1, intervention="zero-ablation")
    assert ("L1.H2", "target:p0_mass") not in circuit_edges(g).edges  # 0.1 < 0.5 * 0.5
    assert "L1.H2" not in circuit_edges(g).nodes
    record_threshold(g, "min_abs_effect", 0.3)
    assert len(circuit_edges(g).edges) == 2  # min_abs_effect wins over keep_share
    for u, v in g.edges:
        g.edges[u, v]["in_graph"] = (u, v) == ("L1.MLP", "target:p0_mass")
    sel = circuit_edges(g)
    assert sel.edges == [("L1.MLP", "target:p0_mass")] and sel.rule == "those marked in_graph"
    assert set(sel.nodes) == {"L1.MLP", "target:p0_mass"}


def test_labels_are_compact():
    assert format_value(-0.9288, percent=True) == "-93%"
    assert format_value(0.0432, percent=True) == "+4.3%"
    assert format_value(1.9258, percent=True) == "+193%"
    assert format_value(-0.0001, percent=True) == "+0.0%"  # rounds to zero: no "-0.0%"
    assert format_value(0.99) == "0.99"
    assert format_value(-0.0123) == "-0.012"
    assert format_value(25101.9) == "2.5e+04"
    g = ablation_graph()
    assert edge_label(g, "L0.H0", "target:p0_mass") == "-50%"  # a relative change
    assert edge_label(g, "L2.H1", "target:p0_mass") == "0.90"  # an observed value


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_picture_colours_edges_by_what_they_do(layout, tmp_path):
    g = ablation_graph()
    fig = draw_circuit(g, layout=layout, max_edge_labels=1)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    arrows = [p for p in ax.patches if isinstance(p, FancyArrowPatch)]
    assert len(arrows) == 4
    colours = sorted(to_hex(a.get_edgecolor()) for a in arrows)
    expected = ["supports", "supports", "opposes", "observed"]
    assert colours == sorted(ROLE_COLORS[r] for r in expected)
    dashed = [a for a in arrows if a.get_linestyle() not in ("-", "solid")]
    assert [to_hex(a.get_edgecolor()) for a in dashed] == [ROLE_COLORS["observed"]]
    # Width: linear in |effect| over the effects (observed values have their own scale).
    widths = {to_hex(a.get_edgecolor()): a.get_linewidth() for a in arrows}
    assert widths[ROLE_COLORS["opposes"]] == pytest.approx(0.7 + 5.3 * 0.2 / 0.5)
    texts = [t.get_text() for t in ax.texts]
    assert "-50%" in texts and "0.90" in texts  # the strongest effect and the observed value
    assert "+20%" not in texts and "-1.0%" not in texts  # over max_edge_labels
    assert {"L0.H0", "L1.MLP", "L2.H1", "p0_mass"} <= set(texts)
    assert "labelled on the 1 strongest of 3 effects" in ax.get_xlabel().replace("\n", " ")
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any(t.startswith("blue: supports the sink: removing the source lowers") for t in legend)
    assert any(t.startswith("orange: opposes it") for t in legend)
    assert any(t.startswith("dashed grey: observed value") for t in legend)
    png = save_figure(fig, tmp_path / "c.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = save_circuit(g, tmp_path / "c.svg", layout=layout)
    assert ET.parse(svg).getroot().tag == "{http://www.w3.org/2000/svg}svg"


def test_the_old_keywords_still_work():
    fig = draw_circuit(
        ablation_graph(), title="t", min_edge_width=1.0, max_edge_width=3.0, show_labels=False
    )
    ax = fig.axes[0]
    assert ax.get_title() == "t"
    assert max(p.get_linewidth() for p in ax.patches if isinstance(p, FancyArrowPatch)) == 3.0
    assert "L0.H0" not in [t.get_text() for t in ax.texts]


def test_draw_options_are_one_checked_value_keywords_can_override():
    g = ablation_graph()
    opts = DrawOptions(layout="multipartite", max_edge_labels=1)

    def texts(fig):
        return [t.get_text() for t in fig.axes[0].texts]

    assert texts(draw_circuit(g, opts)) == texts(draw_circuit(g, **opts.to_dict()))
    assert "-50%" in texts(draw_circuit(g, opts))
    assert "-50%" not in texts(draw_circuit(g, opts, max_edge_labels=0))
    with pytest.raises(ValueError, match="max_edge_labels must be >= 0, got -1"):
        draw_circuit(g, max_edge_labels=-1)
    with pytest.raises(ValueError, match="layout must be one of auto, dot, multipartite"):
        DrawOptions(layout="circo")
    with pytest.raises(ValueError, match="unknown DrawOptions options"):
        draw_circuit(g, colour="red")


def test_a_graph_without_edges_is_drawn_and_an_empty_one_refused():
    g = new_graph("tiny", data="d", metric="m", seed=0)
    with pytest.raises(ValueError, match="no nodes"):
        draw_circuit(g)
    add_component(g, "L0.H1")
    add_component(g, "target:x")
    assert len(draw_circuit(g, layout="multipartite").axes[0].patches) == 2  # two boxes


@pytest.mark.parametrize("layout", LAYOUTS)
def test_columns_are_layers_left_to_right(layout):
    g = ablation_graph()
    lay = circuit_layout(g, method=layout)
    x = {n: p[0] for n, p in lay.pos.items()}
    assert x["L0.H0"] < x["L1.MLP"] < x["L2.H1"] < x["target:p0_mass"]
    assert list(lay.columns) == sorted(lay.columns, key=lay.columns.get)
    assert set(lay.columns) == {"L0", "L1", "L2", "targets"}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_smollm2_edge_circuit_draws_its_strongest_edges_in_a_column(layout):
    g = read(EDGE_GRAPH)
    fig = draw_circuit(g, layout=layout)
    assert fig.get_figwidth() <= 11.5
    drawn = circuit_edges(g).edges
    kinds = {k: [e for e in drawn if g.edges[e]["edge_kind"] == k] for k in ("direct", "read")}
    assert len(kinds["direct"]) == 30 < g.number_of_edges()  # as many direct edges as the rule
    # ... a third of them into the inputs of the heads the target reads (how the P0 state is
    # read), the rest the strongest of the others; with the structure that joins them to the
    # target: an edge is drawn into it, and every drawn head input that leads on reaches it.
    reads = {u for u, v in g.edges if g.edges[u, v]["edge_kind"] == "read"}
    ends = {u for u, v in g.edges if g.edges[u, v]["edge_kind"] == "input" and v in reads}
    readers = [e for e in kinds["direct"] if e[1] in ends]
    assert len(readers) == 10 and all(int(e[1][1:3]) >= 12 for e in readers)  # late heads
    others = [g.edges[e]["abs_effect"] for e in kinds["direct"] if e not in readers]
    assert min(others) >= max(
        g.edges[e]["abs_effect"]
        for e in g.edges
        if g.edges[e]["edge_kind"] == "direct" and e not in kinds["direct"] and e[1] not in ends
    )
    target = next(n for n, k in g.nodes(data="kind") if k == "target")
    assert kinds["read"] and all(v == target for _, v in kinds["read"])
    nodes = {n for e in drawn for n in e}
    assert nodes == set(circuit_edges(g).nodes)  # no node without a drawn edge
    caption = fig.axes[0].get_xlabel().replace("\n", " ")
    n_direct = sum(d["edge_kind"] == "direct" for *_, d in g.edges(data=True))
    added = circuit_edges(g).readers  # beyond the reading edges among the 30 strongest
    assert f"Drawn: 30 of the {n_direct:,} direct edges: the {30 - added} strongest" in caption
    assert f"and the {added} strongest into the inputs of the heads the target reads" in caption


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_smollm2_p0_circuit_fits_a_report_column(layout):
    g = read(P0_GRAPH)
    fig = draw_circuit(g, layout=layout)
    assert fig.get_figwidth() <= 11.5
    arrows = [p for p in fig.axes[0].patches if isinstance(p, FancyArrowPatch)]
    assert len(arrows) == len(circuit_edges(g).edges) < g.number_of_edges()
    roles = edge_roles(g)
    assert sum(r == "observed" for r in roles.values()) == 4
    assert roles["L11.MLP", "target:p0_attention[L12-29]"] == "supports"  # effect -0.70
    assert roles["L9.MLP", "L10.MLP"] == "opposes"  # effect +1.93


# -- every label on the page, none on another panel ----------------------------------------


def misplaced_text(fig: Figure) -> list[str]:
    """Labels, titles and tick labels of `fig` that are cut off at its edge, lie on another
    panel (axes or colour bar), or overlap another panel's text (1 px tolerance)."""
    FigureCanvasAgg(fig).draw()
    renderer = fig.canvas.get_renderer()
    page = fig.bbox.padded(1)
    axes = fig.axes
    boxes = [ax.get_window_extent(renderer).padded(-1) for ax in axes]

    def shown(axis, coord, limits):
        if not axis.get_visible():  # e.g. the hidden x axis of a twinx panel
            return []
        lo, hi = sorted(limits)  # matplotlib keeps labels for ticks outside the view, undrawn
        ticks = [t for t in axis.get_ticklabels() if lo <= t.get_position()[coord] <= hi]
        return [axis.label, *ticks]

    def texts(ax):
        found = [ax.title, ax._left_title, ax._right_title]
        found += shown(ax.xaxis, 0, ax.get_xlim()) + shown(ax.yaxis, 1, ax.get_ylim())
        return [t for t in found if t.get_visible() and t.get_text().strip()]

    placed = [(i, t, t.get_window_extent(renderer)) for i, ax in enumerate(axes) for t in texts(ax)]
    placed += [(-1, t, t.get_window_extent(renderer)) for t in fig.texts if t.get_text().strip()]
    problems = []
    for i, t, box in placed:
        name = repr(t.get_text())
        if not page.contains(box.x0, box.y0) or not page.contains(box.x1, box.y1):
            problems.append(f"{name} is cut off")
        problems += [
            f"{name} lies on panel {j}" for j, b in enumerate(boxes) if j != i and box.overlaps(b)
        ]
        problems += [
            f"{name} overlaps {u.get_text()!r}"
            for k, u, other in placed
            if k != i and id(u) < id(t) and box.padded(-1).overlaps(other.padded(-1))
        ]
    return problems


def p0_figures() -> dict[str, Figure]:
    from attn_sink_circuits.studies.p0.figures import (
        heads_figure,
        mlps_figure,
        position_figure,
        variants_figure,
    )

    def table(name):
        return pd.read_csv(stored(P0_TABLES / f"{name}.csv"))

    model = "smollm2-135m"
    return {
        "position": position_figure(table("position_vs_content"), model),
        "heads": heads_figure(table("heads"), model),
        "mlps": mlps_figure(table("mlps"), model),
        "variants": variants_figure(table("variants_layers"), "bos", [2, 11], model),
    }


@pytest.mark.parametrize("name", ["position", "heads", "mlps", "variants"])
def test_p0_figures_keep_every_label_on_the_page_and_off_other_panels(name):
    fig = p0_figures()[name]
    assert misplaced_text(fig) == []


def test_the_head_heatmaps_label_the_shared_layer_axis_once():
    fig = p0_figures()["heads"]
    panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert [ax.get_ylabel() for ax in panels] == ["layer", "", ""]
    assert len(fig.axes) == 5  # three panels, a colour bar for attention and one for the norm


def test_the_sink_plots_keep_every_label_on_the_page_and_off_other_panels(tiny):
    from attn_sink_circuits.sinks import measure

    report = measure(
        tiny, ["The cat sat on the mat, and then it ran away.", "Sinks hold attention now."],
        progress=False, tau=0.5,
    )  # fmt: skip
    figures = {
        "p0_mass_heatmap": sink_plots.p0_mass_heatmap(report),
        "state_norms": sink_plots.state_norms(report),
        "primary_score": sink_plots.primary_score(report),
        "sink_levels": sink_plots.sink_level_histogram(report),
        "raster": sink_plots.secondary_raster(report.texts[0], report.model),
    }
    assert {name: misplaced_text(fig) for name, fig in figures.items()} == {
        name: [] for name in figures
    }


def test_a_drawing_never_leaves_its_target_unconnected():
    g = read(EDGE_GRAPH)
    target = next(n for n, k in g.nodes(data="kind") if k == "target")
    # |effect| >= 0.02 keeps only MLP -> MLP edges: none leads on to the heads the target reads.
    sel = circuit_edges(g, min_abs_effect=0.02)
    assert sel.readers >= 1 and any(v == target for _, v in sel.edges)
    direct = [e for e in sel.edges if g.edges[e]["edge_kind"] == "direct"]
    weakest_kept = min(g.edges[e]["abs_effect"] for e in direct)
    assert weakest_kept < 0.02  # a reading edge, below the cut
    fig = draw_circuit(g, min_abs_effect=0.02)
    caption = fig.axes[0].get_xlabel().replace("\n", " ")
    assert f"and the {sel.readers} strongest into the inputs of the heads the target" in caption
