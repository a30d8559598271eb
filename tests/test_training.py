"""Training small byte-level Llamas: the corpus split, the checkpoint schedule, checkpoints that
load through `load_model`, and resuming after a crash giving the uninterrupted run's weights."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from attn_sink_circuits.training import corpus as corpus_mod
from attn_sink_circuits.training import train as train_mod
from attn_sink_circuits.training.corpus import load_corpus
from attn_sink_circuits.training.lm import LMConfig, build_model
from attn_sink_circuits.training.train import TrainConfig, checkpoint_folder, train_lm

TINY = LMConfig(n_layers=1, d_model=16, n_heads=2, d_mlp=32, n_ctx=16)
FAST = TrainConfig(
    steps=40, batch_size=4, save_every=10, n_checkpoints=5, first_checkpoint=2,
    eval_windows=4, eval_every=20, log_every=1000,
)  # fmt: skip


@pytest.fixture(scope="module")
def corpus():
    return load_corpus(max_files=40)


def test_corpus_split_is_by_file_name_and_disjoint(corpus):
    files = corpus_mod.source_files(corpus_mod.stdlib_root(), 40)
    held = [
        f
        for f in files
        if corpus_mod.is_heldout(f.relative_to(corpus_mod.stdlib_root()).as_posix())
    ]
    assert corpus.n_heldout_files == len(held) >= 1
    assert corpus.n_train_files == 40 - len(held)
    assert corpus.heldout.size == sum(f.stat().st_size + 1 for f in held)
    assert all("test" not in f.relative_to(corpus_mod.stdlib_root()).parts[:-1] for f in files)
    assert load_corpus(max_files=40).sha256 == corpus.sha256  # same files, same bytes


def test_checkpoint_schedule_is_log_spaced():
    steps = TrainConfig(steps=4000).checkpoint_steps()
    assert steps[0] == 0 and steps[1] == 10 and steps[-1] == 4000
    assert len(steps) == 25  # step 0 + 24 log-spaced
    ratios = np.diff(np.log(steps[1:]))
    assert ratios.min() > 0 and ratios.max() - ratios.min() < 0.05


def test_checkpoints_load_as_models_with_the_trained_weights(tmp_path, corpus):
    from attn_sink_circuits.models import load_model

    run = train_lm(tmp_path / "run", TINY, FAST, corpus, progress=False)
    steps = [int(p.name.split("_")[1]) for p in sorted((run / "checkpoints").iterdir())]
    assert steps == FAST.checkpoint_steps()
    final = torch.load(run / "state.pt", weights_only=True)["model"]
    hf = build_model(TINY, seed=99)
    hf.load_state_dict(final)
    bridge = load_model(checkpoint_folder(run, 40))
    tokens = bridge.to_tokens("def f(x):\n    return x")
    assert tokens[0, 0] == 1  # <bos>, as in training
    with torch.no_grad():
        torch.testing.assert_close(bridge(tokens), hf(input_ids=tokens).logits, atol=1e-4, rtol=0)
    meta = json.loads((checkpoint_folder(run, 40) / "training.json").read_text())
    assert meta["step"] == 40 and meta["tokens"] == 40 * FAST.batch_size * TINY.n_ctx
    logged = [int(line.split(",")[0]) for line in (run / "log.csv").read_text().splitlines()[1:]]
    # log_every 1000: a row at each checkpoint and held-out step (eval_every 20), no other
    assert logged == sorted(set(FAST.checkpoint_steps()) - {0} | {20, 40})


def test_resume_after_crash_gives_the_uninterrupted_weights(tmp_path, corpus, monkeypatch):
    ref = torch.load(train_lm(tmp_path / "ref", TINY, FAST, corpus, progress=False) / "state.pt",
                     weights_only=True)  # fmt: skip
    real = train_mod.batch_at

    def dies_at_step_25(train, step, config, n_ctx):
        if step == 25:  # mid-run, 5 steps after the last saved state (step 20)
            raise KeyboardInterrupt
        return real(train, step, config, n_ctx)

    monkeypatch.setattr(train_mod, "batch_at", dies_at_step_25)
    with pytest.raises(KeyboardInterrupt):
        train_lm(tmp_path / "run", TINY, FAST, corpus, progress=False)
    assert torch.load(tmp_path / "run" / "state.pt", weights_only=True)["step"] == 20
    monkeypatch.setattr(train_mod, "batch_at", real)
    got = torch.load(train_lm(tmp_path / "run", TINY, FAST, corpus, progress=False) / "state.pt",
                     weights_only=True)  # fmt: skip
    assert got["step"] == 40
    for name, tensor in ref["model"].items():
        assert torch.equal(got["model"][name], tensor), name
    assert "rows" not in got  # the row log lives in log.csv alone
    assert _same_losses(tmp_path / "run", tmp_path / "ref")
    assert not list((tmp_path / "run").glob(".*tmp"))  # no half-written file left


def _same_losses(a, b) -> bool:
    """The logs agree but for seconds per step (wall time)."""
    import pandas as pd

    left, right = pd.read_csv(a / "log.csv"), pd.read_csv(b / "log.csv")
    cols = ["step", "lr", "train_loss", "heldout_loss"]
    return left[cols].equals(right[cols])


def test_a_stopped_run_committed_and_cloned_elsewhere_resumes_exactly(tmp_path, corpus):
    """The folder's committed files (run.json, state.pt, log.csv; not the checkpoints) copied
    to another path resume to the uninterrupted run's weights and log."""
    import shutil

    ref = train_lm(tmp_path / "ref", TINY, FAST, corpus, progress=False)
    until = train_mod.Until(steps=13, signals=False)
    train_lm(tmp_path / "a" / "run", TINY, FAST, corpus, progress=False, until=until)
    assert until.reason == "13 steps done"
    assert torch.load(tmp_path / "a" / "run" / "state.pt", weights_only=True)["step"] == 13
    clone = tmp_path / "b" / "elsewhere"
    clone.mkdir(parents=True)
    for name in ("run.json", "state.pt", "log.csv"):
        shutil.copy(tmp_path / "a" / "run" / name, clone / name)
    got = torch.load(train_lm(clone, TINY, FAST, corpus, progress=False) / "state.pt",
                     weights_only=True)  # fmt: skip
    want = torch.load(ref / "state.pt", weights_only=True)
    assert got["step"] == want["step"] == FAST.steps
    for name, tensor in want["model"].items():
        assert torch.equal(got["model"][name], tensor), name
    assert _same_losses(clone, ref)
    doc = json.loads((clone / "run.json").read_text())
    assert doc["corpus"]["root"] == "<stdlib>" and doc["threads"] == torch.get_num_threads()
    assert str(tmp_path) not in (clone / "run.json").read_text()


