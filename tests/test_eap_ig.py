"""EAP-IG / MIB graph JSON: a file written by hand reads in and is judged on pairs; a circuit
written out reads back with plain `json` under EAP-IG's node and edge names, with MIB's sign
(supporting edges positive); files of the old sign are recognised; grouped-query k/v inputs fan
out per query head and fold back."""

from __future__ import annotations

import json

import networkx as nx
import pytest

from attn_sink_circuits.discovery import DiscoveryConfig, circuit_graph, discover, judge_saved
from attn_sink_circuits.discovery.pairs import tokenize
from attn_sink_circuits.discovery.saved import eap_ig_circuit
from attn_sink_circuits.graph.eap_ig import (
    all_edges,
    from_eap_ig,
    old_sign,
    read_eap_ig,
    shape_of,
    write_eap_ig,
)

ROWS = [
    {"clean": f"When {a}n and {b}b ran, {b}b gave it to", "corrupt":
     f"When {c}n and {d}b ran, {e}b gave it to", "answer": a, "wrong": b}
    for a, b, c, d, e in ["ABCDE", "BCDEA", "CDEAB", "DEABC", "EABCD", "FGHIJ", "GHIJF", "HIJFG"]
]  # fmt: skip
# Written by hand as EAP-IG writes it (the tiny model: 4 layers, 4 query heads, 2 kv heads).
HAND = {
    "cfg": {"n_layers": 4, "n_heads": 4, "parallel_attn_mlp": False, "d_model": 64},
    "nodes": {"input": True, "a0.h1": {"in_graph": True}, "m1": {"in_graph": True},
              "a2.h2": {"in_graph": True}, "logits": {"in_graph": True}},
    "edges": {
        "input->a0.h1<v>": {"score": 0.5, "in_graph": True},
        "a0.h1->m1": {"score": -0.25, "in_graph": True},
        "m1->a2.h2<k>": {"score": 0.2, "in_graph": True},
        "m1->a2.h3<k>": {"score": 0.4, "in_graph": True},
        "a2.h2->logits": {"score": 1.0, "in_graph": True},
        "m1->logits": {"score": 0.1, "in_graph": True},
        "input->logits": {"score": 9.0, "in_graph": False},
    },
}  # fmt: skip


@pytest.fixture(scope="module")
def pairs(tiny):
    return tokenize(tiny, ROWS)


def test_a_hand_written_eap_ig_file_reads_in_and_is_judged(tiny, pairs, tmp_path):
    path = tmp_path / "hand.json"
    path.write_text(json.dumps(HAND))
    data = read_eap_ig(path)
    edges = from_eap_ig(data, n_kv_heads=2)
    # MIB's sign (positive supports) read back as estimated effects (negative supports)
    assert not old_sign(data)
    assert edges == {
        "embed->L0.H0.v": -0.5,  # v of query head 1 is kv head 0 (group of 2)
        "L0.H1->L1.MLP": 0.25,
        "L1.MLP->L2.H1.k": pytest.approx(-0.3),  # a2.h2<k> and a2.h3<k>: one shared input
        "L2.H2->target:logits": -1.0,
        "L1.MLP->target:logits": -0.1,
    }
    g = eap_ig_circuit(data, tiny, str(path))
    result = judge_saved(tiny, g, pairs, n_random=2, n_boot=20)
    assert result["n_edges"] == 5 and result["n_texts"] == len(pairs)
    assert result["model_metric"] != result["empty_metric"]
    with pytest.raises(ValueError, match="judge it on pairs"):
        judge_saved(tiny, g, ["some text"] * 3)
    bad = dict(HAND, cfg=dict(HAND["cfg"], n_layers=5))
    with pytest.raises(ValueError, match="5 layers x 4 heads"):
        eap_ig_circuit(bad, tiny)
    with pytest.raises(ValueError, match="is outside cfg"):
        from_eap_ig(dict(HAND, edges={"a7.h0->logits": {"score": 1, "in_graph": True}}))
    path.write_text('{"nodes": {}}')
    with pytest.raises(ValueError, match="not an EAP-IG graph"):
        read_eap_ig(path)


