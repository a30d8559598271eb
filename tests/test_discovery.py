"""Edge-level discovery: the edge-patched forward against hand-written references, EAP / EAP-IG
against finite differences and completeness, pruning and greedy growth on hand-made masks,
exact recovery of a planted circuit judged on held-out texts, and the errors."""

from __future__ import annotations

import json

import pytest
import torch

from attn_sink_circuits.discovery import (
    DiscoveryConfig,
    EdgeRunner,
    build_space,
    circuit_graph,
    discover,
    eap,
    eap_ig,
    edge_effects,
    judge_saved,
    prune,
    read_texts,
    split_texts,
    token_rows,
)
from attn_sink_circuits.discovery.components import project_qkv
from attn_sink_circuits.discovery.evaluation import (
    bootstrap_interval,
    evaluate,
    faithfulness,
    greedy_order,
)
from attn_sink_circuits.discovery.forward import full_keep
from attn_sink_circuits.models.planted import planted_p0_model
from attn_sink_circuits.patching.metrics import Metric, p0_attention, resid_norm

TEXTS = [
    "Natalia sold clips to friends in May.",
    "The quick brown fox jumps over dogs.",
    "Weights: 12 kg, 7 kg and 30 kg total",
    "Sara reads pages daily; how many now?",
    "Every cat likes milk, fish and naps.",
    "Bob ran 5 km, then 3 km more today.",
]
# Texts on which the planted sink forms (P0 attention ~1 in layers 2-3; it does not form on
# every text of distinct-ish characters).
HELD_OUT = [
    "Lena paints red boats by the river.",
    "Ten birds sat on a wire at dusk now.",
    "Max wrote 3 letters to his aunt Joy.",
    "Eli sang two songs for his sister.",
]


@pytest.fixture(scope="module")
def tokens(tiny):
    return token_rows(tiny, TEXTS[:3], 12)


def edge_hooks(model, runner, e):
    """Forward hooks that ablate edge `e` alone, by hand, at the runner's positions: the
    sender's output difference (from the clean run) is subtracted from the one receiver's input
    only. Returns the hooks (none for the target, which the caller's read ablates) and the
    receiver, positions and difference."""
    r, s = runner.space.edges[e].tolist()
    rec = runner.space.receivers[r]
    pos = runner.positions
    delta = runner.clean.outputs[:, s] - runner.clean.ablated[:, s]  # batch pos d
    held: dict = {}
    hooks = []
    if rec.kind in ("q", "k", "v"):

        def grab(act, hook):
            held["resid"] = act[:, pos]

        def swap(act, hook):
            x = (held["resid"] - delta).unsqueeze(1).expand(-1, act.shape[2], -1, -1)
            out = act.clone()
            out[:, pos, rec.head] = project_qkv(model, rec.layer, rec.kind, x)[:, :, rec.head]
            return out

        hooks = [
            (f"blocks.{rec.layer}.hook_resid_pre", grab),
            (f"blocks.{rec.layer}.attn.{rec.kind}.hook_out", swap),
        ]
    elif rec.kind == "mlp":
        hooks = [(f"blocks.{rec.layer}.ln2.hook_in", subtract_at(pos, delta))]
    return hooks, rec, pos, delta


def subtract_at(pos, delta):
    """A hook that subtracts `delta` from its activation at `pos`."""

    def minus(act, hook):
        out = act.clone()
        out[:, pos] = act[:, pos] - delta
        return out

    return minus


def _reference(model, tokens, metric, runner, e):
    """The metric with edge `e` alone ablated, by hand: one clean run gives the sender's output
    difference; a second run subtracts it from the one receiver's input only."""
    hooks, rec, pos, delta = edge_hooks(model, runner, e)
    acts = {}

    def read(name):
        def hook(act, hook):
            if rec.kind == "target" and name == rec.hook:
                act = act.clone()
                act[:, pos] = act[:, pos] - delta
            acts[name] = act

        return hook

    with torch.no_grad(), model.hooks(fwd_hooks=hooks + [(h, read(h)) for h in metric.hooks]):
        model(tokens)
    return metric(acts, None)


