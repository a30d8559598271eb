"""The trigger-conditional task: generator, hookable softmax/ReLU models, the Theorem 3
construction, short seeded training runs, theorem checks, the circuit graph and the CLI."""

from __future__ import annotations

import pytest
import torch

from attn_sink_circuits.studies.trigger import (
    TriggerModelConfig,
    TriggerTask,
    TriggerTrainConfig,
    TriggerTransformer,
    check_theorems,
    eval_batch,
    head_roles,
    make_batch,
    measure_trigger,
    relu_construction,
    train_model,
    trigger_graph,
    trigger_targets,
)
from attn_sink_circuits.studies.trigger.data import BOS, CONTENT, OTHER, TRIGGER


def _sequence(tokens: list[tuple[str, list[float]]]) -> torch.Tensor:
    """One hand-made sequence from (kind, content) pairs; kind is "bos", "trigger" or "other"."""
    d = len(tokens[0][1])
    x = torch.zeros(1, len(tokens), CONTENT + d)
    for pos, (kind, content) in enumerate(tokens):
        x[0, pos, {"bos": BOS, "trigger": TRIGGER, "other": OTHER}[kind]] = 1.0
        x[0, pos, CONTENT:] = torch.tensor(content)
    return x


def test_targets_hand_checked():
    x = _sequence(
        [
            ("bos", [0.0, 0.0]),
            ("other", [1.0, 2.0]),
            ("other", [3.0, -4.0]),
            ("trigger", [100.0, 100.0]),  # its own content does not count
            ("other", [5.0, 5.0]),
        ]
    )
    expected = torch.zeros(1, 5, 2)
    expected[0, 3] = torch.tensor([2.0, -1.0])
    assert torch.equal(trigger_targets(x), expected)


def test_targets_several_triggers_count_earlier_triggers():
    x = _sequence(
        [
            ("bos", [7.0]),  # BOS content never counts, even when nonzero
            ("other", [1.0]),
            ("trigger", [3.0]),
            ("other", [5.0]),
            ("trigger", [0.0]),
        ]
    )
    assert trigger_targets(x)[0, :, 0].tolist() == [0.0, 0.0, 1.0, 0.0, 3.0]


def test_trigger_without_preceding_token_is_rejected():
    x = _sequence([("bos", [0.0]), ("trigger", [1.0]), ("other", [2.0])])
    with pytest.raises(ValueError, match="no preceding non-BOS token"):
        trigger_targets(x)


