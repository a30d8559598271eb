"""Drawing, attention views and the HTML report, from a circuit traced on the tiny model."""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from jaxtyping import TypeCheckError
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch

from attn_sink_circuits._repr import number, percent, value_html
from attn_sink_circuits.graph import from_scores, prune_dead_nodes, prune_top_k
from attn_sink_circuits.graph.circuit import add_effect, new_graph
from attn_sink_circuits.report import (
    AttentionView,
    GraphView,
    Image,
    KeyValues,
    Section,
    Table,
    attention_html,
    attention_views,
    circuit_heads,
    draw_circuit,
    layered_layout,
    render_report,
    save_figure,
    write_report,
    write_trace,
)
from attn_sink_circuits.report.draw import ROLE_COLORS, DrawOptions, edge_roles

TEXTS = ["The cat sat on the mat!!", "Sinks hold attention now"]  # equal lengths: one batch
LAST = 3  # the tiny model's last layer, where the metric is read
TARGET = f"target:p0_mass[L{LAST}]"


def p0_mass(pattern: torch.Tensor) -> float:
    """Mean attention to position 0 over heads, texts and query positions >= 1."""
    return pattern[:, :, 1:, 0].mean().item()


@pytest.fixture(scope="module")
def head_scores(tiny) -> pd.DataFrame:
    """Zero-ablate each head's output (hook_z) and measure the change in layer-3 P0 mass."""
    tokens = tiny.to_tokens(TEXTS)
    assert tokens.shape == (2, 25)  # BOS + 24 bytes, no padding
    seen = {}

    def keep(pattern, hook):
        seen["pattern"] = pattern.detach().clone()

    metric_hook = (f"blocks.{LAST}.attn.hook_pattern", keep)
    rows = []
    with torch.no_grad():
        tiny.run_with_hooks(tokens, fwd_hooks=[metric_hook])
        clean = p0_mass(seen["pattern"])
        for layer in range(tiny.cfg.n_layers):
            for head in range(tiny.cfg.n_heads):

                def ablate(z, hook, head=head):
                    z = z.clone()
                    z[:, :, head] = 0.0
                    return z

                tiny.run_with_hooks(
                    tokens, fwd_hooks=[(f"blocks.{layer}.attn.hook_z", ablate), metric_hook]
                )
                effect = p0_mass(seen["pattern"]) - clean
                rows.append(
                    dict(site="head", layer=layer, head=head, pos=-1, neuron=-1, effect=effect)
                )
    df = pd.DataFrame(rows)
    df.attrs = {"metric": f"p0_mass[L{LAST}]", "intervention": "zero-ablation (hook_z)"}
    return df


@pytest.fixture(scope="module")
def circuit(tiny, head_scores):
    g = from_scores(head_scores, TARGET, model=tiny, data=f"{len(TEXTS)} texts", seed=0)
    return prune_dead_nodes(prune_top_k(g, 5))


def test_the_traced_effects_are_real(head_scores):
    last = head_scores[head_scores["layer"] == LAST]["effect"]
    earlier = head_scores[head_scores["layer"] < LAST]["effect"]
    # Layer-3 patterns are computed before layer-3 heads write anything: exactly no effect.
    assert (last == 0.0).all()
    assert (earlier.abs() > 1e-7).all()


def test_the_circuit_keeps_the_five_strongest_heads(circuit, head_scores):
    strongest = head_scores.loc[head_scores["effect"].abs().nlargest(5).index]
    expected = {f"L{r.layer}.H{r.head}" for r in strongest.itertuples()}
    assert set(circuit) == expected | {TARGET}
    assert circuit.graph["model"] == "tiny" and circuit.graph["model_source"] == "random:seed=0"
    for r in strongest.itertuples():
        assert circuit.edges[f"L{r.layer}.H{r.head}", TARGET]["effect"] == r.effect