def test_a_circuit_written_out_reads_back_with_plain_json(tiny, pairs, tmp_path):
    cfg = DiscoveryConfig(method="eap", ablation="resample", n_boot=10, n_stability=2,
                          n_random=2, max_exact=3, n_curve=4)  # fmt: skip
    circuit = discover(tiny, pairs[:5], pairs[5:], None, positions=None, config=cfg)
    g = circuit_graph(circuit, tiny, data="test pairs", metric_spec={"metric": "pairs"})
    path = write_eap_ig(g, tmp_path / "circuit.json", shape_of(tiny))
    d = json.loads(path.read_text())
    assert d["cfg"] == {"n_layers": 4, "n_heads": 4, "parallel_attn_mlp": False, "d_model": 64,
                        "score_convention": "mib"}  # fmt: skip
    want_nodes = {"input", "logits"} | {f"m{l}" for l in range(4)}  # noqa: E741
    want_nodes |= {f"a{l}.h{h}" for l in range(4) for h in range(4)}  # noqa: E741
    assert set(d["nodes"]) == want_nodes
    assert list(d["edges"]) == all_edges(4, 4) and "input->a0.h0<q>" in d["edges"]
    # per block l: q, k, v of 4 heads from the 1 + 5 l senders before it, the MLP from those
    # and the block's 4 heads; then the logits from all 21 senders
    per_block = [3 * 4 * (1 + 5 * layer) + (1 + 5 * layer + 4) for layer in range(4)]
    assert len(d["edges"]) == sum(per_block) + 21 == 479
    kept = {k for k, v in d["edges"].items() if v["in_graph"]}
    direct = [(u, v) for u, v, e in g.edges(data=True) if e["edge_kind"] == "direct"]
    fanned = sum(2 if v.endswith((".k", ".v")) else 1 for _, v in direct)
    assert len(kept) == fanned > 0
    for name in kept:  # the nodes of a kept edge are in the graph
        parent, child = name.split("->")
        assert d["nodes"][parent]["in_graph"] and d["nodes"][child.split("<")[0]]["in_graph"]
    back = from_eap_ig(d, n_kv_heads=2)
    assert len(back) == len(direct)
    again = judge_saved(tiny, eap_ig_circuit(d, tiny), pairs[5:], n_random=2, n_boot=10)
    assert again["faithfulness"] == pytest.approx(circuit.heldout.faithfulness, abs=1e-5)
    # more pairs than a batch: judged a chunk at a time (ChunkRunner), the same values
    assert len(pairs[5:]) > 2
    chunked = judge_saved(tiny, eap_ig_circuit(d, tiny), pairs[5:], n_random=2, n_boot=10,
                          batch_size=2)  # fmt: skip
    assert chunked["faithfulness"] == pytest.approx(again["faithfulness"], abs=5e-5)
    assert chunked["complement_faithfulness"] == pytest.approx(
        again["complement_faithfulness"], abs=5e-5)  # fmt: skip


def _hand_circuit(ungrouped: bool = False) -> nx.DiGraph:
    g = nx.DiGraph(config=json.dumps({"kv_inputs": "ungrouped" if ungrouped else "grouped"}))
    g.add_edge("L0.H1", "L2.H1.k", edge_kind="direct", estimated_effect=-2.0)  # supports
    g.add_edge("L1.MLP", "target:logit_diff", edge_kind="direct", estimated_effect=0.5)  # opposes
    g.add_edge("embed", "L1.MLP", edge_kind="direct", effect=-0.25)  # exact effect only
    return g


def test_an_exported_circuit_reads_with_mibs_sign(tiny, tmp_path):
    shape = shape_of(tiny)
    d = json.loads(write_eap_ig(_hand_circuit(), tmp_path / "c.json", shape).read_text())
    scores = {k: v["score"] for k, v in d["edges"].items() if v["in_graph"]}
    # MIB attributes the loss (minus the logit difference): supporting edges are positive
    assert scores == {"a0.h1->a2.h2<k>": 2.0, "a0.h1->a2.h3<k>": 2.0, "m1->logits": -0.5,
                      "input->m1": 0.25}  # fmt: skip
    # MIB's CPR circuits take the largest signed scores first (apply_topn, absolute=False)
    ranked = sorted(d["edges"], key=lambda k: d["edges"][k]["score"], reverse=True)
    assert ranked[:2] == ["a0.h1->a2.h2<k>", "a0.h1->a2.h3<k>"] and ranked[-1] == "m1->logits"
    assert from_eap_ig(d, n_kv_heads=2) == {"L0.H1->L2.H1.k": -2.0, "L1.MLP->target:logits": 0.5,
                                            "embed->L1.MLP": -0.25}  # fmt: skip
    # a file of the old sign (no mark, scores only on circuit edges) reads as it was meant
    old = dict(d, cfg={k: v for k, v in d["cfg"].items() if k != "score_convention"})
    old["edges"] = {k: dict(v, score=-v["score"]) for k, v in d["edges"].items()}
    assert old_sign(old) and not old_sign(d)
    assert from_eap_ig(old, n_kv_heads=2) == from_eap_ig(d, n_kv_heads=2)
    # the ungrouped graph's k input of query head 1 is a1's own: one edge, no fan-out
    u = write_eap_ig(_hand_circuit(ungrouped=True), tmp_path / "u.json", shape)
    kept = {k for k, v in json.loads(u.read_text())["edges"].items() if v["in_graph"]}
    assert "a0.h1->a2.h1<k>" in kept and len(kept) == 3


def test_only_logit_circuits_have_an_eap_ig_form(tiny):
    g = nx.DiGraph()
    g.add_edge("L0.H1", "target:p0_attention(layers=[2])", edge_kind="direct", effect=0.1)
    with pytest.raises(ValueError, match="only circuits of logit metrics"):
        write_eap_ig(g, "/tmp/never.json", shape_of(tiny))
