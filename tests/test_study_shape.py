"""Every study one shape: each study package's `run(model, data, config)` returns a `Result`
(`summary()` JSON-ready with the finding first, `save(folder)` an atomic run folder with its
provenance, `figures()` Figures), and a `CircuitResult` where it finds a circuit (`graph`,
`draw()`, `judge(data)` through `judge_saved`). Each on the smallest setting its own tests use."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pytest
from matplotlib.figure import Figure

from attn_sink_circuits.models.planted import P0_TEXTS, planted_p0_model, planted_secondary_model
from attn_sink_circuits.runs.io import MARKER
from attn_sink_circuits.studies import claims, emergence, known_answers, p0, secondary, trigger
from attn_sink_circuits.studies.result import CircuitResult, Result

P0_SMALL = p0.P0Config().with_options(
    n_tokens=20, n_texts=2, edge_n_tokens=20, edge_n_fit=4, edge_n_heldout=4, edge_ig_steps=2,
    edge_n_curve=3, edge_n_random=3, edge_n_boot=50, edge_n_stability=2, edge_n_exact_texts=1,
    edge_max_exact=10,
)  # fmt: skip
"""tests/test_p0.py's planted settings with fewer baselines and resamples than `--quick`'s."""


def check_shape(result, tmp_path) -> dict:
    """`result` follows the protocol: a non-empty JSON-ready summary, a run folder with its
    provenance (the marker's and summary.json's, each with the run's settings), Figures.
    Returns the summary."""
    assert isinstance(result, Result)
    summary = result.summary()
    assert isinstance(summary, dict) and summary
    json.dumps(summary, allow_nan=False)  # strict JSON: no NaN, no objects
    written = result.save(tmp_path / "run")
    folder = tmp_path / "run"
    assert written in (folder, folder / "report.html") and written.exists()
    marker = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    assert marker["provenance"]["code"] and "settings" in marker["provenance"]
    stamped = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    assert stamped["provenance"]["settings"] == marker["provenance"]["settings"]
    assert not list(tmp_path.glob("*.tmp"))  # no scratch folder left beside it
    figures = result.figures()
    assert figures and all(isinstance(f, Figure) for f in figures.values())
    return summary


@pytest.fixture(autouse=True)
def unrendered_figures(monkeypatch):
    """Saved figures are written as a placeholder, not rendered: rendering is most of a save's
    time here and is tested where each study is (tests/test_p0.py, test_secondary.py, ...);
    this file checks the shape (which files, with what provenance), and that each figure is
    a real Figure."""

    def placeholder(self, fname, *args, **kwargs):
        data = "<svg><!-- figure not rendered in tests/test_study_shape.py --></svg>"
        if isinstance(fname, io.TextIOBase):  # an SVG into a string buffer
            fname.write(data)
        elif hasattr(fname, "write"):
            fname.write(data.encode())
        else:
            Path(fname).write_text(data, encoding="utf-8")

    monkeypatch.setattr(Figure, "savefig", placeholder)


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    return planted_p0_model(folder=tmp_path_factory.mktemp("planted"))


def test_p0_run_is_a_circuit_result_judged_as_it_was_found(planted, tmp_path):
    result = p0.run(planted.model, list(P0_TEXTS), P0_SMALL, progress=False)
    assert isinstance(result, CircuitResult)
    summary = check_shape(result, tmp_path)
    assert summary["heldout_faithfulness"] > 0.9  # the planted circuit, as tests/test_p0.py
    # judge: the library's one path (judge_saved), on the model traced, reading what the circuit
    # was found under from the graph: on the held-out texts it gives the trace's own number.
    judged = result.judge(result.heldout_texts)
    assert judged["n_texts"] == len(result.heldout_texts)
    assert judged["faithfulness"] == pytest.approx(summary["heldout_faithfulness"], abs=1e-6)
    assert isinstance(result.draw(), Figure)
    with pytest.raises(ValueError, match="non-empty list of texts"):
        result.judge([1, 2])


def test_secondary_run_is_a_result_without_judge(tmp_path_factory, tmp_path):
    model = planted_secondary_model(folder=tmp_path_factory.mktemp("planted2")).model
    texts = [
        "The cat, the dog, and 3 birds; all sat.",
        "one, two, three; four, five.",
        "a,b,c,d and e f g h i j k",
    ]  # fmt: skip  (tests/test_secondary.py's)
    result = secondary.run(model, texts, secondary.SecondaryConfig(n_swap_events=1), progress=False)
    assert not isinstance(result, CircuitResult)  # its positions are chosen per text
    summary = check_shape(result, tmp_path)
    assert summary["model"] == result.model
    with pytest.raises(ValueError, match="give the texts"):
        secondary.run(model, [])


def test_claims_run_is_a_result(planted, tmp_path):
    config = claims.ClaimsConfig(n_texts=8, n_tokens=24)
    result = claims.run(planted.model, list(P0_TEXTS), config, progress=False)
    summary = check_shape(result, tmp_path)
    assert summary["n_claims"] == len(result.table.rows) > 0
    saved = json.loads((tmp_path / "run" / "claims.json").read_text(encoding="utf-8"))
    assert len(saved["claims"]) == summary["n_claims"]


def test_trigger_run_trains_its_own_model(tmp_path):
    task = trigger.TriggerTask(seq_len=8, d_content=3, n_triggers=1)
    model = trigger.TriggerModelConfig.for_task(task)
    train = trigger.TriggerTrainConfig(steps=20, n_checkpoints=1, eval_examples=32)
    result = trigger.run(model, task, train, progress=False)
    summary = check_shape(result, tmp_path)
    assert [r["size"] for r in summary["by_model"]] == ["1x1"] and summary["n_runs"] == 1
    assert (tmp_path / "run" / "runs.csv").is_file()
    assert (tmp_path / "run" / "bos_distributions.png").is_file()
    with pytest.raises(ValueError, match="does not fit the task"):
        trigger.run(trigger.TriggerModelConfig.for_task(trigger.TriggerTask()), task, train)


def test_emergence_run_measures_the_checkpoints_given_as_its_model(tmp_path):
    from attn_sink_circuits.training.corpus import load_corpus
    from attn_sink_circuits.training.lm import LMConfig
    from attn_sink_circuits.training.train import TrainConfig, train_lm

    lm = LMConfig(n_layers=1, d_model=16, n_heads=2, d_mlp=32, n_ctx=16)
    cfg = TrainConfig(steps=4, batch_size=2, n_checkpoints=1, first_checkpoint=4, eval_windows=2)
    run = train_lm(tmp_path / "one", lm, cfg, load_corpus(max_files=40), progress=False)
    config = emergence.EmergenceConfig(n_texts=4, n_tokens=16, n_fit=2, n_heldout=2, edges_every=0)
    texts = [f"def f{i}(x):\n    return x * {i} + 1\n" * 4 for i in range(4)]
    result = emergence.run(run, texts, config, progress=False)
    summary = check_shape(result, tmp_path)
    assert summary["checkpoints"] == 2  # steps 0 and 4
    assert summary["runs"]["one"]["last_step"] == 4
    with pytest.raises(ValueError, match="give the checkpoints"):
        emergence.run([], None, config)


def test_known_answers_run_scores_a_method_against_the_known_circuit(tmp_path):
    config = known_answers.KnownAnswersConfig(methods=("eap_ig",), ablations=("zero",))
    result = known_answers.run("hist", None, config)
    summary = check_shape(result, tmp_path)
    # EAP-IG ranks hist's true edges first (tests/test_known_answers.py).
    assert summary["by_method"]["zero/eap_ig"]["auc"] == 1.0
    assert summary["truth"][0]["mse_true_circuit"] < 1e-9 and not math.isnan(
        summary["truth"][0]["mse_empty_circuit"]
    )
    with pytest.raises(ValueError, match="fixed by construction"):
        known_answers.run("hist", ["some text"], config)


def test_kv_run_is_a_result(tiny, tmp_path):
    from attn_sink_circuits.studies import kv

    config = kv.KVRunConfig(policies=("window", "streaming_llm"), budgets=(8,), tokens=48,
                            kv=kv.KVConfig(score_from=16, sinks=1))  # fmt: skip
    texts = ["The sink holds attention while the window moves on, token by token. " * 2]
    result = kv.run(tiny, texts, config)
    summary = check_shape(result, tmp_path)
    assert not isinstance(result, CircuitResult)
    assert math.isfinite(summary["closest"]["perplexity"])


def test_ioi_run_is_a_circuit_result(tiny, tmp_path):
    from test_mib import FLIP

    from attn_sink_circuits.studies import ioi

    config = ioi.IOIConfig.under("mib", n_fit=4, n_heldout=2, n_boot=10, n_stability=0,
                                 n_random=2, max_exact=0, n_curve=4)  # fmt: skip
    result = ioi.run(tiny, FLIP, config)
    assert isinstance(result, CircuitResult)
    summary = check_shape(result, tmp_path)
    assert summary["n_edges"] > 0 and summary["stability_mean"] is None  # none resampled
