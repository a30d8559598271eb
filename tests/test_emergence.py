"""`attn_sink_circuits.studies.emergence`: checkpoint specs, the phase rule, and the series over the checkpoints
of a tiny model trained here (seconds), with its rows, cache, files and CLI."""

from __future__ import annotations

import json
import math

import pytest
import torch

from attn_sink_circuits.studies.emergence import (
    EmergenceConfig,
    emergence,
    expand_specs,
    load_result,
    phase,
)
from attn_sink_circuits.studies.emergence import phase_rule as pr
from attn_sink_circuits.studies.emergence import series as series_mod
from attn_sink_circuits.studies.emergence.config import PhaseRuleConfig
from attn_sink_circuits.studies.emergence.measure import (
    ELSEWHERE,
    MIDDLE,
    NO_SINK,
    NOT_MASSIVE,
    SETTLED,
)
from attn_sink_circuits.studies.emergence.phases import first_jump, phase_row
from attn_sink_circuits.training.backcopy import BackcopyConfig, backcopy_corpus
from attn_sink_circuits.training.corpus import load_corpus
from attn_sink_circuits.training.lm import LMConfig
from attn_sink_circuits.training.train import TrainConfig, train_lm

TINY = LMConfig(n_layers=2, d_model=32, n_heads=2, d_mlp=64, n_ctx=32)
STEPS = 200
SMALL = EmergenceConfig(n_texts=4, n_tokens=32, n_fit=2, n_heldout=2, edges_every=3)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A tiny Llama trained for STEPS steps on 60 standard-library files (checkpoints at
    0, 25, 42, 71, 119, 200)."""
    folder = tmp_path_factory.mktemp("emergence") / "tiny-run"
    config = TrainConfig(
        steps=STEPS, batch_size=8, lr=1e-2, warmup=20, n_checkpoints=5, first_checkpoint=25,
        eval_windows=8, log_every=10_000,
    )  # fmt: skip
    return train_lm(folder, TINY, config, load_corpus(max_files=60), progress=False)


@pytest.fixture(scope="module")
def result(run):
    return emergence([run], config=SMALL, progress=False)


BACKCOPY_LM = LMConfig(n_layers=1, d_model=32, n_heads=1, d_mlp=64, n_ctx=32)
BACKCOPY_STEPS = 800


@pytest.fixture(scope="module")
def backcopy(tmp_path_factory):
    """The series over a one-layer, one-head Llama trained for BACKCOPY_STEPS steps on the
    back-copy corpus (checkpoints at 0, 25, 50, 100, 200, 400, 800)."""
    folder = tmp_path_factory.mktemp("emergence") / "backcopy-run"
    config = TrainConfig(
        steps=BACKCOPY_STEPS, batch_size=8, lr=5e-3, warmup=20, n_checkpoints=6,
        first_checkpoint=25, eval_windows=32, log_every=10_000,
    )  # fmt: skip
    run = train_lm(folder, BACKCOPY_LM, config, backcopy_corpus(), progress=False)
    cfg = SMALL.with_options(n_texts=8, edges_every=0)
    return emergence([run], config=cfg, corpus="backcopy", progress=False)


def uniform_p0_mass(n_tokens: int) -> float:
    """P0 mass of uniform causal attention: query i puts 1 / (i + 1) on P0, mean over i >= 1."""
    return sum(1 / (i + 1) for i in range(1, n_tokens)) / (n_tokens - 1)


def test_series_has_one_row_per_checkpoint_in_step_order(result):
    table = result.table()
    assert list(table.step) == [0, 25, 42, 71, 119, 200]
    assert (table.run == "tiny-run").all()
    assert table.heldout_loss.iloc[-1] < table.heldout_loss.iloc[0] - 1.5  # it learned
    # Edge circuits at every 3rd checkpoint and the last, with held-out faithfulness.
    has_edges = table.edges.notna().tolist()
    assert has_edges == [True, False, False, True, False, True]
    assert table.heldout_faithfulness[has_edges].notna().all()
    assert set(table.phase) <= {NO_SINK, ELSEWHERE, MIDDLE, SETTLED, NOT_MASSIVE}
    # the run's log: its checkpoint steps (log_every 10,000 and eval_every 250 give no other)
    assert list(result.loss.step) == [25, 42, 71, 119, 200]


def test_initial_checkpoint_attends_uniformly(result):
    # Small random weights give near-uniform attention: P0 gets what uniform attention gives.
    row = result.rows[0]
    assert row["p0_mass"] == pytest.approx(uniform_p0_mass(SMALL.n_tokens), rel=0.1)
    assert row["sink_rate"] == 0.0
    assert row["phase"] == NO_SINK


def test_a_sink_forms_on_the_backcopy_corpus(backcopy):
    """The corpus (`attn_sink_circuits.training.backcopy`): 16 letters drawn independently, except that
    the letter after a trigger letter (a or b) repeats the letter before the trigger. The head
    must read the previous position at triggers; at every other position each earlier letter
    is noise for the next byte, and softmax weights sum to one, so the head can only make its
    output harmless by attending to <bos> (the same in every window). The sink should therefore
    form as the copy is learned: attention to P0 starts at what uniform attention gives and
    ends above Gu et al.'s eps = 0.3 (the phase rule's `formed_mass`, not lowered)."""
    cfg = backcopy.config
    assert cfg.eps == cfg.formed_mass == 0.3
    table = backcopy.table()
    start, end = table.iloc[0], table.iloc[-1]
    assert start.p0_mass == pytest.approx(uniform_p0_mass(cfg.n_tokens), rel=0.1)
    assert start.phase == NO_SINK and start.sink_rate == 0.0
    assert end.p0_mass >= cfg.formed_mass and end.p0_mass_max_head >= cfg.eps
    assert end.sink_position == 0 and end.sink_rate == 1.0  # the one head is a sink head
    summary = backcopy.summaries()["backcopy-run"]
    formed = summary["sink_forms_at_step"]
    assert formed is not None and 0 < formed < BACKCOPY_STEPS
    # One transition, no sink -> a P0 sink (one layer: no massive state to settle).
    assert [p["phase"] for p in summary["phases"]] == [NO_SINK, NOT_MASSIVE]
    # The copy is learned: the held-out loss has gained at least half of what a perfect copy
    # saves over guessing (the share of positions after a trigger x ln(letters) nats a byte).
    corpus = BackcopyConfig()
    floor = math.log(corpus.n_letters)
    copy_gain = corpus.n_triggers / corpus.n_letters * floor
    assert end.heldout_loss <= floor - copy_gain / 2


def test_the_backcopy_head_copies_at_triggers_and_rests_on_bos_elsewhere(backcopy):
    """Why the sink formed, checked on the last checkpoint: the one head reads the previous
    position when the query is a trigger letter (active) and puts most of its attention on
    <bos> at the other queries (dormant); at initialisation it does neither."""
    from attn_sink_circuits.core.sites import hook_name
    from attn_sink_circuits.discovery import token_rows
    from attn_sink_circuits.models.tiny import N_SPECIAL
    from attn_sink_circuits.studies.emergence import heldout_texts, load_checkpoint

    most = 0.5  # most of the head's attention
    for spec, trained in ((backcopy.checkpoints[0], False), (backcopy.checkpoints[-1], True)):
        model = load_checkpoint(spec)
        tokens = token_rows(model, heldout_texts("backcopy", 16, 32), 32,
                            first=model.tokenizer.bos_token_id)  # fmt: skip
        _, cache = model.run_with_cache(tokens, names_filter=hook_name("pattern", 0))
        pattern = cache[hook_name("pattern", 0)][:, 0, 1:]  # text, query >= 1, key
        query = torch.arange(1, tokens.shape[1])
        previous, bos = pattern[:, query - 1, query - 1], pattern[:, :, 0]
        trigger = torch.isin(tokens[:, 1:], torch.tensor(list(b"ab")) + N_SPECIAL)
        trigger[:, 0] = False  # position 1's previous position is <bos> itself
        assert trigger.sum() >= 20  # enough trigger queries to judge
        plain = ~torch.isin(tokens[:, 1:], torch.tensor(list(b"ab")) + N_SPECIAL)
        assert (previous[trigger].mean() > most) == trained
        assert (bos[plain].mean() > most) == trained


def test_phase_rule_in_order():
    cfg = EmergenceConfig()
    base = {"sink_mass": 0.5, "sink_position": 0, "massive_layer": 1}
    assert phase(base, cfg) == SETTLED
    assert phase(base | {"massive_layer": 2}, cfg) == MIDDLE
    assert phase(base | {"massive_layer": None}, cfg) == NOT_MASSIVE
    assert phase(base | {"sink_position": 1}, cfg) == ELSEWHERE
    assert phase(base | {"sink_mass": 0.29}, cfg) == NO_SINK
    assert phase(base | {"massive_layer": 2}, cfg.with_options(early_blocks=3)) == SETTLED


def test_specs_expand_runs_and_parse_steps(run, tmp_path):
    specs = expand_specs([str(run), "EleutherAI/pythia-14m@step1000"])
    assert [s.step for s in specs] == [0, 25, 42, 71, 119, 200, 1000]
    assert specs[-1].kind == "hub" and specs[0].training["step"] == 0
    with pytest.raises(ValueError, match="not a folder, a file"):
        expand_specs([str(tmp_path / "missing")])
    with pytest.raises(ValueError, match="neither config.json nor checkpoints"):
        expand_specs([str(tmp_path)])
    (tmp_path / "weights.bin").write_bytes(b"x")
    with pytest.raises(ValueError, match="not a .gguf file"):
        expand_specs([str(tmp_path / "weights.bin")])


def test_trigger_checkpoints_are_refused_with_what_to_use_instead(tmp_path):
    from attn_sink_circuits.studies.trigger import (
        TriggerModelConfig,
        TriggerTask,
        TriggerTrainConfig,
        save_checkpoints,
        train_model,
    )

    task = TriggerTask()
    result = train_model(task, TriggerModelConfig.for_task(task), TriggerTrainConfig(steps=2),
                         progress=False)  # fmt: skip
    paths = save_checkpoints(result, tmp_path / "out" / "checkpoints" / "softmax-1x1")
    for spec in (paths[-1], paths[-1].parent, tmp_path / "out"):
        with pytest.raises(ValueError, match="trigger-task checkpoints.*emergence_trigger"):
            emergence([spec], texts=["x" * 400] * 20, progress=False)


def test_hub_specs_are_refused_before_any_load_when_offline(monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ValueError, match="hub is unavailable"):
        emergence(["nobody/not-cached-model@step1"], texts=["x" * 400] * 20, progress=False)


def test_cache_reads_rows_back_without_loading(run, result, tmp_path, monkeypatch):
    first = emergence([run], config=SMALL, cache=tmp_path / "cache", progress=False)
    assert len(list((tmp_path / "cache").glob("*.json"))) == 6

    def no_load(*args, **kwargs):
        raise AssertionError("a cached checkpoint was loaded again")

    monkeypatch.setattr(series_mod, "load_checkpoint", no_load)
    again = emergence([run], config=SMALL, cache=tmp_path / "cache", progress=False)
    assert again.table().drop(columns="seconds").equals(first.table().drop(columns="seconds"))
    # The measurement itself is deterministic: the cached rows equal a fresh series'.
    assert first.table().p0_mass.tolist() == pytest.approx(result.table().p0_mass.tolist())


def test_save_writes_tables_figure_and_summary(result, tmp_path):
    out = result.save(tmp_path / "out")
    names = {p.name for p in out.iterdir() if not p.name.startswith(".")}
    assert names == {
        "table.csv", "loss.csv", "rows.json", "summary.json", "summary.txt",
        "emergence_tiny-run.png", "trajectory_tiny-run.md",
    }  # fmt: skip
    summary = json.loads((out / "summary.json").read_text())["runs"]["tiny-run"]
    assert summary["checkpoints"] == 6 and summary["last_step"] == STEPS
    assert summary["final_edge_circuit"]["step"] == STEPS
    assert sum(p["checkpoints"] for p in summary["phases"]) == 6
    back = load_result(out)
    assert (
        back.table().drop(columns="heldout_cmd").equals(result.table().drop(columns="heldout_cmd"))
    )  # NaN |1 - f| is null in strict JSON
    assert set(back.figures()) == {"tiny-run"}


def test_a_large_loss_table_is_saved_gzipped_and_read_back(result, tmp_path, monkeypatch):
    import attn_sink_circuits.runs.io as io

    monkeypatch.setattr(io, "LEAN_OVER", 64)  # the tiny run's loss table counts as large
    out = result.save(tmp_path / "out")
    assert (out / "loss.csv.gz").is_file() and not (out / "loss.csv").exists()
    assert load_result(out).loss.equals(result.loss)


def test_cli_writes_the_series_and_refuses_bad_specs(run, tmp_path, capsys):
    from attn_sink_circuits.cli import main

    args = ["--n-texts", "4", "--n-tokens", "32", "--edges-every", "0", "--threads", "1"]
    assert main(["emergence", str(run), "--out", str(tmp_path / "o"), *args]) == 0
    assert (tmp_path / "o" / "table.csv").is_file()
    assert main(["emergence", str(run), "--out", str(tmp_path / "b"), "--corpus", "backcopy",
                 *args]) == 0  # fmt: skip
    texts = json.loads((tmp_path / "b" / "summary.json").read_text())["texts"]
    assert texts == "held-out backcopy windows"
    assert main(["emergence", str(tmp_path / "nope"), "--out", str(tmp_path / "p")]) == 2
    assert "not a folder, a file" in capsys.readouterr().err
    assert not (tmp_path / "p").exists()


def test_one_block_model_is_measured_without_a_formation(tmp_path):
    one = LMConfig(n_layers=1, d_model=16, n_heads=2, d_mlp=32, n_ctx=16)
    cfg = TrainConfig(steps=4, batch_size=2, n_checkpoints=1, first_checkpoint=4, eval_windows=2)
    run = train_lm(tmp_path / "one", one, cfg, load_corpus(max_files=40), progress=False)
    res = emergence([run], config=SMALL.with_options(n_tokens=16, edges_every=0),
                    progress=False)  # fmt: skip
    assert [r["jump_layers"] for r in res.rows] == [[], []]
    assert torch.isfinite(torch.tensor(res.table().p0_mass.tolist())).all()


def test_config_defaults_are_the_papers_and_the_sink_package_constants():
    from attn_sink_circuits.sinks import MASSIVE_RATIO, SINK_EPS
    from attn_sink_circuits.studies.p0.config import P0Config

    cfg = EmergenceConfig()
    assert (cfg.eps, cfg.massive_ratio, cfg.n_tokens) == (SINK_EPS, MASSIVE_RATIO, 64)
    assert (cfg.jump_factor, cfg.keep_share) == (P0Config().jump_factor, P0Config().keep_share)
    with pytest.raises(ValueError, match="formed_mass must be <= 1"):
        EmergenceConfig(formed_mass=1.5)


# --- issue 37: the phase rule on planted series, and the per-checkpoint measurements ---------

RULE = PhaseRuleConfig()
N_LAYERS = 8


def planted(rate: float, block: int | None, p1: float = 0.0, width: float = 0.02) -> dict:
    """A measured row with Gu's rate `rate`, the P0 norm jump at `block`, position-1 rate `p1`
    (intervals +- `width`); sink heads from the jump block on."""
    heads = [0] * N_LAYERS if rate < RULE.formed_rate or block is None else (
        [0] * block + [4] * (N_LAYERS - block))  # fmt: skip
    return {
        "gu_rate": [rate, max(rate - width, 0), rate + width],
        "gu_rate_p1": [p1, max(p1 - width, 0), p1 + width],
        "jump_block": block, "onset_layer": next((i for i, h in enumerate(heads) if h), None),
        "sink_heads_by_layer": heads, "all_head_p0_mass": rate,
    }  # fmt: skip


def judge(rows: list[dict], losses: list[float] | None = None) -> dict:
    steps = [100 * i for i in range(len(rows))]
    losses = losses or [5.0 - 3.5 * (1 - 0.6**i) for i in range(len(rows))]
    return pr.run_verdicts(rows, steps, losses, N_LAYERS, RULE)


def test_a_sink_moving_from_middle_to_early_blocks_gives_the_planted_phases():
    rows = [planted(0.0, None)] * 3 + [planted(0.3, 4)] * 4 + [planted(0.4, 1)] * 5
    out = judge(rows)
    assert out["phases"] == [pr.NO_SINK] * 3 + [pr.MIDDLE] * 4 + [pr.EARLY] * 5
    assert out["formation"]["step"] == 300 and out["formation"]["jump_block"] == 4
    v = out["verdicts"]
    assert v["mid_layer_first_state"] == pr.HOLDS and v["final_first_two_state"] == pr.HOLDS
    assert v["mid_layer_first_attention"] == pr.HOLDS  # sink heads from layer 4, then layer 1
    assert v["position_1_phase"] == pr.FAILS
    assert out["convergence"]["settled_step"] == 700


def test_a_sink_passing_through_position_1_is_a_position_1_phase():
    rows = [planted(0.0, None)] * 2 + [planted(0.1, None, p1=0.3)] * 2 + [planted(0.3, 1)] * 4
    out = judge(rows)
    assert out["phases"][2:4] == [pr.POSITION_1] * 2
    assert out["position_1_steps"] == [200, 300]
    assert out["verdicts"]["position_1_phase"] == pr.HOLDS
    # formed directly in the first blocks: the middle-first prediction fails
    assert out["verdicts"]["mid_layer_first_state"] == pr.FAILS


def test_predictions_can_fail_be_undecided_or_not_testable():
    never = judge([planted(0.05, 3)] * 6)
    assert set(never["verdicts"].values()) == {pr.NOT_TESTABLE}
    assert never["formation"] is None and never["convergence"]["verdict"] == pr.NOT_TESTABLE
    stays_mid = judge([planted(0.0, None)] * 2 + [planted(0.3, 5)] * 6)
    assert stays_mid["verdicts"]["final_first_two_state"] == pr.FAILS
    assert stays_mid["convergence"]["settled_step"] is None
    flicker = judge([planted(0.3, 3), planted(0.3, 1), planted(0.3, 4)] + [planted(0.3, 1)] * 3)
    assert flicker["verdicts"]["mid_layer_first_state"] == pr.UNDECIDED
    straddle = judge([planted(0.3, 1, p1=0.1, width=0.05)] * 4)  # [0.05, 0.15] straddles 0.1
    assert straddle["verdicts"]["position_1_phase"] == pr.UNDECIDED


def test_settled_coincides_with_the_loss_plateau_only_when_close():
    rows = [planted(0.0, None)] * 4 + [planted(0.3, 1)] * 8
    early = judge(rows, [5.0, 3.0, 2.0, 1.6] + [1.5] * 8)  # plateau at step 400 = settled
    assert early["convergence"]["verdict"] == pr.HOLDS
    late = judge(rows, [5.0 - 0.3 * i for i in range(12)])  # plateau only at the end
    assert late["convergence"]["plateau_step"] == 1100 and late["convergence"]["verdict"] == (
        pr.FAILS)  # fmt: skip


def test_phase_row_reads_planted_attention_and_norms():
    n_layers, n_texts, n_heads, t = 4, 6, 2, 16
    attn = torch.tril(torch.ones(t, t)) / torch.arange(1, t + 1)[:, None]
    attn = attn.expand(n_layers, n_texts, n_heads, t, t).clone()
    attn[2:, :, 0] = 0
    attn[2:, :, 0, :, 0] = 1  # head 0 of layers 2-3 attends only to position 0
    norms = torch.ones(n_layers + 1, n_texts, t)
    norms[3:, :, 0] = 5.0  # the P0 norm jumps across block 2 (output row 3)
    row = phase_row(attn, norms, RULE)
    assert row["gu_rate"][0] == pytest.approx(2 / 8)
    assert row["sink_heads_by_layer"] == [0, 0, 1, 1] and row["onset_layer"] == 2
    assert row["jump_block"] == 2 and row["p0_norm_ratio"][3] == pytest.approx(5.0)
    assert row["top_position_by_layer"][2] == 0 and row["gu_rate_p1"][0] == 0
    assert row["p0_mass_by_layer"][2] == pytest.approx(0.5 + 0.5 * row["p0_mass_by_layer"][0])
    assert first_jump([1.0, 1.5, 2.9, 6.0], 2.0) == 2 and first_jump([1.0, 1.5], 2.0) is None


def test_gu_rate_is_counted_per_text_as_gu_et_al_count_it():
    """Head 0 of layer 1 sinks on half the texts only. Per text (Gu's code): those texts have
    1 of 4 heads above eps, the others 0, so the rate is 1/8; the window mean of its alpha
    (0.5 * 1 + 0.5 * uniform) is above 0.3, so the window-mean count gives 1/4."""
    n_layers, n_texts, n_heads, t = 2, 4, 2, 16  # uniform over 16: alpha_0 = H_16 / 16 = 0.21
    uniform = torch.tril(torch.ones(t, t)) / torch.arange(1, t + 1)[:, None]
    attn = uniform.expand(n_layers, n_texts, n_heads, t, t).clone()
    attn[1, :2, 0] = 0
    attn[1, :2, 0, :, 0] = 1  # texts 0-1: layer 1 head 0 attends only to position 0
    row = phase_row(attn, torch.ones(n_layers + 1, n_texts, t), RULE)
    assert row["gu_rate"][0] == pytest.approx(1 / 8)
    assert row["gu_rate_window_mean"][0] == pytest.approx(1 / 4)
    assert row["gu_rate"][1] <= 1 / 8 <= row["gu_rate"][2]  # texts resampled
    assert pr.has_sink(row, RULE.with_options(formed_rate=0.2)) is False
    assert pr.has_sink(row, RULE.with_options(formed_rate=0.2, rate_counting="window_mean"))
    with pytest.raises(ValueError, match="rate_counting"):
        RULE.with_options(rate_counting="per_head")


def test_checkpoints_of_a_run_without_bos_are_measured_without_bos(tmp_path):
    from attn_sink_circuits.studies.emergence.specs import CheckpointSpec

    folder = tmp_path / "run" / "checkpoints" / "step_000010"
    folder.mkdir(parents=True)
    spec = CheckpointSpec(str(folder), "folder", 10, folder.name)
    assert series_mod.trained_with_bos(spec)  # no run.json: as before
    (tmp_path / "run" / "run.json").write_text(json.dumps({"train": {"bos": False}}))
    assert not series_mod.trained_with_bos(spec)
    (tmp_path / "run" / "run.json").write_text(json.dumps({"train": {"seed": 0}}))
    assert series_mod.trained_with_bos(spec)  # runs from before the option had <bos>


def test_a_run_is_measured_as_it_goes_and_catches_up_after_a_kill(tmp_path):
    """The checkpoint hook writes one phases.jsonl row per checkpoint, equal to measuring the
    checkpoint afterwards; a row lost (a kill between checkpoint and row) is measured again."""
    from attn_sink_circuits.studies.emergence.run_phases import measure_run
    from attn_sink_circuits.studies.emergence.watch import CheckpointWatch, read_rows

    corpus = load_corpus(max_files=40)
    config = TrainConfig(steps=30, batch_size=4, n_checkpoints=3, first_checkpoint=10,
                         eval_windows=4, log_every=10_000)  # fmt: skip
    run = tmp_path / "run"
    train_lm(run, TINY, config, corpus, progress=False, on_checkpoint=CheckpointWatch(run, corpus))
    rows = read_rows(run)
    assert [r["step"] for r in rows] == config.checkpoint_steps()
    after = measure_run(run, corpus, progress=False)["rows"]
    assert [r["gu_rate"] for r in rows] == [r["gu_rate"] for r in after]
    for got, want in zip(rows, after, strict=True):
        assert got["p0_norm_ratio"] == pytest.approx(want["p0_norm_ratio"], rel=1e-6)
    lines = (run / "phases.jsonl").read_text().splitlines()
    (run / "phases.jsonl").write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:20])  # cut short
    watch = CheckpointWatch(run, corpus)
    assert watch.catch_up() == 1
    again = read_rows(run)
    assert [r["step"] for r in again] == [r["step"] for r in rows]
    assert again[-1]["gu_rate"] == rows[-1]["gu_rate"]


def test_an_emergence_checkpoint_keeps_its_run_name():
    # rows.json names a checkpoint outside the repository with its run (attn_sink_circuits.runs.record_paths).
    from attn_sink_circuits.runs.record_paths import OUTSIDE
    from attn_sink_circuits.studies.emergence.series import recorded_spec, run_name
    from attn_sink_circuits.studies.emergence.specs import CheckpointSpec

    spec = CheckpointSpec("/data/x/llama/checkpoints/step_000010", "folder", 10, "step 10")
    recorded = CheckpointSpec(recorded_spec(spec), "folder", 10, "step 10")
    assert recorded.spec == f"{OUTSIDE}/llama/checkpoints/step_000010"
    assert run_name(recorded) == run_name(spec) == "llama"
    assert recorded_spec(CheckpointSpec("smollm2-135m", "model", None, "m")) == "smollm2-135m"
