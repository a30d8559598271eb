"""The notebook API (attn_sink_circuits/circuit.py): three calls give the CLI's judged P0 edge circuit
(the same split, metric, first token and circuit as `circuits p0 --quick` on the same texts);
the metric carries its spec; `import attn_sink_circuits as circuits` loads no torch and `dir(circuits)` lists what a
notebook uses."""

from __future__ import annotations

import subprocess
import sys

import networkx as nx
import pytest
import torch
from matplotlib.figure import Figure

import attn_sink_circuits as circuits
from attn_sink_circuits import discovery
from attn_sink_circuits.circuit import find_circuit, p0_config, texts_and_kinds
from attn_sink_circuits.cli import build_parser
from attn_sink_circuits.cli.options import config_from, given_options
from attn_sink_circuits.discovery.saved import build_metric, judge_saved
from attn_sink_circuits.discovery.texts import DEFAULT_TEXTS, read_kinded_texts, split_indices
from attn_sink_circuits.graph import read
from attn_sink_circuits.models.planted import planted_p0_model
from attn_sink_circuits.patching.metrics import Metric, logit_diff, p0_attention, resid_norm
from attn_sink_circuits.studies.p0 import P0Config, trace_p0
from attn_sink_circuits.studies.p0.config import quick

SMALL = ["--edge-n-fit", "4", "--edge-n-heldout", "4"]
"""Fewer texts than --quick's 6 + 6, to keep the test short (given options win over --quick)."""


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """A P0 sink made by known components (amplified: the P0 norm jumps across block 1, so the
    late layers the metric reads are found from the data, as on a real model)."""
    return planted_p0_model(folder=tmp_path_factory.mktemp("planted"), amplify=10.0)


@pytest.fixture(scope="module")
def cli_config(tmp_path_factory) -> P0Config:
    """The settings `circuits p0 --quick --edge-n-fit 4 --edge-n-heldout 4` runs with."""
    out = tmp_path_factory.mktemp("cli") / "out"
    args = build_parser().parse_args(["p0", "--quick", *SMALL, "--out", str(out)])
    return quick(config_from(args, P0Config), keep=given_options(args, P0Config))


@pytest.fixture(scope="module")
def found(planted):
    return find_circuit(
        planted.model, DEFAULT_TEXTS, quick=True, progress=False, edge_n_fit=4, edge_n_heldout=4
    )


def test_three_calls_give_the_clis_circuit(planted, cli_config, found):
    texts, kinds = read_kinded_texts(DEFAULT_TEXTS)
    assert found.config == cli_config
    # The split is the CLI's: stratified by kind, the same indices for the same texts and seed.
    fit, held = split_indices(kinds, 4, 4, cli_config.edge.discovery.seed)
    assert (found.fit_items, found.heldout_items) == (fit, held)
    assert len({kinds[i] for i in found.heldout_items}) == 4  # one text of each kind
    trace = trace_p0(planted.model, texts, cli_config, kinds=kinds, progress=False)
    assert trace.provenance["texts"]["fit_indices"] == found.fit_items
    assert trace.provenance["texts"]["heldout_indices"] == found.heldout_items
    # The same metric (late layers found from the data), first token and circuit.
    assert found.metric.spec["layers"] == trace.formation.late_layers == list(planted.sink_layers)
    for key in ("metric_spec", "first_token", "n_tokens", "positions", "config"):
        assert found.graph.graph[key] == trace.graph.graph[key], key
    assert int(found.graph.graph["first_token"]) == planted.model.tokenizer.bos_token_id
    assert torch.equal(found.edges.mask, trace.edges.mask) and found.edges.n_edges > 0
    assert nx.utils.edges_equal(found.graph.edges(data=True), trace.graph.edges(data=True))
    s, t = found.summary(), trace.summary()
    assert s["heldout_faithfulness"] == pytest.approx(t["heldout_faithfulness"], abs=1e-9)
    # A judged circuit: the planted mechanism is kept on held-out texts, random circuits lose it.
    assert s["heldout_faithfulness"] > 0.9
    assert s["random_faithfulness_mean"] < s["heldout_faithfulness"] - 0.3
    assert set(s["heldout_by_kind"]) == {*kinds, "all"}