def test_make_batch_layout_and_seeding():
    task = TriggerTask(seq_len=12, d_content=3, n_triggers=2)
    b = make_batch(task, 64, seed=5)
    x = b.inputs
    assert x.shape == (64, 12, 6) and b.targets.shape == (64, 12, 3)
    assert torch.equal(x[:, :, :3].sum(-1), torch.ones(64, 12))  # one indicator a token
    assert torch.all(x[:, 0, BOS] == 1) and torch.all(x[:, 0, CONTENT:] == 0)
    assert torch.all(b.is_trigger.sum(1) == 2) and not b.is_trigger[:, :2].any()
    assert torch.equal(b.is_trigger, x[..., TRIGGER] == 1)
    assert torch.equal(b.targets, trigger_targets(x))
    assert torch.all(b.targets[~b.is_trigger] == 0)
    assert set(b.is_trigger.nonzero()[:, 1].tolist()) == set(range(2, 12))
    assert torch.equal(make_batch(task, 64, seed=5).inputs, x)
    assert not torch.equal(make_batch(task, 64, seed=6).inputs, x)
    gen = torch.Generator().manual_seed(5)
    first, second = make_batch(task, 4, generator=gen), make_batch(task, 4, generator=gen)
    assert not torch.equal(first.inputs, second.inputs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"seq_len": 1}, "at least 2 tokens"),
        ({"seq_len": 2}, "no room for 1 trigger"),
        ({"seq_len": 5, "n_triggers": 4}, "no room for 4 trigger"),
        ({"d_content": 0}, "content dimension must be a positive"),
        ({"n_triggers": 0}, "at least one trigger"),
    ],
)
def test_bad_task_raises(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TriggerTask(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"attention": "sigmoid"}, "unknown attention kind 'sigmoid'"),
        ({"d_model": 30, "n_heads": 4}, "not divisible by n_heads=4"),
        ({"n_layers": 0}, "n_layers=0"),
        ({"d_mlp": 0}, "d_mlp=0"),
    ],
)
def test_bad_model_config_raises(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TriggerModelConfig.for_task(TriggerTask(), **kwargs)


def test_bad_inputs_raise():
    task = TriggerTask(seq_len=8)
    model = TriggerTransformer(TriggerModelConfig.for_task(task))
    with pytest.raises(ValueError, match="longer than the model's n_ctx=8"):
        model(make_batch(TriggerTask(seq_len=9), 2, seed=0).inputs)
    with pytest.raises(ValueError, match=r"expected \[batch, pos, 11\]"):
        model(torch.zeros(2, 8, 5))
    with pytest.raises(ValueError, match="does not fit the task"):
        train_model(TriggerTask(d_content=3), TriggerModelConfig.for_task(task))
    with pytest.raises(ValueError, match="margin=1.0"):
        relu_construction(task, margin=1.0)
    with pytest.raises(ValueError, match="one trigger a sequence"):
        relu_construction(TriggerTask(n_triggers=2))


@pytest.mark.parametrize("task", [TriggerTask(), TriggerTask(seq_len=40, d_content=3)])
def test_relu_construction_is_exact_with_zero_bos_attention(task):
    model = relu_construction(task)
    batch = make_batch(task, 256, seed=1)
    pred, cache = model.run_with_cache(batch.inputs)
    assert (pred - batch.targets).pow(2).mean().item() < 1e-12
    pattern = cache["blocks.0.attn.hook_pattern"]
    assert torch.all(pattern[..., 0] == 0)  # exactly zero, at every query position
    m = measure_trigger(model, batch)
    assert m.rel_error_trigger < 1e-10 and m.heads[0].nontrigger_mean == 0.0
    checks = {c.theorem: c for c in check_theorems(m)}
    assert checks["theorem 3"].applies and checks["theorem 3"].held
    assert not checks["theorem 1"].applies and checks["theorem 1"].held is None


def test_hook_names_cache_and_hooks():
    task = TriggerTask(seq_len=10, d_content=4)
    cfg = TriggerModelConfig.for_task(task, n_layers=2, n_heads=2, d_model=16, d_mlp=32)
    batch = make_batch(task, 8, seed=0)
    for kind in ("softmax", "relu"):
        model = TriggerTransformer(TriggerModelConfig(**{**cfg.to_dict(), "attention": kind}))
        names = ["hook_embed", "hook_pos_embed"] + [
            f"blocks.{layer}.{name}"
            for layer in range(2)
            for name in (
                "hook_resid_pre", "attn.hook_q", "attn.hook_k", "attn.hook_v",
                "attn.hook_attn_scores", "attn.hook_pattern", "attn.hook_z", "attn.hook_result",
                "hook_attn_out", "hook_resid_mid", "mlp.hook_pre", "mlp.hook_post",
                "hook_mlp_out", "hook_resid_post",
            )
        ]  # fmt: skip
        assert set(names) == set(model.hook_dict)
        out, cache = model.run_with_cache(batch.inputs)
        assert torch.allclose(out, model(batch.inputs))
        pattern = cache["blocks.1.attn.hook_pattern"]
        assert pattern.shape == (8, 2, 10, 10)
        assert torch.all(pattern.triu(1) == 0)  # causal for both kinds
        if kind == "softmax":
            assert torch.allclose(pattern.sum(-1), torch.ones(8, 2, 10))
        else:
            assert torch.equal(pattern, cache["blocks.1.attn.hook_attn_scores"].relu())
        assert cache["blocks.0.attn.hook_z"].shape == (8, 10, 2, 8)

        # Zeroing every head's z leaves exactly b_O as the attention output.
        def zero(z, hook):
            return torch.zeros_like(z)

        ablated = model.run_with_hooks(
            batch.inputs, fwd_hooks=[(lambda n: n.endswith("hook_z"), zero)]
        )
        assert not torch.allclose(ablated, out)
        with model.hooks(fwd_hooks=[(lambda n: n.endswith("hook_z"), zero)]):
            _, zc = model.run_with_cache(batch.inputs, names_filter="blocks.0.hook_attn_out")
        b_O = model.blocks[0].attn.b_O
        assert torch.allclose(zc["blocks.0.hook_attn_out"], b_O.expand(8, 10, -1))


@pytest.fixture(scope="module")
def trained_1x1():
    """Seeded 1-layer, 1-head models of both kinds, trained for 400 steps (~3-6 s each)."""
    task = TriggerTask()
    train = TriggerTrainConfig(steps=400, n_checkpoints=2, seed=0)
    return {
        kind: train_model(task, TriggerModelConfig.for_task(task, attention=kind), train, False)
        for kind in ("softmax", "relu")
    }


SOFTMAX_BOS_BOUND = 0.9
RELU_BOS_BOUND = 0.05
ERROR_BOUND = 0.05


def test_trained_softmax_sinks_and_relu_does_not(trained_1x1):
    results = {
        k: measure_trigger(r.model, eval_batch(r.task, r.train_config))
        for k, r in trained_1x1.items()
    }
    soft, relu = results["softmax"], results["relu"]
    for m in (soft, relu):
        assert m.rel_error_trigger < ERROR_BOUND  # both solve the task
        assert m.mse_nontrigger < 1e-3
    assert soft.heads[0].nontrigger_mean > SOFTMAX_BOS_BOUND
    assert soft.heads[0].nontrigger_sd < 0.05  # a low-variance sink
    assert soft.heads[0].trigger_mean < 0.1  # at the trigger it attends to the content instead
    assert relu.heads[0].nontrigger_mean < RELU_BOS_BOUND
    checks = {c.theorem: c.held for c in check_theorems(soft)}
    assert checks == {"theorem 1": True, "theorem 2": None, "theorem 3": None}
    assert {c.theorem: c.held for c in check_theorems(relu)}["theorem 3"] is True


def test_training_is_seeded_and_checkpointed(trained_1x1, tmp_path):
    from attn_sink_circuits.studies.trigger import load_trigger_checkpoint, save_checkpoints

    r = trained_1x1["softmax"]
    assert [c.step for c in r.checkpoints] == [0, 200, 400]
    # the sink forms during training
    assert r.checkpoints[0].max_bos_nontrigger < 0.5 < r.checkpoints[-1].max_bos_nontrigger
    assert r.sink_formed_at() in (200, 400)  # Gu's eps 0.3: not at initialisation
    assert r.sink_formed_at(eps=1.01) is None
    chosen = TriggerTrainConfig(steps=20, seed=0, checkpoint_at=(5, 20))
    again = train_model(r.task, r.model_config, chosen, progress=False)
    assert again.losses == r.losses[:20]
    assert [c.step for c in again.checkpoints] == [0, 5, 20]
    with pytest.raises(ValueError, match=r"checkpoint_at has steps \[30\]"):
        TriggerTrainConfig(steps=20, checkpoint_at=(30,))
    paths = save_checkpoints(r, tmp_path)
    restored = load_trigger_checkpoint(paths[-1])
    x = eval_batch(r.task, r.train_config).inputs
    assert torch.equal(restored(x), r.model(x))


def test_trigger_graph_roles_and_export(trained_1x1, tmp_path):
    import attn_sink_circuits.graph as cg

    r = trained_1x1["softmax"]
    g = trigger_graph(r.model, eval_batch(r.task, r.train_config), sink_threshold=0.3)
    head = g.nodes["L0.H0"]
    assert head["kind"] == "head" and (head["layer"], head["head"]) == (0, 0)
    assert head["role"] == "sink_aggregator"  # sinks off-trigger, averages at the trigger
    assert head["bos_attention"] > 0.9 and head["aggregation"] > 0.9
    assert head["trigger_selectivity"] > 0.9
    assert g.edges["L0.H0", "target:mse_trigger"]["effect"] > 0.1  # the head does the task
    assert g.graph["attention"] == "softmax" and g.graph["seed"] == 0
    assert cg.thresholds(g)["sink_threshold"] == 0.3
    back = cg.read(cg.write(g, tmp_path / "c.graphml"))
    assert dict(back.nodes(data=True)) == dict(g.nodes(data=True))
    relu = relu_construction(TriggerTask())
    assert trigger_graph(relu, make_batch(TriggerTask(), 64, seed=0)).nodes["L0.H0"]["role"] == (
        "aggregator"
    )
    # An untrained head attends about uniformly: much mass on content at the trigger, but no
    # more than elsewhere, so it does not count as aggregating.
    fresh = TriggerTransformer(r.model_config, seed=0)
    (role,) = head_roles(fresh, make_batch(r.task, 64, seed=0))
    assert role.aggregation > 0.5 and abs(role.trigger_selectivity) < 0.2
    assert role.role == "other"


def test_cli_writes_table_plots_graph_checkpoints(tmp_path):
    from attn_sink_circuits.cli import main

    out = tmp_path / "trig"
    args = ["trigger", "--attention", "softmax", "relu", "--layers", "1", "--heads", "1"]
    args += ["--out", str(out), "--seeds", "0", "--steps", "30"]
    assert main(args) == 0
    for name in (
        "runs.csv", "summary.csv", "heads.csv", "experiment.json", "bos_distributions.png",
        "loss_curves.png", "sink_over_training.png", "circuit_softmax_1x1_seed0.graphml",
        "checkpoints/relu_1x1_seed0/step_000030.pt",
    ):  # fmt: skip
        assert (out / name).is_file(), name
    bad = ["trigger", "--layers", "1", "4", "--heads", "1", "--out", str(out)]
    assert main(bad) == 2


# -- issue 15: numbers checked before work, strict JSON, resumable experiments ---------------

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: TriggerTrainConfig(lr=INF), "lr=inf: must be a finite number"),
        (lambda: TriggerTrainConfig(lr=NAN), "lr=nan: must be a finite number"),
        (lambda: TriggerTrainConfig(lr=0.0), r"lr=0.0: must lie in \(0.0, inf\]"),
        (lambda: TriggerTrainConfig(weight_decay=-1e-3), "weight_decay=-0.001"),
        (lambda: TriggerTrainConfig(steps=-1), "steps=-1: must be an integer >= 1"),
        (lambda: TriggerTrainConfig(seed=-1), "seed=-1: must be an integer >= 0"),
        (lambda: TriggerTrainConfig(eval_examples=0), "eval_examples=0"),
        (lambda: TriggerModelConfig.for_task(TriggerTask(), init_scale=NAN), "init_scale=nan"),
        (lambda: TriggerModelConfig.for_task(TriggerTask(), init_scale=INF), "init_scale=inf"),
        (lambda: TriggerModelConfig.for_task(TriggerTask(), d_head=-2), "d_head=-2"),
        (lambda: make_batch(TriggerTask(), -1, seed=0), "batch_size=-1"),
        (lambda: make_batch(TriggerTask(), 4, seed=-3), "seed=-3"),
        (lambda: relu_construction(TriggerTask(), margin=NAN), "margin=nan"),
    ],
)
def test_bad_numbers_are_refused(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"seeds": (0, 0)}, r"seeds \[0, 0\] repeats 0"),
        ({"seeds": (1, -1)}, "seed=-1"),
        ({"sizes": ((1, 1), (1, 1))}, r"sizes \[\(1, 1\), \(1, 1\)\] repeats \(1, 1\)"),
        ({"attentions": ("relu", "relu")}, "repeats 'relu'"),
        ({"sizes": ((1, 0),)}, "n_heads=0"),
        ({"init_scale": NAN}, "init_scale=nan"),
        ({"sink_bound": 5.0}, r"sink_bound=5.0: must lie in \[0.0, 1.0\]"),
        ({"error_bound": NAN}, "error_bound=nan"),
        ({"train_config": None, "resume": True}, "resume=True needs runs_dir"),
    ],
)
def test_a_bad_experiment_fails_before_any_training(monkeypatch, kwargs, message):
    import dataclasses

    import attn_sink_circuits.studies.trigger.experiment as ex
    from attn_sink_circuits.studies.trigger import Bounds

    trained = []
    monkeypatch.setattr(ex, "train_model", lambda *a, **k: trained.append(a))

    def only(cls) -> dict:
        names = {f.name for f in dataclasses.fields(cls)}
        return {k: kwargs.pop(k) for k in list(kwargs) if k in names}

    with pytest.raises(ValueError, match=message):
        grid = ex.ExperimentGrid(**{"sizes": ((1, 1),), **only(ex.ExperimentGrid)})
        bounds = Bounds(**only(Bounds))
        ex.run_experiment(grid, bounds=bounds, progress=False, **kwargs)
    assert trained == []


