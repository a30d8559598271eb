"""Nothing lost (issue 15): a P0 trace saves each finished step and resumes from them (library
and `circuits p0 --resume`, also after kill -9), and refuses checkpoints of another run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from attn_sink_circuits import cli
from attn_sink_circuits.cli import loading
from attn_sink_circuits.decoding import plain_hf_model
from attn_sink_circuits.models.planted import P0_TEXTS, planted_p0_model
from attn_sink_circuits.studies.p0 import pipeline, trace_p0
from attn_sink_circuits.studies.p0.pipeline import STEPS

SMALL = {
    "n_tokens": 20, "edge_n_tokens": 20, "edge_n_fit": 4, "edge_n_heldout": 4,
    "edge_n_stability": 10, "edge_n_curve": 8,
}  # fmt: skip
STEP_FUNCTIONS = (
    "first_token_variants", "position_vs_content", "localise", "confirm", "node_graph",
    "edge_circuit",
)  # fmt: skip


@pytest.fixture(scope="module")
def planted_folder(tmp_path_factory):
    """The planted P0 model saved as a Hugging Face folder (loadable by `--model FOLDER`)."""
    folder = tmp_path_factory.mktemp("planted")
    planted = planted_p0_model(folder=folder)
    plain_hf_model(planted.model).save_pretrained(folder)
    return planted, folder


def _temp_files(root) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.name.endswith(".tmp")]


def test_trace_resumes_every_step_from_its_checkpoint(planted_folder, tmp_path, monkeypatch):
    model = planted_folder[0].model
    steps = tmp_path / "steps"
    first = trace_p0(model, P0_TEXTS, progress=False, checkpoint=steps, **SMALL)
    assert first.resumed == ()
    assert sorted(p.name for p in steps.iterdir()) == sorted(
        ["key.json", *(f"{s}.step.pkl" for s in STEPS)]
    )

    def ran(*args, **kwargs):
        raise AssertionError("a step ran although its checkpoint was there")

    for name in STEP_FUNCTIONS:
        monkeypatch.setattr(pipeline, name, ran)
    again = trace_p0(model, P0_TEXTS, progress=False, checkpoint=steps, **SMALL)
    assert again.resumed == STEPS
    assert again.seconds == first.seconds
    assert again.summary() == first.summary()
    for name, frame in first.tables().items():
        pd.testing.assert_frame_equal(again.tables()[name], frame)
    assert again.edges.runner.model is model  # the model is saved by reference
    assert _temp_files(tmp_path) == []


def test_checkpoints_of_another_run_are_refused(planted_folder, tmp_path):
    model = planted_folder[0].model
    steps = tmp_path / "steps"
    trace_p0(model, P0_TEXTS, progress=False, checkpoint=steps, **SMALL)
    with pytest.raises(
        ValueError, match=r"another config/model/texts \(config edge discovery n_curve: 8 there"
    ):
        trace_p0(model, P0_TEXTS, progress=False, checkpoint=steps, **{**SMALL, "edge_n_curve": 6})
    with pytest.raises(ValueError, match=r"\(texts\); delete .*steps or use another"):
        trace_p0(model, P0_TEXTS[::-1], progress=False, checkpoint=steps, **SMALL)
    # A step file copied from another run is refused too, not loaded.
    other = tmp_path / "other"
    trace_p0(model, P0_TEXTS, progress=False, checkpoint=other, **{**SMALL, "edge_n_curve": 6})
    (steps / "edges.step.pkl").write_bytes((other / "edges.step.pkl").read_bytes())
    with pytest.raises(ValueError, match=r"edges.step.pkl was written by another"):
        trace_p0(model, P0_TEXTS, progress=False, checkpoint=steps, **SMALL)
    # A folder that holds something else is not taken over.
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not a checkpoint folder"):
        trace_p0(model, P0_TEXTS, progress=False, checkpoint=busy, **SMALL)


def _argv(folder, texts, out) -> list[str]:
    argv = ["p0", "--model", str(folder), "--texts", str(texts), "--out", str(out)]
    for name, value in SMALL.items():
        argv += [f"--{name.replace('_', '-')}", str(value)]
    return argv


def test_p0_killed_then_resumed_equals_a_fresh_run(planted_folder, tmp_path, capsys):
    folder = planted_folder[1]
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(P0_TEXTS) + "\n")
    out, steps = tmp_path / "run", tmp_path / "run.steps"
    argv = _argv(folder, texts, out)
    # The last step hangs, so the kill lands after the others are saved, never after the end.
    code = (
        "import sys, time\n"
        "import attn_sink_circuits.studies.p0.pipeline as p\n"
        "p.edge_circuit = lambda *a, **k: time.sleep(600)\n"
        "from attn_sink_circuits.cli import main\n"
        f"sys.exit(main({argv!r}))\n"
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 240
        while not (steps / "graph.step.pkl").exists():
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.time() < deadline, "no step checkpoint within 240 s"
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        proc.stderr.close()
    assert not out.exists()

    # Without --resume the checkpoints are neither reused nor overwritten.
    assert cli.main(argv) == 2
    assert "pass --resume to continue it" in capsys.readouterr().err
    assert cli.main([*argv, "--resume"]) == 0
    said = capsys.readouterr().out
    assert f"resumed: 5 of 6 steps loaded from {steps} (variants, position, localise" in said
    assert not steps.exists()  # removed once the report is written

    fresh = tmp_path / "fresh"
    assert cli.main(_argv(folder, texts, fresh)) == 0
    assert "resumed:" not in capsys.readouterr().out
    resumed = json.loads((out / "summary.json").read_text())
    again = json.loads((fresh / "summary.json").read_text())
    assert resumed["summary"] == again["summary"]
    assert resumed["resumed_steps"] == list(STEPS[:5]) and again["resumed_steps"] == []
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in fresh.iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh", "run", "texts.txt"]
    assert _temp_files(tmp_path) == []


def test_checkpoint_folder_is_checked_before_the_model_loads(tmp_path, capsys, monkeypatch):
    def load(args):
        raise AssertionError("the model was loaded before the arguments were checked")

    monkeypatch.setattr(loading, "load", load)
    file = tmp_path / "file"
    file.write_text("x")
    out = ["p0", "--out", str(tmp_path / "out")]
    assert cli.main([*out, "--checkpoints", str(file)]) == 2
    assert "--checkpoints " + str(file) + " is a file" in capsys.readouterr().err
    (tmp_path / "out.steps").mkdir()
    (tmp_path / "out.steps" / "key.json").write_text("{}")
    assert cli.main(out) == 2
    err = capsys.readouterr().err
    # the user gave no --checkpoints: the refusal names the folder and --resume, not the flag
    assert "out.steps holds the finished steps of an earlier run into this --out" in err
    assert "pass --resume" in err and "--checkpoints" not in err and err.count("\n") == 1
    assert cli.main([*out, "--checkpoints", str(tmp_path / "out.steps")]) == 2
    err = capsys.readouterr().err
    assert "--checkpoints " + str(tmp_path / "out.steps") + " holds the checkpoints" in err
