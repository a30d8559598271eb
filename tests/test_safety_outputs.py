"""Nothing lost, round two (issue 19): each test is one probe that failed before.

Output folders are replaced only when this library wrote them; scratch left by kill -9 is
removed by the next run; writes never go through a link or into a device; files the library
writes read back (line separators, XML-unholdable characters); bad input is one line naming
the input, before any model loads; a folder model is known by its weights' hash."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import networkx as nx
import pytest
import torch

from attn_sink_circuits import cli
from attn_sink_circuits.core.traces import Trace, read_corpus, read_traces
from attn_sink_circuits.generation import write_traces
from attn_sink_circuits.graph import add_effect, new_graph
from attn_sink_circuits.graph import io as graph_io
from attn_sink_circuits.runs.io import (
    _HOST,
    MARKER,
    atomic_folder,
    atomic_write,
    read_marker,
    remove_stale_scratch,
)

TRIGGER = ["trigger", "--steps", "5", "--seeds", "0", "--attention", "softmax"]


def _err(capsys) -> str:
    err = capsys.readouterr().err
    return err[err.find("circuits ") :]  # after any progress bar


# -- 1. --out replaces only what this library wrote ---------------------------------------


def test_out_never_replaces_a_folder_the_library_did_not_write(tmp_path, monkeypatch, capsys):
    work = tmp_path / "w"
    work.mkdir()
    (work / "thesis.tex").write_text("precious")
    monkeypatch.chdir(work)
    for out in (".", str(work), str(tmp_path), "..", "/"):  # the working folder or above it
        assert cli.main([*TRIGGER, "--out", out]) == 2
        err = _err(capsys)
        assert "is the working folder or holds it" in err and err.count("\n") == 1, err
    monkeypatch.chdir(tmp_path)
    assert cli.main([*TRIGGER, "--out", "w"]) == 2
    err = _err(capsys)
    assert f"--out w holds files this library did not write (no {MARKER})" in err
    assert "--out w-run" in err and err.count("\n") == 1
    assert [p.name for p in work.iterdir()] == ["thesis.tex"]
    assert (work / "thesis.tex").read_text() == "precious"


def test_out_replaces_an_empty_folder_and_its_own_runs(tmp_path, capsys):
    out = tmp_path / "t"
    out.mkdir()
    assert cli.main([*TRIGGER, "--out", str(out)]) == 0  # empty: taken
    record = read_marker(out)
    assert record["written_by"] == "circuits" and record["run"] == {"experiment": "trigger"}
    assert cli.main([*TRIGGER, "--out", str(out)]) == 0  # its own run: replaced
    # A marker that is not this library's (not JSON, another writer) does not count.
    (out / MARKER).write_text('{"written_by": "someone"}')
    assert read_marker(out) is None
    assert cli.main([*TRIGGER, "--out", str(out)]) == 2
    link = tmp_path / "link"
    link.symlink_to(out)
    assert cli.main([*TRIGGER, "--out", str(link)]) == 2
    assert "is a symbolic link" in _err(capsys)


def test_a_folder_filled_while_the_run_worked_is_not_replaced(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(ValueError, match="did not write"), atomic_folder(out) as tmp:
        (tmp / "result.csv").write_text("new")
        out.mkdir()
        (out / "notes.txt").write_text("put here meanwhile")
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no scratch left


# -- 4. leftovers of kill -9 and reruns ---------------------------------------------------

_KILLED_WRITER = """
import sys, time
from attn_sink_circuits.runs.io import atomic_folder, atomic_write
with atomic_folder(sys.argv[1]) as tmp, atomic_write(sys.argv[2]) as fh:
    (tmp / "part.csv").write_text("half")
    fh.write("half")
    print("writing", flush=True)
    time.sleep(60)
