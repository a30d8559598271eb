"""The IOI study in three calls: `ioi.run(model, data, config)` gives an `IOIResult` (a
`CircuitResult`) whose numbers are those of the discovery it runs, whose graph records how its
pairs were made (so `judge_saved` judges it as found), and whose run folder reads back."""

from __future__ import annotations

import json

import pytest
from test_mib import FLIP, LONGER, SHORTER

from attn_sink_circuits.discovery.config import DiscoveryConfig
from attn_sink_circuits.discovery.pairs import tokenize
from attn_sink_circuits.discovery.protocol import protocol

# Small settings on the tiny model (the MIB tests'): 4 fit pairs, 2 held out, MIB's protocol.
FAST = dict(n_boot=10, n_stability=0, n_random=2, max_exact=0, n_curve=4)
SMALL = dict(n_fit=4, n_heldout=2, **FAST)


@pytest.fixture(scope="module")
def found(tiny):
    from attn_sink_circuits.studies import ioi

    config = ioi.IOIConfig.under("mib", **SMALL)
    return ioi.run(tiny, FLIP, config), config


def test_three_calls_give_the_circuit_the_discovery_gives(tiny, found):
    from attn_sink_circuits.discovery import discover
    from attn_sink_circuits.discovery.saved import judge_saved
    from attn_sink_circuits.studies.result import CircuitResult

    r, config = found
    assert isinstance(r, CircuitResult)
    s = r.summary()
    assert next(iter(s)) == "finding" and "CPR" in s["finding"]
    # the old path on the same pairs: MIB's settings, the rows tokenized padded with BOS and
    # drawn in the order of seed 0, the first 4 fitted, the next 2 judged
    mib = protocol("mib")
    assert config.discovery == mib.config(**FAST)
    pairs = tokenize(tiny, FLIP, "rows", pad=True, bos=True)
    import numpy as np

    pairs = pairs[np.random.default_rng(0).permutation(len(FLIP)).tolist()]
    old = discover(tiny, pairs[:4], pairs[4:], None, positions=None, config=config.discovery)
    o = old.summary()
    for key in ("n_edges", "n_edges_total", "fit_faithfulness", "heldout_faithfulness",
                "cpr_heldout", "cmd_heldout", "random_faithfulness_mean"):  # fmt: skip
        assert s[key] == pytest.approx(o[key], abs=1e-5), key
    assert s["n_edges"] > 0 and s["heldout_faithfulness"] != s["random_faithfulness_mean"]
    changed = {k: v for k, v in FAST.items() if mib.config().to_dict()[k] != v}
    assert s["protocol"] == {"name": "mib", "overrides": {**changed, "n_fit": 4, "n_heldout": 2}}
    # the graph records the pairs' metric and protocol; judged through the one judging path
    g = r.graph
    assert json.loads(g.graph["metric_spec"]) == {"metric": "pairs"} and g.graph["task"] == "pairs"
    assert json.loads(g.graph["pad"]) is True and json.loads(g.graph["bos"]) is True
    other = tokenize(tiny, [LONGER, SHORTER, *FLIP[:2]], "other", pad=True, bos=True)
    judged = r.judge([LONGER, SHORTER, *FLIP[:2]])
    again = judge_saved(tiny, g, other, n_random=2, n_boot=10, seed=1, batch_size=64)
    assert judged["faithfulness"] == pytest.approx(again["faithfulness"], abs=1e-6)
    assert judged["n_texts"] == 4 and judged["n_edges"] == s["n_edges"]
    assert judged["model_metric"] != judged["empty_metric"]


def test_the_run_folder_reads_back(found, tmp_path):
    from attn_sink_circuits.discovery.protocol import read_run
    from attn_sink_circuits.graph.io import read
    from attn_sink_circuits.runs.io import stored

    r, _ = found
    out = r.save(tmp_path / "run")
    saved = read_run(out)
    assert saved["cpr_heldout"] == pytest.approx(r.summary()["cpr_heldout"])
    assert saved["provenance"]["texts"]["n"] == 6 and saved["finding"] == r.finding()
    for name in ("curve.csv", "mib_curves.csv", "circuit.eap-ig.json", "importances.mib.json",
                 "mib_curves.png", "faithfulness.png"):  # fmt: skip
        assert (out / name).is_file(), name
    graph = read(stored(out / "circuit.json"))
    assert graph.number_of_edges() == r.graph.number_of_edges()
    assert not [p for p in tmp_path.iterdir() if p.name != "run"]  # nothing half-written beside