def test_the_circuit_is_judged_on_other_texts_and_drawn(planted, found, tmp_path):
    texts, _ = read_kinded_texts(DEFAULT_TEXTS)
    seen = set(found.fit_items + found.heldout_items)
    others = [t for i, t in enumerate(texts) if i not in seen][:6]
    judged = found.judge(others)
    assert judged["n_texts"] == 6 and judged["n_edges"] == found.edges.n_edges
    assert judged["faithfulness"] > 0.9 > judged["random_faithfulness"]
    # The saved graph rebuilds the metric from its spec and judges the same.
    path = found.save(tmp_path / "circuit.json")
    again = judge_saved(
        planted.model, read(path), others, n_random=found.config.edge.discovery.n_random
    )
    assert again["faithfulness"] == pytest.approx(judged["faithfulness"], abs=1e-6)
    assert isinstance(found.draw(), Figure)
    assert "held-out faithfulness" in repr(found)


def test_a_metric_given_as_a_spec_or_object_gives_the_same_circuit(planted, found):
    layers = list(planted.sink_layers)
    texts, kinds = read_kinded_texts(DEFAULT_TEXTS)
    for metric in ({"metric": "p0_attention", "layers": layers}, p0_attention(layers)):
        other = find_circuit(planted.model, texts, kinds=kinds, metric=metric, quick=True,
                             progress=False, edge_n_fit=4, edge_n_heldout=4)  # fmt: skip
        assert other.fit_items == found.fit_items
        assert torch.equal(other.edges.mask, found.edges.mask)
        assert other.graph.graph["metric_spec"] == found.graph.graph["metric_spec"]


def test_metrics_carry_their_spec(planted):
    for metric in (p0_attention([1, 2], 0), p0_attention(3, [1, 2], heads=[0]),
                   resid_norm(2, 0), logit_diff(5, 7, pos=-1)):  # fmt: skip
        rebuilt = build_metric(metric.spec)
        assert rebuilt.name == metric.name and rebuilt.spec == metric.spec
    # Per-text answer ids do not carry over to new texts: no spec, refused in one line.
    assert logit_diff(torch.tensor([5, 6]), torch.tensor([7, 8])).spec is None
    bare = Metric("mine", ("blocks.0.attn.hook_pattern",), lambda acts, logits: acts)
    with pytest.raises(ValueError, match="carries no spec"):
        find_circuit(planted.model, ["a text"] * 8, metric=bare, progress=False)


def test_bad_inputs_say_what_to_give(planted):
    with pytest.raises(ValueError, match="kinds come from the text file"):
        texts_and_kinds(DEFAULT_TEXTS, ["prose"])
    with pytest.raises(ValueError, match="2 kinds for 3 texts"):
        texts_and_kinds(["a", "b", "c"], ["x", "y"])
    with pytest.raises(ValueError, match="non-empty list of strings"):
        texts_and_kinds([], None)
    with pytest.raises(ValueError, match="give a P0Config"):
        p0_config({"edge_n_fit": 4}, False, {})
    with pytest.raises(ValueError, match="unknown P0Config options"):
        find_circuit(planted.model, ["a"], edge_n_fits=4)


def test_dir_lists_the_notebook_names():
    names = {"load_model", "find_circuit", "Circuit", "measure", "trace_p0", "P0Config",
             "EdgeFitConfig", "DiscoveryConfig", "read_kinded_texts", "judge_saved"}  # fmt: skip
    assert names <= set(dir(circuits))
    assert all(getattr(circuits, name) is not None for name in circuits.__all__)
    assert {"discover", "judge_saved"} <= set(dir(discovery))  # every lazy package


def test_import_circuits_loads_no_torch():
    code = (
        "import sys, attn_sink_circuits as circuits; names = dir(circuits); "
        "print('find_circuit' in names, any(m.split('.')[0] == 'torch' for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "False"]


def test_import_circuits_reaches_the_modules_the_readme_uses():
    code = (
        "import sys, attn_sink_circuits as circuits\n"
        "fresh = 'attn_sink_circuits.patching' not in sys.modules\n"
        "print(fresh, circuits.patching.p0_attention.__name__, circuits.threads.set_threads.__name__,"
        " circuits.graph.convention.__name__, circuits.discovery.methods.__name__)\n"
        "try:\n    circuits.no_such_module\nexcept AttributeError as err:\n    print(err)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == [
        "True p0_attention set_threads attn_sink_circuits.graph.convention attn_sink_circuits.discovery.methods",
        "module 'attn_sink_circuits' has no attribute 'no_such_module'",
    ]