@pytest.mark.parametrize("positions", [(0,), None])
def test_full_and_empty_circuits(tiny, tokens, positions):
    runner = EdgeRunner(tiny, tokens, p0_attention([2, 3]), positions=positions)
    with torch.no_grad():
        full = runner.run(full_keep(runner.space, 1, 1.0))[0]
        empty = runner.run(full_keep(runner.space, 1, 0.0))[0]
    assert torch.equal(full, runner.clean.metric)
    assert (empty - full).abs().max() > 1e-4


@pytest.mark.parametrize("ablation", ["mean", "resample"])
def test_texts_judged_in_chunks_equal_one_pass(tiny, tokens, ablation):
    """More texts than batch_size: judged a chunk of texts at a time (memory bounded by the
    chunk), each text's value the same as in one pass over all texts."""
    runner = EdgeRunner(tiny, tokens, p0_attention([2, 3]), positions=None, ablation=ablation)
    masks = torch.rand(3, runner.space.n_edges, generator=torch.Generator().manual_seed(0)) < 0.5
    one = evaluate(runner, masks, batch_size=3 * tokens.shape[0])
    chunked = evaluate(runner, masks, batch_size=tokens.shape[0] // 2)
    assert tokens.shape[0] // 2 < tokens.shape[0] and one.shape == chunked.shape == (3, len(tokens))
    torch.testing.assert_close(chunked, one, rtol=0, atol=1e-6)
    assert (one[0] - one[1]).abs().max() > 1e-4  # the circuits differ
    lean = EdgeRunner(tiny, tokens, p0_attention([2, 3]), positions=None, ablation=ablation,
                      judging_only=True)  # fmt: skip
    assert lean.clean.outputs is None  # the held-out runner's memory halved, values the same
    torch.testing.assert_close(evaluate(lean, masks, batch_size=2), one, rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match="kept no clean outputs"):
        lean.run(full_keep(lean.space, 1, 0.0), clean_senders=True)


@pytest.mark.parametrize("positions", [(0,), None])
@pytest.mark.parametrize("metric", [p0_attention([2, 3]), resid_norm(2, 0)])
def test_single_edges_match_a_two_forward_reference(tiny, tokens, metric, positions):
    runner = EdgeRunner(tiny, tokens, metric, positions=positions)
    names = runner.space.edge_names()
    wanted = ["embed->L1.H0.k", "L0.H2->L1.H1.v", "L0.H0->L1.MLP"]
    if positions is None:  # at position 0 alone, a query input changes nothing
        wanted += ["embed->L1.H1.q"] + (["L1.MLP->L2.H3.q"] if "pattern" in metric.hooks[0] else [])
    else:
        assert not any(n.endswith(".q") for n in names)
    wanted += [n for n in names if n.startswith("L1.MLP->target")]
    edges = [names.index(n) for n in wanted]
    got = edge_effects(runner, edges) + runner.clean.metric
    changed = 0
    for row, e in zip(got, edges, strict=True):
        ref = _reference(tiny, tokens, metric, runner, e)
        assert torch.allclose(row, ref, atol=1e-5), names[e]
        changed += bool((ref - runner.clean.metric).abs().max() > 1e-6)
    assert changed >= 2  # the comparison is not between unchanged runs


def test_space_counts_edges_of_a_gqa_model(tiny):
    space = build_space(tiny, p0_attention([3]))
    # 4 layers: per layer 4 q + 2 k + 2 v + 1 MLP receivers; senders: embed + 4 x (4 heads + MLP)
    assert len(space.receivers) == 4 * 9 and len(space.senders) == 1 + 4 * 5
    by_receiver = {}
    for r, s in space.edges.tolist():
        by_receiver.setdefault(r, []).append(s)
    mlp1 = space.group(1, "mlp")[0]
    assert by_receiver[mlp1] == list(range(1 + 5 + 4))  # embed, block 0, heads of block 1
    with pytest.raises(ValueError, match="hook_z"):
        build_space(tiny, Metric("z", ("blocks.1.attn.hook_z",), lambda a, _: a[0].sum((1, 2, 3))))


def test_eap_is_the_gradient_and_ig_is_complete(tiny, tokens):
    runner = EdgeRunner(tiny, tokens, resid_norm(2, 0))
    scores = eap(runner).sum(0)
    top = scores.abs().argsort(descending=True)[:3]
    for e in top.tolist():  # finite differences of the keep-coefficient of one edge
        keep = full_keep(runner.space, 2, 1.0)
        keep[0, e], keep[1, e] = 1.0 + 1e-2, 1.0 - 1e-2
        with torch.no_grad():
            v = runner.run(keep).sum(1)
        assert float(scores[e]) == pytest.approx(float(v[0] - v[1]) / 2e-2, rel=2e-2, abs=1e-3)
    ig = eap_ig(runner, steps=32).sum(0)
    with torch.no_grad():
        empty = runner.run(full_keep(runner.space, 1, 0.0)).sum()
    assert float(ig.sum()) == pytest.approx(float(runner.clean.metric.sum() - empty), rel=0.02)


def test_prune_and_greedy_on_hand_made_masks(tiny):
    space = build_space(tiny, resid_norm(1, 0))
    names = space.edge_names()
    target = next(n for n in names if n.startswith("L0.MLP->target"))
    chain = ["embed->L0.H0.v", "L0.H0->L0.MLP", target]
    dangling = ["L0.H1->L1.H0.q", "L0.H2->L0.MLP"]  # no path on / head without fed input
    mask = torch.zeros(space.n_edges, dtype=torch.bool)
    for n in chain + dangling:
        mask[names.index(n)] = True
    kept = {names[e] for e in prune(space, mask).nonzero().flatten().tolist()}
    assert kept == set(chain)
    key = torch.zeros(space.n_edges)
    key[names.index(target)] = 1.0
    order = greedy_order(space, key)
    assert names[int(order[0])] == target
    assert sorted(order.tolist()) == list(range(space.n_edges))


def test_faithfulness_and_interval():
    assert faithfulness([0.5, 0.7], [1.0, 1.0], [0.0, 0.2]) == pytest.approx(0.5 / 0.9)
    lo, hi = bootstrap_interval([0.5, 0.6, 0.7, 0.8], [1, 1, 1, 1], [0, 0, 0, 0], n_boot=500)
    assert 0.5 <= lo < 0.65 < hi <= 0.8


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    return planted_p0_model(folder=tmp_path_factory.mktemp("planted"))


@pytest.fixture(scope="module")
def planted_circuit(planted):
    model = planted.model
    fit, held = token_rows(model, TEXTS, 20), token_rows(model, HELD_OUT, 20)
    cfg = DiscoveryConfig(n_curve=10, n_stability=20, n_exact_texts=2, max_exact=100)
    return discover(model, fit, held, p0_attention(list(planted.sink_layers)), config=cfg)


def test_discover_recovers_the_planted_circuit_on_held_out_texts(planted, planted_circuit):
    model, circuit = planted.model, planted_circuit
    summary = circuit.summary()
    assert circuit.reached and summary["heldout_faithfulness"] >= 0.8
    assert summary["random_faithfulness_mean"] < 0.2
    assert summary["complement_faithfulness"] < 0.2
    frame = circuit.edges_frame()
    head = f"L{planted.head[0]}.H{planted.head[1]}"
    # The planted path carries the largest exact direct effects: the head into the MLP, the
    # token into the head's values (key/value head 0 serves query heads 0-1), the MLP into
    # the sink heads' keys.
    top = frame.reindex(frame.direct_effect.abs().sort_values(ascending=False).index)
    strongest = list(top.sender + "->" + top.receiver)[:7]
    assert strongest[0] == f"{head}->L{planted.mlp}.MLP"
    assert "embed->L0.H0.v" in strongest
    assert any(e.startswith(f"L{planted.mlp}.MLP->L") and e.endswith(".k") for e in strongest)
    assert top.stability.iloc[:5].min() >= 0.8
    # One sign for both effect columns: the planted path supports the sink, so removing its
    # edges lowers it (negative changes) and `role`, from the exact effect, says so in words.
    # The linear estimate agrees on the strongest edge; on weaker ones it may not (measured:
    # embed -> L0.H0.v exact -0.50, EAP-IG estimate +0.018): a real disagreement of methods.
    assert list(frame.columns) == [
        "sender", "receiver", "direct_effect", "estimated_effect", "role", "stability"
    ]  # fmt: skip
    assert (top.direct_effect.iloc[:3] < 0).all() and top.estimated_effect.iloc[0] < 0
    assert set(top.role.iloc[:3]) == {"supports"}
    graph = circuit_graph(circuit, model, data="planted test")
    assert graph.graph["heldout_faithfulness"] == pytest.approx(summary["heldout_faithfulness"])
    direct = [d for _, _, d in graph.edges(data=True) if d["edge_kind"] == "direct"]
    assert len(direct) == circuit.n_edges and all(d["exact"] for d in direct)
    assert json.loads(graph.graph["config"])["method"] == "eap_ig"


def test_text_files_and_errors(tmp_path, tiny):
    lines = tmp_path / "t.txt"
    lines.write_text("first text\n\nsecond text\n")
    assert read_texts(lines) == ["first text", "second text"]
    jsonl = tmp_path / "t.jsonl"
    jsonl.write_text('{"text": "a"}\n{"text": "b"}\n')
    assert read_texts(jsonl) == ["a", "b"]
    (tmp_path / "bad.jsonl").write_text('{"text": "a"}\n[1, 2]\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2: each JSONL line must be an object"):
        read_texts(tmp_path / "bad.jsonl")
    (tmp_path / "empty.txt").write_text("\n  \n")
    with pytest.raises(ValueError, match="holds no text"):
        read_texts(tmp_path / "empty.txt")
    (tmp_path / "latin.txt").write_bytes(b"caf\xe9\n")
    with pytest.raises(ValueError, match="latin.txt: not UTF-8"):
        read_texts(tmp_path / "latin.txt")
    with pytest.raises(ValueError, match="cannot give 2 fit"):
        split_texts(["a", "b"], 2, 1)
    with pytest.raises(ValueError, match="fewer than n_tokens=40"):
        token_rows(tiny, ["short"], 40)
    with pytest.raises(
        ValueError, match="method must be one of eap, eap_ig, eap_ig_inputs, eap_ig_activ"
    ):
        DiscoveryConfig(method="acdc")
    with pytest.raises(ValueError, match="target must be <= 1"):
        DiscoveryConfig(target=1.5)


def test_fit_texts_do_not_move_when_the_held_out_count_changes():
    from collections import Counter

    from attn_sink_circuits.discovery.texts import split_indices

    kinds = ["prose"] * 40 + ["code"] * 40 + ["german"] * 40 + ["table"] * 40
    fit, held = split_indices(kinds, 16, 16, seed=0)
    for n_held in (4, 32, 100):
        fit2, held2 = split_indices(kinds, 16, n_held, seed=0)
        assert fit2 == fit and not set(fit2) & set(held2) and len(held2) == n_held
    # The held-out texts do not move with n_fit while every kind has items for both parts.
    assert split_indices(kinds, 40, 16, seed=0)[1] == held
    assert split_indices(kinds, 16, 16, seed=1)[0] != fit  # the seed still chooses
    for part in (fit, held):
        assert Counter(kinds[i] for i in part) == dict.fromkeys(set(kinds), 4)
    # A small kind is used up by fit and held-out together; both parts stay disjoint and as
    # even as the items allow.
    kinds = ["a"] * 30 + ["b"] * 5
    fit, held = split_indices(kinds, 8, 8, seed=2)
    assert not set(fit) & set(held) and len(fit) == len(held) == 8
    assert Counter(kinds[i] for i in fit) == {"a": 4, "b": 4}
    assert Counter(kinds[i] for i in held) == {"a": 7, "b": 1}


def test_mismatched_text_sets_are_refused_before_any_forward(monkeypatch, tiny, tokens):
    import attn_sink_circuits.discovery.pipeline as pipeline

    def no_runner(*args, **kwargs):
        raise AssertionError("a runner was built before the texts were checked")

    monkeypatch.setattr(pipeline, "EdgeRunner", no_runner)
    metric = p0_attention([2, 3])
    with pytest.raises(ValueError, match="cut both to the same length"):
        discover(tiny, tokens, tokens[:, :-1], metric)
    with pytest.raises(ValueError, match="per-text positions .* need heldout_positions too"):
        discover(tiny, tokens, tokens, metric, positions=[[1], [2], [1]])


def test_a_metric_without_gradient_is_refused(tiny, tokens):
    flat = Metric(
        "argmax",
        ("blocks.1.hook_resid_post",),
        lambda a, _: a["blocks.1.hook_resid_post"][:, 0].argmax(-1).float(),
    )
    with pytest.raises(ValueError, match="not differentiable"):
        eap(EdgeRunner(tiny, tokens, flat))


def test_per_text_positions_equal_one_text_at_a_time(tiny, tokens):
    metric = resid_norm(2, 0)
    at = [[3], [5], [4]]
    runner = EdgeRunner(tiny, tokens, p0_attention([2, 3]), positions=at)
    assert runner.positions == at and runner.space.n_edges > 0
    names = runner.space.edge_names()
    edges = [names.index(n) for n in ("L0.H0->L1.MLP", "embed->L1.H0.k", "L1.H2->L2.H1.q")]
    together = edge_effects(runner, edges)
    for i, p in enumerate(at):
        alone = EdgeRunner(tiny, tokens[i : i + 1], p0_attention([2, 3]), positions=p)
        assert torch.allclose(edge_effects(alone, edges)[:, 0], together[:, i], atol=1e-6)
    assert together.abs().max() > 1e-6
    with pytest.raises(ValueError, match="one list per text"):
        EdgeRunner(tiny, tokens, metric, positions=[[1], [2]])


def test_a_saved_circuit_is_judged_on_new_texts(planted, planted_circuit, tmp_path):
    from attn_sink_circuits.graph import io as graph_io

    model = planted.model
    spec = {"metric": "p0_attention", "layers": list(planted.sink_layers)}
    graph = circuit_graph(planted_circuit, model, data="planted", metric_spec=spec)
    back = graph_io.read(graph_io.write(graph, tmp_path / "c.graphml"))
    new = ["Zoe found 8 shells on a warm beach.", "Ivy draws maps of quiet towns daily.",
           "Jon met 4 pals at the town library."]  # fmt: skip
    got = judge_saved(model, back, new, n_random=5)
    assert got["n_edges"] == planted_circuit.n_edges and got["n_texts"] == 3
    # the graph's path and a texts file do as the graph and the list
    (tmp_path / "new.txt").write_text("\n".join(new) + "\n")
    assert judge_saved(model, tmp_path / "c.graphml", str(tmp_path / "new.txt"), n_random=5) == got
    with pytest.raises(FileNotFoundError, match="missing.graphml: no such circuit graph file"):
        judge_saved(model, tmp_path / "missing.graphml", new)
    assert got["faithfulness"] >= 0.8 and got["random_faithfulness"] < 0.2
    lo, hi = got["faithfulness_ci"]
    assert lo <= got["faithfulness"] <= hi
    other = back.copy()
    other.graph["model"] = "smollm2-135m"
    with pytest.raises(ValueError, match="found on model 'smollm2-135m'"):
        judge_saved(model, other, new)
    bare = back.copy()
    bare.remove_edges_from(list(bare.edges))
    with pytest.raises(ValueError, match="no circuit edges"):
        judge_saved(model, bare, new)
    with pytest.raises(ValueError, match="fewer than n_tokens=20"):
        judge_saved(model, back, ["too short"])
    with pytest.raises(ValueError, match="lacks metric_spec"):
        judge_saved(model, circuit_graph(planted_circuit, model, data="x"), new)
