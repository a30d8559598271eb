"""The command line: instant help without model code, arguments and --out checked before any
model loads, one-line errors, no half-written output on an interrupt."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attn_sink_circuits import cli
from attn_sink_circuits.cli import loading
from attn_sink_circuits.runs.io import MARKER

COMMANDS = tuple(cli.build_parser().commands)
HEAVY = ("torch", "transformer_lens", "transformers")


def test_help_imports_no_model_code():
    code = (
        "import contextlib, io, json, sys\n"
        "from attn_sink_circuits.cli import main\n"
        f"for argv in [['--help']] + [[c, '--help'] for c in {list(COMMANDS)!r}]:\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        try:\n"
        "            main(argv)\n"
        "        except SystemExit:\n"
        "            pass\n"
        f"print(json.dumps([m for m in {list(HEAVY)!r} if m in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_config_options_carry_help_and_defaults(capsys):
    with pytest.raises(SystemExit):
        cli.main(["secondary", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for option in ("--taus", "--n-swap-events", "--min-effect", "--device", "--dtype"):
        assert option in text
    assert "(default: 0.95 0.9)" in text and "(default: secondary)" in text


@pytest.fixture
def no_model(monkeypatch):
    """Fail the test if a command gets as far as loading a model."""

    def load(args):
        raise AssertionError("the model was loaded before the arguments were checked")

    monkeypatch.setattr(loading, "load", load)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["p0", "--keep-share", "5"], "keep_share must be <= 1"),
        (["p0", "--keep-share", "nan"], "keep_share must be a finite number"),
        (["p0", "--n-tokens", "2"], "n_tokens must be >= 4"),
        (["secondary", "--taus", "1.5"], "taus must be <= 1"),
        (["secondary", "--scales", "inf"], "scales must be a finite number"),
        (["trigger", "--seeds", "0", "0"], "repeats a seed"),
        (["trigger", "--layers", "1", "4"], "pair up"),
    ],
)
def test_bad_numbers_fail_before_work(argv, message, tmp_path, capsys, no_model):
    assert cli.main([*argv, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("value", ["inf", "-1", "abc"])
def test_argparse_refuses_bad_numbers(value, tmp_path):
    with pytest.raises(SystemExit) as exc:
        cli.main(["trigger", "--lr", value, "--out", str(tmp_path)])
    assert exc.value.code == 2


@pytest.mark.parametrize("command", ["p0", "secondary", "sinks", "trigger"])
def test_out_is_checked_before_any_model_loads(command, tmp_path, capsys, no_model):
    file = tmp_path / "file.txt"
    file.write_text("x")
    extra = ["--text", "hello"] if command == "sinks" else []
    assert cli.main([command, "--out", str(file), *extra]) == 2
    assert "is a file" in capsys.readouterr().err
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as a user who can write anywhere")
        assert cli.main([command, "--out", str(locked / "out"), *extra]) == 2
        assert "not writable" in capsys.readouterr().err
    finally:
        locked.chmod(0o700)


def test_export_refuses_a_folder_as_out(tmp_path, capsys):
    assert cli.main(["export", "g.graphml", "--format", "dot", "--out", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err


def test_texts_file_errors_name_the_file(tmp_path, capsys, no_model):
    bad = tmp_path / "texts.txt"
    bad.write_bytes(b"caf\xe9\n")
    assert cli.main(["p0", "--texts", str(bad), "--out", str(tmp_path / "o")]) == 2
    assert f"{bad}: not UTF-8" in capsys.readouterr().err
    few = tmp_path / "few.txt"
    few.write_text("one text\ntwo texts\n")
    assert cli.main(["p0", "--texts", str(few), "--out", str(tmp_path / "o")]) == 2
    assert "holds 2 texts; --edge-n-fit 16 + --edge-n-heldout 16" in capsys.readouterr().err
    empty = tmp_path / "empty.txt"
    empty.write_text("\n")
    graph = tmp_path / "c.graphml"
    graph.write_text("<graphml/>")
    assert cli.main(["faithfulness", str(graph), "--texts", str(empty)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_faithfulness_refuses_another_models_graph_before_loading(tmp_path, capsys, no_model):
    from attn_sink_circuits.graph import add_effect, new_graph
    from attn_sink_circuits.graph import io as graph_io

    g = new_graph("qwen2.5-0.5b", data="test", metric="m", seed=0)
    add_effect(g, "embed", "L0.MLP", -0.5, intervention="mean")
    path = graph_io.write(g, tmp_path / "c.json")
    texts = tmp_path / "t.txt"
    texts.write_text("a text\n")
    given = ["--model", "smollm2-135m"]
    assert cli.main(["faithfulness", str(path), "--texts", str(texts), *given]) == 2
    assert "found on model 'qwen2.5-0.5b', not 'smollm2-135m'" in capsys.readouterr().err


def test_faithfulness_takes_the_graphs_model_and_checks_texts_before_loading(
    tmp_path, capsys, no_model
):
    from attn_sink_circuits.models.cache import entry_dir

    if not (entry_dir("smollm2-135m") / "tokenizer.json").is_file():
        pytest.skip("smollm2-135m is not cached yet (the check needs its tokenizer)")
    graph = Path(__file__).parents[1] / "docs/p0/smollm2-135m/circuit.graphml"  # 64 tokens
    texts = tmp_path / "t.txt"
    texts.write_text("a short text\n" + "word " * 100 + "\n")
    assert cli.main(["faithfulness", str(graph), "--texts", str(texts)]) == 2
    err = capsys.readouterr().err
    assert "1 of the 2 texts (first: text 0) have fewer than the 63 tokens" in err


@pytest.mark.slow
def test_sigterm_leaves_no_half_written_folder(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "old.csv").write_text("an earlier run")
    (out / MARKER).write_text(json.dumps({"written_by": "circuits"}))  # an earlier run's
    proc = subprocess.Popen(
        [sys.executable, "-m", "attn_sink_circuits.cli", "p0", "--out", str(out)],
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 120
    seen = ""
    while "p0 circuit" not in seen and time.time() < deadline:  # the tracer has started
        seen += proc.stderr.read(1)
    proc.send_signal(signal.SIGTERM)
    err = seen + proc.stderr.read()
    assert proc.wait(timeout=60) == 130
    assert err.strip().splitlines()[-1].startswith("circuits p0: interrupted")
    # Steps finished before the signal stay in run.steps, for --resume.
    assert {p.name for p in tmp_path.iterdir()} <= {"run", "run.steps"}
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "old.csv"]


def test_every_model_command_takes_device_and_dtype():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name in ("p0", "sinks", "secondary", "generate"):
        flags = {f for a in sub.choices[name]._actions for f in a.option_strings}
        assert {"--device", "--dtype", "--model", "--out"} <= flags, name


def test_out_folder_check(tmp_path):
    from attn_sink_circuits.runs.io import check_out_folder

    assert check_out_folder(tmp_path / "new" / "deeper") == Path(tmp_path / "new" / "deeper")


def test_the_terminal_summary_rounds_numbers_and_folds_nested_dicts(capsys):
    from attn_sink_circuits.cli.output import print_summary

    print_summary(
        {"f": 1.433262786611564, "ci": [1.392312115430832, 1.46], "norm": 25101.873,
         "by_kind": {"prose": {"f": 0.9}, "code": {"f": 0.8}}, "n": 16}
    )  # fmt: skip
    out = capsys.readouterr().out
    assert "f        1.433\n" in out and "[1.392, 1.46]" in out and "25,102" in out
    assert "prose, code (see summary.json)" in out and "1.4332" not in out and "{" not in out