def test_a_resume_at_another_thread_count_or_on_another_corpus_is_refused(tmp_path, corpus):
    train_lm(tmp_path / "run", TINY, FAST.with_options(steps=4), corpus, progress=False)
    doc = json.loads((tmp_path / "run" / "run.json").read_text())
    (tmp_path / "run" / "run.json").write_text(json.dumps(doc | {"threads": doc["threads"] + 1}))
    with pytest.raises(ValueError, match="--threads"):
        train_lm(tmp_path / "run", TINY, FAST.with_options(steps=4), corpus, progress=False)
    (tmp_path / "run" / "run.json").write_text(json.dumps(doc))
    other = load_corpus(max_files=41)
    with pytest.raises(ValueError, match="another corpus"):
        train_lm(tmp_path / "run", TINY, FAST.with_options(steps=4), other, progress=False)


def test_the_state_of_the_pre_registered_model_stays_under_6_mb(tmp_path, corpus):
    """Weights + AdamW moments of the 8-layer d64 model, whatever the run's length."""
    lm = LMConfig(n_layers=8, d_model=64, n_heads=4, d_mlp=192, n_ctx=64)
    config = FAST.with_options(steps=3, batch_size=2, eval_windows=2, n_checkpoints=1)
    train_lm(tmp_path / "run", lm, config, corpus, progress=False)
    size = (tmp_path / "run" / "state.pt").stat().st_size
    assert 5.0e6 < size <= 6e6, size


def test_other_settings_in_the_same_folder_are_refused(tmp_path, corpus):
    train_lm(tmp_path / "run", TINY, FAST.with_options(steps=4), corpus, progress=False)
    with pytest.raises(ValueError, match="other settings"):
        train_lm(tmp_path / "run", TINY, FAST.with_options(steps=8), corpus, progress=False)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"d_model": 30, "n_heads": 4}, "multiple of n_heads"), ({"n_ctx": 2}, "n_ctx")],
)
def test_bad_model_shapes_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LMConfig(**kwargs)


def test_cli_trains_and_refuses_bad_shapes(tmp_path, capsys):
    from attn_sink_circuits.cli import main

    shape = ["--n-layers", "1", "--d-model", "16", "--n-heads", "2", "--d-mlp", "32"]
    rest = ["--n-ctx", "16", "--steps", "4", "--batch-size", "2", "--n-checkpoints", "2",
            "--first-checkpoint", "2", "--eval-windows", "2", "--max-files", "40", "--threads", "1"]  # fmt: skip
    assert main(["train-lm", "--out", str(tmp_path / "run"), *shape, *rest]) == 0
    steps = sorted(p.name for p in (tmp_path / "run" / "checkpoints").iterdir())
    assert steps == ["step_000000", "step_000002", "step_000004"]
    bad = ["--n-layers", "1", "--d-model", "30", "--n-heads", "4"]
    assert main(["train-lm", "--out", str(tmp_path / "bad"), *bad, *rest]) == 2
    assert "multiple of n_heads" in capsys.readouterr().err


