"""The edge methods against a planted P0-sink circuit (`attn_sink_circuits.studies.known_answers.planted`): the
planted edges are the ones exact patching finds, and the best method ranks them first (measured
2026-12-07, docs/ground_truth/planted: path patching and the mask AUC 1.000 at amplify 1, EAP
0.981)."""

from __future__ import annotations

import pytest

from attn_sink_circuits.models.planted import planted_p0_model
from attn_sink_circuits.studies.known_answers.planted import (
    planted_runner,
    planted_truth,
    score_planted,
    truth_check,
)


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    model = planted_p0_model(folder=tmp_path_factory.mktemp("planted"))
    return model, planted_runner(model), planted_truth(model)


def test_planted_truth_is_what_exact_patching_finds(planted):
    _, runner, truth = planted
    assert truth == [
        "embed->L0.H0.v", "L0.H0->L1.MLP", "L1.MLP->L2.H0.k", "L1.MLP->L2.H1.k",
        "L1.MLP->L3.H0.k", "L1.MLP->L3.H1.k",
    ]  # fmt: skip
    check = truth_check(runner, truth)
    assert check["clean_metric"] == pytest.approx(1.0, abs=1e-3)
    # The head -> MLP edge carries the whole sink; each sink key a quarter (4 key heads).
    effects = {t["edge"]: t["effect"] for t in check["true_effects"]}
    assert effects["L0.H0->L1.MLP"] == pytest.approx(-1.0, abs=1e-3)
    assert check["weakest_true_effect"] == pytest.approx(0.25, abs=1e-3)
    assert abs(check["strongest_other_effect"]) < 1e-3 and check["others_used"] == []
    # The planted edges alone keep the whole sink; without any edge it is gone.
    assert check["planted_circuit_metric"] == pytest.approx(1.0, abs=1e-3)
    assert check["empty_circuit_metric"] < 0.02


def test_best_method_ranks_the_planted_edges_first(planted):
    _, runner, truth = planted
    best = score_planted("planted", runner, truth, "path_patching")
    assert best.auc == 1.0 and best.precision_at_true_size == 1.0
    assert best.missed == [] and best.added == []
    # EAP's linear estimate ranks two sink-key edges below two edges it overrates.
    eap = score_planted("planted", runner, truth, "eap")
    assert eap.auc == pytest.approx(0.9815, abs=0.005)
    assert eap.precision_at_true_size == pytest.approx(4 / 6)
    assert set(eap.missed) == {"L1.MLP->L3.H0.k", "L1.MLP->L3.H1.k"}


def test_a_truth_edge_outside_the_dag_is_refused(planted):
    _, runner, _ = planted
    with pytest.raises(ValueError, match="not edges of the DAG"):
        truth_check(runner, ["L9.MLP->L2.H0.k"])