def test_the_drawing_encodes_layers_width_and_sign(circuit, tmp_path):
    pos = layered_layout(circuit)
    last = max(d["layer"] for n, d in circuit.nodes(data=True) if n != TARGET)
    for n, d in circuit.nodes(data=True):
        assert pos[n][0] == (last + 1 if n == TARGET else d["layer"])
    heads_by_index = {}
    for n, d in circuit.nodes(data=True):
        if d["kind"] == "head":
            heads_by_index.setdefault(d["head"], set()).add(pos[n][1])
    assert all(len(ys) == 1 for ys in heads_by_index.values())  # head h: one row, every layer

    fig = draw_circuit(circuit)
    arrows = [p for p in fig.axes[0].patches if isinstance(p, FancyArrowPatch)]
    assert len(arrows) == 5
    effects = sorted((d["abs_effect"], d["sign"]) for *_, d in circuit.edges(data=True))
    top = effects[-1][0]
    for arrow, (a, _) in zip(arrows, effects, strict=True):  # drawn weakest first
        low, high = DrawOptions().min_edge_width, DrawOptions().max_edge_width
        assert arrow.get_linewidth() == pytest.approx(low + (high - low) * a / top)
    # Colour says what an edge does for its target (supports / opposes), not the raw sign.
    roles = edge_roles(circuit).values()
    assert sorted(to_hex(a.get_edgecolor()) for a in arrows) == sorted(
        ROLE_COLORS[r] for r in roles
    )

    png = save_figure(fig, tmp_path / "circuit.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = save_figure(fig, tmp_path / "circuit.svg")
    assert ET.parse(svg).getroot().tag == "{http://www.w3.org/2000/svg}svg"
    with pytest.raises(ValueError, match="cannot save a figure as '.jpg'"):
        save_figure(fig, tmp_path / "circuit.jpg")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["circuit.png", "circuit.svg"]


def test_attention_views_hold_the_model_patterns(tiny):
    heads = ["L0.H1", "L2.H3"]
    (view,) = attention_views(tiny, TEXTS[:1], heads)
    _, cache = tiny.run_with_cache(tiny.to_tokens(TEXTS[0]))
    assert view.tokens == tiny.to_str_tokens(TEXTS[0]) and view.tokens[0] == "<bos>"
    assert view.patterns.shape == (2, 25, 25)
    np.testing.assert_allclose(view.patterns[0], cache["blocks.0.attn.hook_pattern"][0, 1])
    np.testing.assert_allclose(view.patterns[1], cache["blocks.2.attn.hook_pattern"][0, 3])
    np.testing.assert_allclose(view.patterns.sum(-1), 1.0, atol=1e-5)
    assert np.triu(view.patterns, k=1).max() == 0.0


def test_attention_view_props_are_what_circuitsvis_renders(tiny):
    from circuitsvis.attention import attention_heads

    (view,) = attention_views(tiny, ["a <b>tag</script> x"], ["L1.H0"])
    props = view.props()
    local = attention_heads(
        attention=props["attention"], tokens=view.tokens, attention_head_names=view.heads
    ).local_src
    m = re.search(
        r"CircuitsVis\.render\(\s*\"[^\"]+\",\s*CircuitsVis\.(\w+),\s*(\{.*\})\s*\)", local, re.S
    )
    assert m.group(1) == "AttentionHeads" and json.loads(m.group(2)) == props
    html = attention_html([view])
    assert html.count("</script>") == 2  # the bundle and the view: token text cannot close one
    assert "a <b>tag" not in html


def test_circuit_heads_fold_parts_and_rank_by_score():
    g = new_graph("tiny", data="d", metric="m", seed=0)
    for u, e in [
        ("L2.H1.q", 0.5),
        ("L2.H1.k", -0.4),
        ("L0.H3", 0.6),
        ("L1.H0", 0.1),
        ("L1.MLP", 9.0),
    ]:
        add_effect(g, u, "target:x", e, intervention="z")
        g.nodes[u]["score"] = e
    assert circuit_heads(g) == ["L0.H3", "L1.H0", "L2.H1"]
    assert circuit_heads(g, max_heads=2) == ["L0.H3", "L2.H1"]  # |0.5| + |-0.4| > 0.6


def test_attention_views_refuse_bad_heads(tiny):
    with pytest.raises(ValueError, match="outside this model"):
        attention_views(tiny, TEXTS, ["L4.H0"])
    with pytest.raises(ValueError, match="not a head id"):
        attention_views(tiny, TEXTS, ["L1.H0.q"])
    with pytest.raises(ValueError, match="no texts"):
        attention_views(tiny, [], ["L1.H0"])


@pytest.fixture(scope="module")
def report(tiny, circuit, head_scores, tmp_path_factory):
    folder = tmp_path_factory.mktemp("report")
    fig = Figure(figsize=(4, 2))
    fig.add_subplot().bar(range(len(head_scores)), head_scores["effect"])
    png = save_figure(draw_circuit(circuit), folder / "circuit.png")
    views = attention_views(tiny, TEXTS, circuit_heads(circuit))
    path = write_report(
        folder / "report.html",
        "P0 circuit <tiny>",
        [
            Section(
                "Summary",
                [
                    "# Result\nThe **five** strongest heads of `L0-L2`.\n\n"
                    "- one\n- two <script>alert(1)</script>"
                ],
            ),
            Section(
                "Circuit",
                [GraphView(circuit, "top-5 heads"), Table(head_scores, "all heads", max_rows=4)],
            ),
            Section("Figures", [Image(fig, "effect per head"), png]),
            Section("Attention", views),
        ],
        settings={"model": "tiny", "seed": 0, "texts": " | ".join(TEXTS)},
    )
    return path, views


def test_the_report_is_one_self_contained_file(report, circuit):
    path, views = report
    text = path.read_text(encoding="utf-8")
    assert text.count("var CircuitsVis=") == 1  # the bundle, inlined once
    assert text.count("<script>CircuitsVis.render(") == len(views) == len(TEXTS)
    assert not re.search(r"<script[^>]+src=|<link\b|<img[^>]+src=\"(?!data:)|@import", text)
    assert text.count('<img src="data:image/png;base64,') == 2
    assert text.count("<svg") >= 1  # the circuit drawing, inline
    assert "<strong>five</strong>" in text and "<code>L0-L2</code>" in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text and "<li>one</li>" in text
    assert "first 4 of 16 rows" in text and "edges, strongest |effect| first" in text
    assert "P0 circuit &lt;tiny&gt;" in text and "<figcaption>top-5 heads</figcaption>" in text
    assert all(isinstance(v, AttentionView) for v in views)
    for n in circuit:
        assert n in text  # the edge table names every node
    assert [p.name for p in path.parent.iterdir() if p.name.startswith(".")] == []


def test_bad_report_items_raise_before_anything_is_written(tmp_path):
    with pytest.raises(TypeError, match="cannot put a int in a report; items are: str"):
        write_report(tmp_path / "r.html", "t", [Section("s", [3])])
    # (the tests' annotation check refuses it first; without it, the function's own message)
    with pytest.raises((TypeError, TypeCheckError), match="sections must be Section|Type-check"):
        write_report(tmp_path / "r.html", "t", ["text"])
    (tmp_path / "x.jpg").write_bytes(b"jpg")
    with pytest.raises(ValueError, match="must be .png or .svg"):
        write_report(tmp_path / "r.html", "t", [Section("s", [tmp_path / "x.jpg"])])
    with pytest.raises((TypeError, TypeCheckError), match="items must be a list|Type-check"):
        Section("s", pd.DataFrame({"a": [1]}))
    assert [p.name for p in tmp_path.iterdir()] == ["x.jpg"]
    g = new_graph("tiny", data="d", metric="m", seed=0)
    add_effect(g, "L0.H0", "target:x", 1.0, intervention="z")
    page = render_report("t", [Section("s", ["x", g])])
    assert "Settings" not in page and "CircuitsVis" not in page  # no views: no bundle


@pytest.mark.skipif(
    shutil.which("chromium") is None,
    reason="chromium is not installed (apt-get install -y chromium); CI installs it",
)
def test_the_report_renders_in_headless_chromium(report, chromium_dom):
    path, views = report
    dom = chromium_dom(path)
    for i, view in enumerate(views):
        start = dom.index(f'id="circuits-attention-{i}"')
        rendered = dom[start : dom.index("<script>", start)]
        # Only circuitsvis's script puts these into the empty <div>.
        assert "Head Selector" in rendered
        assert rendered.count("<canvas") == len(view.heads) + 1  # thumbnails + zoomed head
        for head in view.heads:
            assert f">{head}</h4>" in rendered
    assert dom.count("<svg") >= 1


# -- a trace's report: numbers, tables and the summary as a reader sees them ---------------

SECONDARY_SUMMARY = Path(__file__).parents[1] / "docs/secondary/smollm2-135m/summary.json"
# Written before </body>: how far the page is wider than the window (0: no sideways scroll).
MEASURE = (
    "<script>window.addEventListener('load', () => document.body.setAttribute("
    "'data-overflow', document.documentElement.scrollWidth - "
    "document.documentElement.clientWidth));</script>"
)


@pytest.fixture(scope="module")
def p0_trace(planted_p0_trace, tmp_path_factory):
    """The planted P0 circuit (tests/test_p0.py) traced on 4 + 4 short texts, and its report."""
    folder = tmp_path_factory.mktemp("p0-report")
    return planted_p0_trace, write_trace(planted_p0_trace, folder)


def section(page: str, heading: str) -> str:
    start = page.index(f"<h2>{heading}</h2>")
    end = page.find("<h2>", start + 1)
    return page[start : end if end > 0 else None]


def test_numbers_that_round_to_zero_print_without_a_minus_sign():
    assert percent(-0.004) == "0%" and percent(-1e-6, 1) == "0.0%" and percent(-0.006) == "-1%"
    assert number(-1e-9, "+.3f") == "+0.000" and number(-0.001) == "0.00"
    assert number(-0.02) == "-0.02" and number(-3e-9, ".1e") == "-3.0e-09"
    assert number(float("nan")) == "nan" and number(-1234.0, ",.0f") == "-1,234"


def test_the_p0_text_never_says_minus_zero(p0_trace):
    trace, _ = p0_trace
    # The random control removes none of the planted sink (measured -1e-6 of it).
    assert trace.summary()["node_share_removed_by_random"] == pytest.approx(0, abs=1e-4)
    text = trace.text()
    assert "components removes 0% (sd 0.00)" in text
    assert not re.search(r"-0(\.0+)?(?![\d.])", text)  # "-0%", "-0.00"; "-0.25" is fine


def test_the_per_text_confirmation_has_no_empty_or_definitional_column(p0_trace):
    trace, report = p0_trace
    by_text = trace.confirmation_by_text
    # clean and all_formation_ablated define the scale of `fraction` (0 and 1): they are
    # columns (each text's own reference values), not rows with an empty or constant fraction.
    assert set(by_text.run) == {
        "circuit_ablated", "all_but_circuit_ablated", "random_control_ablated"
    }  # fmt: skip
    assert list(by_text.columns) == [
        "text", "run", "p0_attention", "fraction", "p0_attention_clean",
        "p0_attention_all_ablated",
    ]  # fmt: skip
    assert not by_text.isna().any().any()
    assert by_text.groupby("run").fraction.mean().to_dict() == pytest.approx(
        {"circuit_ablated": 1, "all_but_circuit_ablated": 1, "random_control_ablated": 0},
        abs=1e-3,
    )
    written = pd.read_csv(report.parent / "confirmation_by_text.csv")
    assert list(written.columns) == list(by_text.columns) and not written.isna().any().any()
    tables = section(report.read_text(encoding="utf-8"), "Tables")
    per_text = tables[tables.index("confirmation_by_text.csv") :]
    per_text = per_text[: per_text.index("</table>")]
    assert "NaN" not in per_text and ">clean<" not in per_text
    # The overall table keeps the two reference rows; their fraction cell is left empty.
    overall = trace.confirmation.set_index("run")
    assert overall.fraction.isna().to_dict() == {
        "clean": True, "circuit_ablated": False, "all_formation_ablated": True,
        "all_but_circuit_ablated": False, "random_control_ablated": False,
    }  # fmt: skip
    assert "NaN" not in tables


def test_the_summary_shows_nested_values_as_tables_not_python_reprs(p0_trace):
    trace, report = p0_trace
    summary = section(report.read_text(encoding="utf-8"), "Every summary number")
    assert "{" not in summary and "[" not in summary and "&#x27;" not in summary
    # sink_stays_at_0: one row per first-token variant, one column per measure.
    nested = summary[summary.index("sink_stays_at_0") :]
    assert nested.index('<table class="nested">') < nested.index("</td>")
    for col in ("by_attention", "by_norm", "p0_mass"):
        assert f"<th>{col}</th>" in nested
    assert "<th>node_circuit_heads</th><td>L0.H0</td>" in summary
    assert "<th>node_share_removed_by_random</th><td>" in summary
    assert not re.search(r"<td>-0(\.0*)?(e[+-]?0+)?</td>", summary)
    page = trace._repr_html_()
    assert "{&#x27;" not in page and '<table class="nested">' in page


def test_the_secondary_summary_reads_as_tables_and_key_value_lines():
    summary = json.loads(SECONDARY_SUMMARY.read_text())["summary"]
    page = render_report("secondary", [Section("Summary", [KeyValues(summary, name="summary")])])
    body = section(page, "Summary")
    assert not re.search(r"[{\[](&#x27;|\d)", body)  # no dict or list reprs
    assert "word: 120<br>space: 69" in body  # token_types: "key: value" lines
    assert "<th>labels</th><td>secondary</td>" in body  # a list of one
    rescale = body[body.index("<th>rescale</th>") :]
    assert rescale.index('<table class="nested">') < rescale.index("</td>")
    assert "<th>cos</th>" in rescale and "<th>lifetime</th>" in rescale
    # A bare dict is a key-value table too; numbers get 4 significant digits.
    assert "<td>0.9780</td>" not in body and "<td>0.978</td>" in body
    assert "<th>a</th><td>b: 1</td>" in render_report("t", [Section("s", [{"a": {"b": 1}}])])
    assert value_html({"x": [1, 2], "y": None}) == "x: 1, 2<br>y: none"


def test_wide_tables_scroll_in_their_own_box(p0_trace):
    _, report = p0_trace
    page = re.sub(r"<script.*?</script>", "", report.read_text(encoding="utf-8"), flags=re.S)
    tables = [
        (page[m.start() - 30 : m.start()], m.group(0))
        for m in re.finditer(r"<table[^>]*>", page)
        if "nested" not in m.group(0)  # inside a cell of a table that scrolls
    ]
    assert len(tables) > 10 and all('<div class="scroll">' in before for before, _ in tables)


@pytest.mark.skipif(
    shutil.which("chromium") is None,
    reason="chromium is not installed (apt-get install -y chromium); CI installs it",
)
def test_the_p0_report_never_scrolls_sideways_in_chromium(p0_trace, chromium_dom, tmp_path):
    _, report = p0_trace
    measured = tmp_path / "report.html"
    measured.write_text(
        report.read_text(encoding="utf-8").replace("</body>", MEASURE + "</body>"),
        encoding="utf-8",
    )
    dom = chromium_dom(measured)
    overflow = re.search(r'data-overflow="(-?\d+)"', dom)
    assert overflow is not None and int(overflow.group(1)) <= 0
    assert 'class="scroll"' in dom


def test_the_report_opens_with_its_finding_and_ends_with_its_settings(p0_trace):
    trace, report = p0_trace
    page = report.read_text(encoding="utf-8")
    headings = re.findall(r"<h2>([^<]+)</h2>", page)
    assert headings[0] == "Finding" and headings[-1] == "Settings"
    assert headings.index("Figures") < headings.index("Tables")
    finding = section(page, "Finding")
    s = trace.summary()
    assert f"{s['edge_circuit_edges']:,} of the model" in finding
    assert "|1 - f| = " in finding and "random circuits of the same size" in finding
    # Figures are captioned with what they show, not their file names.
    figures = section(page, "Figures")
    captions = re.findall(r"<figcaption>([^<]+)</figcaption>", figures)
    assert len(captions) == len(trace.figures()) and all(len(c) > 40 for c in captions)
    # The edge table names what every row shares once, in its caption, not in each row.
    circuit = section(page, "Circuit")
    edges = circuit[circuit.index("(effect: change under removal") :]
    edges = edges[: edges.index("</table>")]
    assert "every edge&#x27;s metric: " in edges or "every edge's metric: " in edges
    assert "<th>metric</th>" not in edges and "<th>role</th>" in edges
    # summary.md opens with the same finding; summary.json says what every key means.
    md = (report.parent / "summary.md").read_text(encoding="utf-8")
    # The planted trace runs on reduced settings: the finding says first that it is rough.
    assert md.startswith(
        "# P0-sink circuit: tiny (rough: reduced settings)\n\n## Finding\n\n**Rough result: a quick"
    )
    assert "\n\nIn tiny, the late P0" in md
    assert md.index("## Figures") < md.index("## In detail") < md.index("## Settings")
    saved = json.loads((report.parent / "summary.json").read_text(encoding="utf-8"))
    assert set(saved["summary"]) <= set(saved["summary_keys"])


def _figure_words(fig) -> str:
    """Every legend, colorbar label, title and axis label of `fig`, as one text."""
    texts = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
    for ax in fig.axes:
        if ax.get_legend() is not None:
            texts += [t.get_text() for t in ax.get_legend().get_texts()]
        texts += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
    return " ".join(texts + [fig.get_suptitle()])


def _role_colours(fig) -> set[str]:
    """The roles whose colour (`attn_sink_circuits.graph.convention`) an artist of `fig` is drawn in."""
    from matplotlib.colors import to_hex

    from attn_sink_circuits.graph.convention import ROLE_COLORS

    found = set()
    for ax in fig.axes:
        for artist in [*ax.patches, *ax.lines, *ax.images]:
            if hasattr(artist, "get_cmap") and artist.get_cmap().name == "supports_opposes":
                found |= {"supports", "opposes"}
                continue
            for get in ("get_facecolor", "get_edgecolor", "get_color"):
                try:
                    colour = to_hex(getattr(artist, get)())
                except (AttributeError, ValueError):
                    continue
                found |= {r for r in ("supports", "opposes") if ROLE_COLORS[r] == colour}
    return found


def test_every_figure_names_its_colours_in_words(p0_trace):
    from attn_sink_circuits.graph.convention import COLOR_WORDS
    from attn_sink_circuits.report.draw import draw_circuit

    trace, _ = p0_trace
    figures = {**trace.figures(), "circuit": draw_circuit(trace.graph),
               "node_circuit": draw_circuit(trace.node_graph)}  # fmt: skip
    coloured = {}
    for name, fig in figures.items():
        words = _figure_words(fig)
        assert words.strip(), f"{name} has no legend, labels or title"
        roles = _role_colours(fig)
        coloured[name] = roles
        for role in roles:
            # "blue: supports the sink ...", "orange: opposes it ..."
            assert f"{COLOR_WORDS[role]}: {role[:-1]}" in words, (name, role, words[:300])
    # The figures that carry a sign do use the convention's colours.
    assert {"heads", "mlps", "circuit", "node_circuit"} <= {n for n, r in coloured.items() if r}


def test_unstable_node_level_effects_and_plateaus_are_named_with_their_spread():
    from attn_sink_circuits.studies.p0.config import P0Config
    from attn_sink_circuits.studies.p0.summary import unstable_text

    # Seven unrelated heads at +0.23..+0.24, each carried by one of two texts (sd as large as
    # the mean: today's quick run), one stable supporting head, one MLP too weak to matter.
    effects = [0.240, 0.238, 0.237, 0.237, 0.236, 0.236, 0.230, -0.068]
    heads = pd.DataFrame(
        {
            "layer": [10, 2, 10, 1, 0, 0, 0, 1],
            "head": [8, 2, 6, 4, 0, 7, 1, 7],
            "p0_attention@p0": effects,
            "p0_attention@p0:sd": [0.41] * 7 + [0.01],
        }
    )
    mlps = pd.DataFrame(
        {"layer": [3, 11], "p0_attention@p0": [-0.01, -0.7], "p0_attention@p0:sd": [0.2, 0.05]}
    )
    text = unstable_text(heads, mlps, P0Config(n_texts=2))
    assert "Unstable across the 2 texts" in text and "L10.H8 (+0.240, sd 0.41)" in text
    assert "L1.H7" not in text and "L11.MLP" not in text  # stable
    assert "L3.MLP" not in text  # too weak to matter among the MLPs (-0.01 of -0.7)
    assert "7 unrelated components share one effect (+0.230 to +0.240)" in text
    steady = heads.assign(**{"p0_attention@p0:sd": 0.01})
    assert unstable_text(steady, mlps, P0Config(n_texts=2)) == ""


def test_unstable_list_names_each_component_once_in_order_and_finds_a_lower_plateau():
    """Heads and MLPs share index labels (0, 1, ...): each unstable one is named once, all
    sorted by |effect|; three heads sharing +0.11 under a larger +0.5 are a plateau measured
    from their own value (the demo's case: the note did not fire, measured from the largest)."""
    from attn_sink_circuits.studies.p0.config import P0Config
    from attn_sink_circuits.studies.p0.summary import unstable_text

    heads = pd.DataFrame(
        {"layer": [0, 3, 4, 5], "head": [0, 1, 2, 3],
         "p0_attention@p0": [0.5, 0.110, 0.114, 0.112], "p0_attention@p0:sd": [0.6] * 4}
    )  # fmt: skip
    mlps = pd.DataFrame(
        {"layer": [0, 1], "p0_attention@p0": [0.3, 0.2], "p0_attention@p0:sd": [0.4, 0.3]}
    )
    text = unstable_text(heads, mlps, P0Config(n_texts=4))
    names = ["L0.H0", "L0.MLP", "L1.MLP", "L4.H2", "L5.H3", "L3.H1"]
    assert [text.count(n + " (") for n in names] == [1] * 6
    assert [text.index(n + " (") for n in names] == sorted(text.index(n + " (") for n in names)
    assert "3 unrelated components share one effect (+0.110 to +0.114)" in text
