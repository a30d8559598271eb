"""The secondary sinks' edge circuit: the per-prompt sink metric against one prompt at a time,
and exact recovery of the planted secondary sink (its forming MLP into the keys of the heads
that attend to it), judged on held-out texts."""

from __future__ import annotations

import pytest
import torch

from attn_sink_circuits.core.sites import hook_names
from attn_sink_circuits.models.planted import planted_secondary_model
from attn_sink_circuits.patching import patch
from attn_sink_circuits.patching.metrics import p0_attention
from attn_sink_circuits.studies.edge_config import EdgeFitConfig
from attn_sink_circuits.studies.secondary.census import find_secondary
from attn_sink_circuits.studies.secondary.corpus import make_corpus
from attn_sink_circuits.studies.secondary.edges import choose_events, secondary_edge_circuit

# The planted token is ","; each text holds it once, at a different position, with enough
# later tokens for queries (the tiny tokenizer is byte-level).
TEXTS = [
    "ab" + "," + "cdefghijklmnopqrstu",
    "abcd" + "," + "efghijklmnopqrstuv",
    "xyzab" + "," + "cdefghijklmnopqrs",
    "hello" + "," + " world and more t",
    "q" + "," + "rstuvwxyzabcdefghij",
    "the cat" + "," + " sat on it all day",
    "one two" + "," + " three four five",
    "mn" + "," + "opqrstuvwxyzabcdefg",
    "seven" + "," + " eight nine ten el",
    "abc" + "," + "defghijklmnopqrstuv",
]


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    return planted_secondary_model(folder=tmp_path_factory.mktemp("planted_edges"))


def test_per_prompt_sink_attention_equals_one_prompt_at_a_time(planted):
    model = planted.model
    tokens = torch.tensor([r[:12] for r in make_corpus(model, TEXTS[:3]).rows])  # BOS first
    layers = [4, 5]
    at = [3, 5, 6]
    run = patch(model, tokens, [], names=hook_names("pattern", layers), logits=False)
    acts = {h: run.cache[h] for h in hook_names("pattern", layers)}
    together = p0_attention(layers, at)(acts)
    alone = [p0_attention(layers, p)({h: a[i : i + 1] for h, a in acts.items()}) for i, p in
             enumerate(at)]  # fmt: skip
    assert torch.allclose(together, torch.cat(alone), atol=1e-6)
    # Rows of several runs repeat the prompts (run-major): the positions tile.
    tiled = p0_attention(layers, at)({h: a.repeat(2, 1, 1, 1) for h, a in acts.items()})
    assert torch.allclose(tiled, together.repeat(2), atol=1e-6)
    # The planted token draws far more attention than the token after it (P0 still draws most).
    after = p0_attention(layers, [p + 1 for p in at])(acts)
    assert (together > 10 * after).all()
    with pytest.raises(ValueError, match="non-empty list"):
        p0_attention(layers, [])
    with pytest.raises(ValueError, match="needs query positions after the sink"):
        p0_attention(layers, [3, 5, 11])(acts)


def test_the_planted_secondary_circuit_is_found_and_holds_on_held_out_texts(planted):
    model = planted.model
    corpus = make_corpus(model, TEXTS)
    census = find_secondary(model, corpus, progress=False)
    events = choose_events(census, corpus, edge_tokens=16, min_queries=4)
    assert len(events) == len(TEXTS) and (events.l_start == planted.l_start).all()
    cfg = EdgeFitConfig().with_options(
        n_fit=5, n_heldout=5, n_tokens=16, n_curve=10, n_stability=20, n_boot=200,
        n_exact_texts=2,
    )  # fmt: skip
    found = secondary_edge_circuit(model, corpus, census, cfg, min_queries=4)
    assert found is not None
    assert found.layers == list(range(planted.l_start + 1, planted.l_start + planted.lifetime + 1))
    assert sorted(found.events.split.value_counts().tolist()) == [5, 5]
    s = found.circuit.summary()
    assert s["heldout_faithfulness"] >= 0.8
    assert s["random_faithfulness_mean"] < 0.2 and s["complement_faithfulness"] < 0.2
    frame = found.circuit.edges_frame()
    top = frame.reindex(frame.direct_effect.abs().sort_values(ascending=False).index)
    strongest = list(top.sender + "->" + top.receiver)[:5]
    mlp = f"L{planted.l_start}.MLP"
    # The forming MLP writes the sink state that later heads key on.
    assert any(e.startswith(f"{mlp}->L") and e.endswith(".k") for e in strongest[:3])
    graph = found.graph
    assert graph.graph["heldout_faithfulness"] == pytest.approx(s["heldout_faithfulness"])
    assert "per text" in graph.graph["metric_spec"]


def test_too_few_events_give_none(planted):
    model = planted.model
    corpus = make_corpus(model, TEXTS[:3])
    census = find_secondary(model, corpus, progress=False)
    cfg = EdgeFitConfig().with_options(
        n_fit=2, n_heldout=2, n_tokens=16, n_curve=4, n_stability=0, n_boot=0
    )
    assert secondary_edge_circuit(model, corpus, census, cfg, min_queries=4) is None


def test_trace_secondary_reports_the_edge_circuit(planted, tmp_path):
    from attn_sink_circuits.report import write_trace
    from attn_sink_circuits.studies.secondary import trace_secondary

    trace = trace_secondary(
        planted.model, TEXTS, edge_n_fit=5, edge_n_heldout=5, edge_n_tokens=16, min_queries=4,
        n_swap_events=1, edge_n_curve=8, edge_n_stability=5, edge_n_boot=100, progress=False,
    )  # fmt: skip
    assert trace.edges is not None and trace.graph is trace.edges.graph
    assert trace.node_graph is not None and trace.node_graph is not trace.graph
    s = trace.summary()["edge_circuit"]
    assert s["heldout_faithfulness"] >= 0.8 and s["l_start"] == planted.l_start
    assert s["events_by_split_and_part"] == {"fit": {"text": 5}, "heldout": {"text": 5}}
    tables = trace.tables()
    assert len(tables["edge_circuit"]) == s["n_edges"] and len(tables["edge_events"]) == 10
    assert "**Edge circuit (held out).**" in trace.text()
    write_trace(trace, tmp_path / "out")
    assert (tmp_path / "out" / "faithfulness_curve.png").exists()
    assert (tmp_path / "out" / "edge_circuit.csv").exists()