def _tiny_experiment(**kwargs):
    from attn_sink_circuits.studies.trigger import ExperimentGrid, run_experiment

    return run_experiment(
        ExperimentGrid(attentions=("softmax",), sizes=((1, 1),), seeds=(0, 1, 2)),
        train_config=TriggerTrainConfig(steps=30, n_checkpoints=2, eval_examples=32),
        progress=False,
        **kwargs,
    )


def test_saved_json_is_strict_and_flags_non_finite_values(tmp_path):
    import json

    from attn_sink_circuits.studies.trigger import save_experiment

    exp = _tiny_experiment()
    exp.runs[0].train.losses[3] = NAN  # a diverged step
    exp.runs[1].train.losses[4] = INF
    with pytest.raises(ValueError, match="sink_threshold=2.0"):
        save_experiment(exp, tmp_path / "bad", sink_threshold=2.0)
    assert not (tmp_path / "bad").exists()  # refused before writing anything
    save_experiment(exp, tmp_path / "out")

    def refuse(literal):
        raise AssertionError(f"non-standard JSON literal {literal}")

    doc = json.loads((tmp_path / "out" / "experiment.json").read_text(), parse_constant=refuse)
    assert doc["runs"][0]["training"]["losses"][3] is None
    assert doc["non_finite"] == ["runs[0].training.losses[3]", "runs[1].training.losses[4]"]