"""


def test_scratch_of_a_killed_run_is_removed_by_the_next_run(tmp_path):
    out, file = tmp_path / "out", tmp_path / "f.json"
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLED_WRITER, str(out), str(file)], stdout=subprocess.PIPE
    )
    assert proc.stdout.readline() == b"writing\n"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert len(left) == 2 and all(n.endswith(".tmp") for n in left), left
    # Scratch of a live run (this one) and look-alike names of the user's are kept.
    mine = tmp_path / f".out.{_HOST}-{os.getpid()}.abcdefgh.tmp"
    mine.mkdir()
    (tmp_path / ".out.backup.tmp").mkdir()
    with atomic_folder(out) as tmp:
        (tmp / "done.csv").write_text("whole")
    with atomic_write(file) as fh:
        fh.write("whole")
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted([".out.backup.tmp", mine.name, "f.json", "out"])
    assert remove_stale_scratch(out) == []


def test_trigger_twice_behaves_like_p0(tmp_path, capsys):
    argv = [*TRIGGER, "--out", str(tmp_path / "t")]
    assert cli.main(argv) == 0
    assert not (tmp_path / "t.runs").exists()  # removed after success, like p0's steps
    assert cli.main(argv) == 0  # the same command again: replaces its own output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t"]
    # Runs left by an interrupted run: the message names --resume, and --resume uses them.
    from attn_sink_circuits.studies.trigger import ExperimentGrid, TrainConfig, run_experiment

    grid = ExperimentGrid(["softmax"], [(1, 1)], [0])
    run_experiment(grid, train_config=TrainConfig(steps=5), runs_dir=tmp_path / "t.runs",
                   progress=False)  # fmt: skip
    capsys.readouterr()
    assert cli.main(argv) == 2
    err = _err(capsys)
    assert "pass --resume to continue it" in err and "resume=True" not in err
    assert cli.main([*argv, "--resume"]) == 0
    assert not (tmp_path / "t.runs").exists()


# -- 5. writes never go through links or into devices -------------------------------------


def _graph() -> nx.DiGraph:
    g = new_graph("smollm2-135m", data="probe", metric="p0_mass", seed=0)
    add_effect(g, "embed", "L0.H1", 0.5, intervention="mean")
    add_effect(g, "L0.H1", "target:p0_mass", -0.25, intervention="mean")
    return g


def test_writes_never_follow_a_link_or_replace_a_device(tmp_path, capsys):
    src = graph_io.write(_graph(), tmp_path / "c.json")
    target = tmp_path / "target.dot"
    target.write_text("the user's file")
    link = tmp_path / "link.dot"
    link.symlink_to(target)
    assert cli.main(["export", str(src), "--format", "dot", "--out", str(link)]) == 2
    assert "is a symbolic link" in _err(capsys)
    assert link.is_symlink() and target.read_text() == "the user's file"
    fifo = tmp_path / "pipe.dot"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="not a regular file"):
        graph_io.write(_graph(), fifo)
    assert fifo.is_fifo()


# -- 3. files the library writes read back ------------------------------------------------


def test_line_separators_inside_records_read_back(tmp_path):
    odd = "a\u2028b\u2029c\x85d\x1ce\x0bf"
    trace = Trace(1, f"problem {odd}", 2, "m", [1, 2, 3], 2, f"text {odd}", odd, {"seed": 0})
    for name in ("t.jsonl", "t.jsonl.gz"):
        path = write_traces([trace, trace], tmp_path / name)
        assert read_traces(path) == [trace, trace]
        assert read_corpus(path) == [trace, trace]
    from attn_sink_circuits.core.texts import read_texts

    texts = tmp_path / "texts.jsonl"
    texts.write_text("".join(json.dumps({"text": f"{i} {odd}"}, ensure_ascii=False) + "\n"
                             for i in range(3)), encoding="utf-8")  # fmt: skip
    assert read_texts(texts) == [f"{i} {odd}" for i in range(3)]
    crlf = tmp_path / "crlf.txt"
    crlf.write_bytes(b"one\r\ntwo\r\n")
    assert read_texts(crlf) == ["one", "two"] and read_corpus(crlf) == ["one", "two"]


@pytest.mark.parametrize("suffix", [".graphml", ".gexf"])
def test_xml_exports_hold_control_characters(tmp_path, suffix):
    g = _graph()
    g.graph["data"] = "vertical\x0btab, nul\x00, escape \ue000 itself, \ue0000041; literal"
    g.nodes["L0.H1"]["label"] = "head\x1b[0m\x0c"
    g.edges["embed", "L0.H1"]["intervention"] = "mean\x08\ufffe"
    back = graph_io.read(graph_io.write(g, tmp_path / f"c{suffix}"))
    assert back.graph["data"] == g.graph["data"]
    assert back.nodes["L0.H1"]["label"] == "head\x1b[0m\x0c"
    assert back.edges["embed", "L0.H1"]["intervention"] == "mean\x08\ufffe"


# -- 2 and 6. one line naming the input, not a traceback ----------------------------------


def _no_model(monkeypatch):
    from attn_sink_circuits.models import load as load_mod

    def boot(*args, **kwargs):
        raise AssertionError("a model was loaded before the input was checked")

    monkeypatch.setattr(load_mod, "_boot", boot)


def test_sinks_file_errors_name_the_file_and_line(tmp_path, monkeypatch, capsys):
    _no_model(monkeypatch)
    cases = {
        "list.jsonl": ('{"text": "a"}\n[1, 2]\n', "list.jsonl:2: not a text record", "a list"),
        "num.jsonl": ("7\n", "num.jsonl:1: not a text record", "a number"),
        "bad.jsonl": ('{"text": "a"}\n\n{"text": \n', "bad.jsonl:3:", "not JSON"),
        "latin.txt": (b"caf\xe9\n", "latin.txt: not UTF-8 text", "at byte 3"),
    }
    for name, (content, where, why) in cases.items():
        path = tmp_path / name
        (path.write_bytes if isinstance(content, bytes) else path.write_text)(content)
        argv = ["sinks", "--texts", str(path), "--out", str(tmp_path / "o")]
        assert cli.main(argv) == 2
        err = _err(capsys)
        assert f"{path.parent}/{where}" in err and why in err and err.count("\n") == 1, err


def test_unavailable_devices_are_refused_before_the_model_loads(tmp_path, monkeypatch, capsys):
    _no_model(monkeypatch)
    texts = tmp_path / "t.txt"
    texts.write_text("".join(f"text number {i}\n" for i in range(60)))
    bad = ["tpu", "nonsense", "cuda:99"]
    if not torch.cuda.is_available():
        bad.append("cuda")
    if not torch.backends.mps.is_available():
        bad.append("mps")
    for device in bad:
        for argv in (
            ["sinks", "--text", "abc", "--out", str(tmp_path / "s")],
            ["p0", "--texts", str(texts), "--out", str(tmp_path / "p")],
        ):
            assert cli.main([*argv, "--device", device]) == 2
            err = _err(capsys)
            assert f"--device {device}" in err and err.count("\n") == 1, err


def test_the_cli_prints_every_line_of_an_error(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"directed": True, "graph": {}, "nodes": [{"id": "embed"}],
                               "edges": []}))  # fmt: skip
    assert cli.main(["export", str(bad), "--format", "dot"]) == 2
    err = _err(capsys)
    assert "not a valid circuit graph:" in err
    reasons = err.split("not a valid circuit graph:")[1].strip().splitlines()
    assert len(reasons) >= 2 and all(r.startswith("  ") or r == r.strip() for r in reasons)
    assert any("node 'embed'" in r for r in reasons), err


# -- 8. refusals before torch is imported or the model loaded -----------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["sinks", "--text", "abc", "--out", "FILE"],
        ["generate", "--out", "FILE"],
        ["generate", "--out", "LINK"],
    ],  # fmt: skip
)
def test_bad_out_is_refused_before_torch_is_imported(tmp_path, argv):
    (tmp_path / "FILE").write_text("x")
    (tmp_path / "LINK.jsonl").symlink_to(tmp_path / "FILE")
    argv = [a.replace("FILE", str(tmp_path / "FILE")) for a in argv]
    argv = [a.replace("LINK", str(tmp_path / "LINK.jsonl")) for a in argv]
    code = (
        "import sys; from attn_sink_circuits import cli; rc = cli.main(sys.argv[1:]); "
        "print(rc, 'torch' in sys.modules)"
    )
    t = time.perf_counter()
    run = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True)
    assert run.stdout.split() == ["2", "False"], run.stderr
    assert run.stderr.count("\n") == 1 and "--out" in run.stderr
    assert time.perf_counter() - t < 30


def test_p0_checks_the_default_texts_count_before_the_model_loads(tmp_path, monkeypatch, capsys):
    _no_model(monkeypatch)
    p0 = next(a for a in cli.build_parser()._actions if a.dest == "command").choices["p0"]
    heldout = next(f for a in p0._actions for f in a.option_strings if f.endswith("n-heldout"))
    argv = ["p0", "--out", str(tmp_path / "p"), heldout, "1000000"]
    assert cli.main(argv) == 2
    err = _err(capsys)
    assert "mix.jsonl holds" in err or "python_reference.jsonl holds" in err, err
    assert f"{heldout} 1000000 are needed" in err and err.count("\n") == 1, err


# -- 2. dtype: bfloat16 sinks measure and plot --------------------------------------------


def _model_folder(folder: Path, seed: int) -> Path:
    from transformers import LlamaConfig, LlamaForCausalLM

    from attn_sink_circuits.models.tiny import VOCAB, byte_tokenizer

    byte_tokenizer(folder)
    config = LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
        bos_token_id=1, eos_token_id=2, pad_token_id=0, architectures=["LlamaForCausalLM"],
    )  # fmt: skip
    torch.manual_seed(seed)
    LlamaForCausalLM(config).save_pretrained(folder)
    return folder


def test_bfloat16_sinks_are_measured_and_plotted(tmp_path, capsys):
    folder = _model_folder(tmp_path / "m", seed=0)
    argv = ["sinks", "--model", str(folder), "--dtype", "bfloat16", "--rasters", "1"]
    argv += ["--text", "The sink forms at the first token of every text.", "--out"]
    assert cli.main([*argv, str(tmp_path / "s")]) == 0, capsys.readouterr().err
    assert (tmp_path / "s" / "sinks.json").is_file()
    assert len(list((tmp_path / "s").glob("*.png"))) >= 3


# -- 7. a folder model is known by its weights ---------------------------------------------


def test_a_folder_model_is_known_by_its_weights(tmp_path, monkeypatch):
    from attn_sink_circuits.discovery.saved import check_model
    from attn_sink_circuits.models import load_model

    folder = _model_folder(tmp_path / "m", seed=0)
    model = load_model(str(folder))
    graph = new_graph(model, data="probe", metric="p0_attention", seed=0)
    assert graph.graph["model"] == str(folder.resolve()) and len(graph.graph["model_hash"]) == 64
    check_model(graph, load_model(f"{folder}/"))  # trailing slash: the same model
    monkeypatch.chdir(tmp_path)
    check_model(graph, load_model("m"))  # relative path: the same model
    moved = folder.rename(tmp_path / "moved")
    check_model(graph, load_model(str(moved)))  # same weights elsewhere: the same model
    _model_folder(moved.rename(folder), seed=1)  # weights replaced in place
    with pytest.raises(ValueError, match="the same name with other weights"):
        check_model(graph, load_model(str(folder)))


# -- 9. progress inside the edge step ------------------------------------------------------


def test_the_edge_step_shows_each_phase(tmp_path, capsys):
    from attn_sink_circuits.discovery import DiscoveryConfig, discover, token_rows
    from attn_sink_circuits.discovery.phases import PHASES
    from attn_sink_circuits.models.planted import planted_p0_model
    from attn_sink_circuits.patching.metrics import p0_attention

    planted = planted_p0_model(folder=tmp_path)
    texts = [f"Text {i}: the sink sits at the first token here." for i in range(8)]
    fit, held = token_rows(planted.model, texts[:4], 12), token_rows(planted.model, texts[4:], 12)
    cfg = DiscoveryConfig(n_curve=4, n_stability=2, n_exact_texts=1, max_exact=2, n_boot=10)
    metric = p0_attention(list(planted.sink_layers))
    capsys.readouterr()
    discover(planted.model, fit, held, metric, config=cfg, progress=True)
    err = capsys.readouterr().err
    assert "edge circuit" in err
    shown = [phase for phase in PHASES if phase in err]
    assert shown == list(PHASES), err[-2000:]
    discover(planted.model, fit, held, metric, config=cfg)  # quiet by default
    assert "edge circuit" not in capsys.readouterr().err