@pytest.mark.parametrize(
    ("data", "config", "match"),
    [
        (FLIP, {"n_fit": 5, "n_heldout": 2}, "hold 6 pairs; n_fit 5 \\+ n_heldout 2"),
        (FLIP, {"partner": "abc"}, "leave partner out"),
        ([{"clean": "when A and P met"}], {}, "rows: pair 1: field\\(s\\) corrupt, answer"),
        ("missing.jsonl", {}, "no such pairs file"),
    ],
)
def test_bad_inputs_are_one_line(tiny, data, config, match):
    from attn_sink_circuits.studies import ioi

    with pytest.raises(ValueError, match=match) as err:
        ioi.run(tiny, data, ioi.IOIConfig.under("mib", **config))
    assert "\n" not in str(err.value)


def test_configs_are_read_as_protocols_say():
    from attn_sink_circuits.studies.ioi.config import IOIConfig, as_config

    assert as_config(None) == IOIConfig() and IOIConfig().discovery == protocol("mib").config()
    assert as_config("library").discovery == protocol("library").config()
    assert IOIConfig(protocol="library").discovery == protocol("library").config()
    assert as_config(DiscoveryConfig(ablation="resample", method="eap")).overrides()["method"] == (
        "eap")  # fmt: skip
    assert IOIConfig().counts == (100, 200) and IOIConfig.under("library").counts == (32, 32)
    assert IOIConfig().partner_name == "s2_io_flip"
    with pytest.raises(ValueError, match="give an IOIConfig"):
        as_config(3)
    with pytest.raises(ValueError, match="ablation mean"):
        IOIConfig.under("mib", ablation="mean")
    with pytest.raises(ValueError, match="unknown IOIConfig options"):
        IOIConfig.under("mib", n_pairs=3)


def test_the_heads_and_the_models_behaviour_beside_the_circuit(tiny, tmp_path):
    import torch

    from attn_sink_circuits.studies import ioi
    from attn_sink_circuits.studies.ioi.heads import head_table

    config = ioi.IOIConfig.under("library", method="eap", heads=True, **SMALL)
    r = ioi.run(tiny, FLIP, config)
    s = r.summary()
    pairs = tokenize(tiny, FLIP, "rows")  # one length: the library's protocol pads nothing
    with torch.no_grad():
        rows = torch.arange(len(pairs))
        logits = tiny(pairs.clean)[:, -1]
        diff = logits[rows, pairs.answer] - logits[rows, pairs.wrong]
    assert s["model_clean_logit_diff_mean"] == pytest.approx(float(diff.mean()), abs=1e-5)
    assert s["model_clean_io_above_s"] == pytest.approx(float((diff > 0).float().mean()))
    assert len(r.heads) == 16 and {h["head"] for h in r.heads} == {
        f"L{layer}.H{h}" for layer in range(4) for h in range(4)}  # fmt: skip
    direct = [(u, v, d) for u, v, d in r.graph.edges(data=True) if d["edge_kind"] == "direct"]
    from_heads = [(u, v, d) for u, v, d in direct if u.startswith("L") and ".H" in u]
    assert sum(h["edges_out"] for h in r.heads) == len(from_heads)
    for h in r.heads:
        into = [d["estimated_effect"] for u, v, d in from_heads
                if u == h["head"] and v.startswith("target:")]  # fmt: skip
        assert h["to_logits"] == len(into)
        assert h["to_logits_score"] == pytest.approx(-sum(into), abs=1e-6)
    out = r.save(tmp_path / "run")
    assert json.loads((out / "heads.json").read_text())["heads"] == json.loads(
        json.dumps(r.heads))  # fmt: skip
    padded = tokenize(tiny, [*FLIP, LONGER], "padded", pad=True)
    with pytest.raises(ValueError, match="unpadded pairs"):
        head_table(tiny, r.graph, padded)