def _identical(a, b) -> None:
    for x, y in zip(a.runs, b.runs, strict=True):
        assert x.name == y.name and x.train.losses == y.train.losses
        assert x.measurement.to_dict() == y.measurement.to_dict()


def test_an_interrupted_experiment_resumes_without_retraining(tmp_path, monkeypatch):
    import attn_sink_circuits.studies.trigger.experiment as ex

    whole = _tiny_experiment()
    real, calls = ex.train_model, []

    def interrupted_at_third(*args, **kwargs):
        calls.append(args[2].seed)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(ex, "train_model", interrupted_at_third)
    runs = tmp_path / "runs"
    with pytest.raises(KeyboardInterrupt):
        _tiny_experiment(runs_dir=runs)
    assert sorted(p.name for p in runs.iterdir()) == [
        "softmax_1x1_seed0.pt",
        "softmax_1x1_seed1.pt",
    ]
    with pytest.raises(ValueError, match="already holds finished runs; pass resume=True"):
        _tiny_experiment(runs_dir=runs)
    calls.clear()
    resumed = _tiny_experiment(runs_dir=runs, resume=True)
    assert calls == [2]  # only the run in progress is trained again
    _identical(resumed, whole)
    with pytest.raises(ValueError, match="trained with other settings"):
        ex.run_experiment(
            ex.ExperimentGrid(attentions=("softmax",), sizes=((1, 1),), seeds=(0,)),
            train_config=TriggerTrainConfig(steps=31),
            runs_dir=runs,
            resume=True,
            progress=False,
        )


