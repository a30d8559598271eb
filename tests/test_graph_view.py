"""The interactive circuit view: its data, its bundled cytoscape.js, and that chromium draws it."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from attn_sink_circuits.graph.circuit import add_component, add_effect, new_graph, record_threshold
from attn_sink_circuits.report.draw import ROLE_COLORS
from attn_sink_circuits.report.graph_view import (
    CYTOSCAPE_VERSION,
    cytoscape_bundle,
    cytoscape_script,
    graph_elements,
    graph_view_html,
    graph_view_page,
)


def small_graph():
    g = new_graph("tiny", data="d", metric="relative change under zero-ablation", seed=0)
    record_threshold(g, "keep_share", 0.5)
    add_component(g, "target:p0_mass", score=0.8, label="p0 </script><b>mass")
    add_effect(g, "L0.H0", "target:p0_mass", -0.5, intervention="zero-ablation")
    add_effect(g, "L1.MLP", "target:p0_mass", 0.2, intervention="zero-ablation")
    add_effect(g, "L1.H3", "target:p0_mass", -0.05, intervention="zero-ablation")  # weak
    add_effect(g, "L2.H1", "target:p0_mass", 0.9, intervention="none (observed P0 mass)")
    add_effect(g, "L0.H0", "L1.MLP", -0.3, intervention="zero-ablation")
    g.nodes["L0.H0"]["score"] = -0.5
    return g


def test_the_bundle_is_the_pinned_cytoscape():
    js = cytoscape_bundle()
    assert f'version="{CYTOSCAPE_VERSION}"' in js
    assert "</script" not in js
    assert cytoscape_script().count("<script>") == 1


def test_elements_carry_roles_positions_and_the_circuit():
    spec = graph_elements(small_graph())
    nodes = {e["data"]["id"]: e for e in spec["elements"] if e["group"] == "nodes"}
    edges = {
        (e["data"]["source"], e["data"]["target"]): e["data"]
        for e in spec["elements"]
        if e["group"] == "edges"
    }
    assert len(nodes) == 5 and len(edges) == 5
    assert nodes["L0.H0"]["position"]["x"] < nodes["L1.MLP"]["position"]["x"]
    assert nodes["L0.H0"]["data"]["attrs"]["score"] == -0.5
    assert edges["L0.H0", "target:p0_mass"]["role"] == "supports"
    assert edges["L1.MLP", "target:p0_mass"]["color"] == ROLE_COLORS["opposes"]
    assert edges["L2.H1", "target:p0_mass"]["role"] == "observed"
    assert edges["L0.H0", "target:p0_mass"]["value"] == "-50%"
    assert not edges["L1.H3", "target:p0_mass"]["in_circuit"]  # under the keep_share
    assert not nodes["L1.H3"]["data"]["in_circuit"]
    assert spec["n_edges"] == 5 and spec["n_circuit_edges"] == 4
    assert [item["role"] for item in spec["legend"]] == ["supports", "opposes", "observed"]


def test_the_fragment_cannot_be_broken_by_labels():
    html = graph_view_html(small_graph(), "view-1")
    assert html.count("</script>") == 1 and "</script><b>" not in html
    spec = json.loads(re.search(r"var spec = (\{.*?\});\n", html, re.S).group(1))
    assert spec["id"] == "view-1"
    with pytest.raises(ValueError, match="element_id"):
        graph_view_html(small_graph(), 'x" onload="alert(1)')


@pytest.mark.skipif(
    shutil.which("chromium") is None,
    reason="chromium is not installed (apt-get install -y chromium); CI installs it",
)
def test_headless_chromium_draws_the_view_and_shows_a_node_on_click(tmp_path, chromium_dom):
    page = graph_view_page(small_graph(), "circuit", element_id="cg")
    # What a click does: tap a node, then switch on the edges outside the circuit.
    page = page.replace(
        "</body>",
        "<script>window.circuitsGraphs['cg'].getElementById('L0.H0').emit('tap');"
        "var root = document.getElementById('cg');"
        "root.setAttribute('data-test-before', root.getAttribute('data-nodes') + ' ' +"
        " root.getAttribute('data-visible-edges'));"
        "var box = document.querySelector('#cg .cg-all'); box.checked = true;"
        "box.dispatchEvent(new Event('change'));</script></body>",
    )
    path = tmp_path / "view.html"
    path.write_text(page, encoding="utf-8")
    dom = chromium_dom(path)
    tag = re.search(r'<figure class="circuits-graph" id="cg"[^>]*>', dom).group(0)
    attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', tag))
    assert attrs["data-rendered"] == "true"  # set by the script once cytoscape was ready
    assert attrs["data-test-before"] == "4 4"  # L1.H3 is outside the circuit: hidden at first
    assert (attrs["data-nodes"], attrs["data-visible-edges"]) == ("5", "5")  # "show all edges"
    assert attrs["data-selected"] == "L0.H0"
    canvas = dom[dom.index('class="cg-canvas') :]
    assert "<canvas" in canvas[: canvas.index('class="cg-info"')]  # cytoscape drew into it
    info = dom[dom.index('class="cg-info"') :]
    info = info[: info.index("</div>")]
    assert "<b>L0.H0</b>" in info and "-0.5" in info and "-50%" in info and "-30%" in info


def test_a_notebook_shows_the_view_with_its_library():
    from attn_sink_circuits.report.graph_view import show_graph

    view = show_graph(small_graph(), height=300)
    html = view._repr_html_()
    assert html.count("<script>") == 2 and f'id="{view.element_id}"' in html
    assert "5 edges" in repr(view)
    assert show_graph(small_graph()).element_id != view.element_id


@pytest.mark.skipif(
    shutil.which("dot") is None, reason="Graphviz dot not installed (apt-get install graphviz)"
)
def test_with_dot_the_long_edges_follow_its_routes():
    from pathlib import Path

    from attn_sink_circuits.graph.io import read
    from attn_sink_circuits.runs.io import stored

    path = Path(__file__).parents[1] / "docs" / "p0" / "smollm2-135m" / "circuit.graphml"
    if not stored(path).is_file():  # committed gzip'd: circuit.graphml.gz
        pytest.skip("docs/p0 graph not present")
    spec = graph_elements(read(path))
    routed = [e["data"] for e in spec["elements"] if "routed" in e.get("classes", "")]
    assert routed and all(e["in_circuit"] for e in routed)
    for e in routed:
        weights = [float(w) for w in e["cpw"].split()]
        assert len(weights) == len(e["cpd"].split()) and all(0 < w < 1 for w in weights)