def test_backcopy_corpus_repeats_the_letter_before_each_trigger():
    from attn_sink_circuits.training.backcopy import BackcopyConfig, backcopy_corpus

    config = BackcopyConfig(train_bytes=5_000, heldout_bytes=1_000)
    corpus = backcopy_corpus(config)
    assert (corpus.train.size, corpus.heldout.size) == (5_000, 1_000)
    data = np.concatenate([corpus.train, corpus.heldout])
    assert set(data.tobytes()) <= set(b"abcdefghijklmnop")
    after = np.flatnonzero(np.isin(data[1:-1], list(b"ab"))) + 2  # positions after a trigger
    assert (data[after] == data[after - 2]).all()
    # Elsewhere the letters are uniform and independent: each of the 16 about 1/16 of them.
    plain = np.delete(data, after)
    shares = np.bincount(plain - ord("a"), minlength=16) / plain.size
    assert np.abs(shares - 1 / 16).max() < 0.02
    assert backcopy_corpus(config).sha256 == corpus.sha256
    assert backcopy_corpus(config.with_options(seed=1)).sha256 != corpus.sha256
    assert corpus.manifest()["source"].startswith("synthetic back-copy letters")
    with pytest.raises(ValueError, match="must be below n_letters"):
        BackcopyConfig(n_letters=4, n_triggers=4)


def test_checkpoint_every_adds_an_even_grid_to_the_log_spaced_steps():
    log = set(TrainConfig(steps=4000).checkpoint_steps())
    dense = TrainConfig(steps=4000, checkpoint_every=0.015).checkpoint_steps()
    assert log <= set(dense) and set(range(60, 4000, 60)) <= set(dense)
    assert len(dense) == len(log | set(range(60, 4001, 60)))


def test_windows_without_bos_start_mid_text_and_train(tmp_path, corpus):
    data = corpus.heldout
    with_bos = train_mod.windows_at(data, [5, 9], 8, bos=True)
    without = train_mod.windows_at(data, [5, 9], 8, bos=False)
    assert (with_bos[:, 0] == train_mod.BOS_ID).all() and (without != train_mod.BOS_ID).all()
    assert with_bos.shape == without.shape == (2, 8)
    assert (with_bos[:, 1:] == without[:, :-1]).all()  # the same bytes, one later
    config = FAST.with_options(bos=False)
    assert (train_mod.batch_at(corpus.train, 3, config, 16) != train_mod.BOS_ID).all()
    run = train_lm(tmp_path / "nobos", TINY, config, corpus, progress=False)
    assert json.loads((run / "run.json").read_text())["train"]["bos"] is False


def test_mixed_corpus_alternates_natural_chunks_and_backcopy_letters(corpus):
    from attn_sink_circuits.training.backcopy import interleave, mixed_corpus

    assert interleave(np.arange(6), np.arange(10, 16), 2).tolist() == [0, 1, 10, 11, 2, 3, 12,
                                                                      13, 4, 5, 14, 15]  # fmt: skip
    mix = mixed_corpus(corpus, chunk=64)
    n = corpus.train.size // 64
    assert mix.train.size == 2 * n * 64
    chunks = mix.train.reshape(-1, 64)
    assert (chunks[0::2].reshape(-1) == corpus.train[: n * 64]).all()
    assert set(chunks[1::2].tobytes()) <= set(b"abcdefghijklmnop")
    assert "back-copy" in mix.manifest()["source"] and mix.sha256 != corpus.sha256


def test_committed_long_runs_resume_anywhere_and_stay_small():
    """Every committed run under train: a state of at most 6 MB (no row log in
    it), a run.json naming no machine path, and a measured row for every checkpoint step up
    to the state's step (phases.jsonl), each with Gu's rate counted per text."""
    from pathlib import Path

    from attn_sink_circuits.studies.emergence.watch import read_rows

    runs = sorted((Path(__file__).resolve().parents[1] / "train").glob("*/run.json"))
    if not runs:
        pytest.skip("no long run committed")
    for doc_path in runs:
        run = doc_path.parent
        state = torch.load(run / "state.pt", map_location="cpu", weights_only=True)
        assert (run / "state.pt").stat().st_size <= 6e6 and "rows" not in state
        doc = json.loads(doc_path.read_text())
        assert doc["corpus"]["root"] == "<stdlib>" and doc["threads"] == 1
        assert not any(s in doc_path.read_text() for s in ("/work/", "/root/", "/home/", "/tmp/"))
        config = TrainConfig(**doc["train"])
        due = [s for s in config.checkpoint_steps() if s <= state["step"]]
        rows = read_rows(run)
        assert [r["step"] for r in rows][: len(due)] == due, run.name
        assert all("gu_rate_window_mean" in r for r in rows)