KILLED_EXPERIMENT = """
import sys
from attn_sink_circuits.studies.trigger import ExperimentGrid, TriggerTrainConfig, run_experiment
run_experiment(
    ExperimentGrid(attentions=("softmax",), sizes=((1, 1),), seeds=(0, 1, 2)),
    train_config=TriggerTrainConfig(steps=30, n_checkpoints=2, eval_examples=32),
    progress=False, runs_dir=sys.argv[1],
)
"""


def test_kill_9_loses_only_the_run_in_progress(tmp_path, monkeypatch):
    import os
    import signal
    import subprocess
    import sys
    import time

    import attn_sink_circuits.studies.trigger.experiment as ex

    runs = tmp_path / "runs"
    real, calls = ex.train_model, []

    def counted(*args, **kwargs):
        calls.append(args[2].seed)
        return real(*args, **kwargs)

    # The child is killed once its first run is on disk, while the second trains.
    code = KILLED_EXPERIMENT.replace(
        "run_experiment(",
        "import attn_sink_circuits.studies.trigger.experiment as ex, time\n"
        "real = ex.train_model\n"
        "def slower(*a, **k):\n"
        "    if a[2].seed == 1:\n"
        "        time.sleep(300)\n"
        "    return real(*a, **k)\n"
        "ex.train_model = slower\n"
        "ex.run_experiment(",
        1,
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(runs)], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240
    while not (runs / "softmax_1x1_seed0.pt").exists():
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline, "the first run never finished"
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert sorted(p.name for p in runs.iterdir()) == ["softmax_1x1_seed0.pt"]
    monkeypatch.setattr(ex, "train_model", counted)
    resumed = _tiny_experiment(runs_dir=runs, resume=True)
    assert calls == [1, 2]  # seed 0 was kept
    _identical(resumed, _tiny_experiment())


def test_the_old_names_still_resolve():
    import attn_sink_circuits.studies.trigger as trigger

    assert trigger.measure is trigger.measure_trigger
    assert trigger.circuit_graph is trigger.trigger_graph
