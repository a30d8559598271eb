"""Provenance: every saved result says what code, command, software, model and texts made it,
with a schema version that readers check (the previous layout loads, a newer one is refused)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attn_sink_circuits.runs.io import MARKER, atomic_folder, read_marker
from attn_sink_circuits.runs.provenance import (
    COMMIT_VARIABLE,
    SCHEMA_VERSION,
    check_schema_version,
    code_identity,
    dirty_note,
    finished,
    git_state,
    provenance,
    texts_identity,
)
from attn_sink_circuits.studies.result import read_summary

ROOT = Path(__file__).resolve().parents[1]
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _git(folder: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@needs_git
def test_the_commit_is_the_checkouts_head():
    if not (ROOT / ".git").exists():
        pytest.skip("not run from a git checkout")
    code = code_identity()
    assert code["commit"] == _git(ROOT, "rev-parse", "HEAD")
    assert code["commit_from"] == "git" and isinstance(code["dirty"], bool)
    from attn_sink_circuits import __version__

    assert code["version"] == __version__


@needs_git
def test_the_dirty_flag_follows_the_tree(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "a.py").write_text("x = 1\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first")
    head = _git(repo, "rev-parse", "HEAD")
    assert git_state(repo / "pkg") == {"commit": head, "dirty": False, "commit_from": "git"}
    (repo / "pkg" / "new.py").write_text("y = 2\n")  # untracked
    assert git_state(repo / "pkg")["dirty"] is True
    (repo / "pkg" / "new.py").unlink()
    (repo / "pkg" / "a.py").write_text("x = 2\n")  # modified
    assert git_state(repo / "pkg") == {"commit": head, "dirty": True, "commit_from": "git"}
    # A snapshot without .git (git archive): the commit comes from the environment, or is unknown.
    shutil.rmtree(repo / ".git")
    monkeypatch.delenv(COMMIT_VARIABLE, raising=False)
    assert git_state(repo / "pkg") == {"commit": "unknown", "dirty": None, "commit_from": "unknown"}
    monkeypatch.setenv(COMMIT_VARIABLE, head)
    assert git_state(repo / "pkg") == {
        "commit": head,
        "dirty": None,
        "commit_from": COMMIT_VARIABLE,
    }


def test_the_texts_hash_follows_the_texts_and_kinds(tmp_path):
    texts, kinds = ["one", "two", "three"], ["a", "b", "a"]
    base = texts_identity(texts, kinds, split=([0, 1], [2]))
    assert base["n"] == 3 and base["by_kind"] == {"a": 2, "b": 1}
    assert base["fit_indices"] == [0, 1] and base["heldout_indices"] == [2]
    assert texts_identity(texts, kinds)["sha256"] == base["sha256"]
    assert texts_identity(["one", "two", "four"], kinds)["sha256"] != base["sha256"]
    assert texts_identity(texts, ["a", "b", "b"])["sha256"] != base["sha256"]
    assert base["source"] is None
    # Texts read from a file name it as their source.
    from attn_sink_circuits.core.texts import read_kinded_texts

    path = tmp_path / "t.jsonl"
    path.write_text(
        "".join(
            json.dumps({"text": t, "kind": k}) + "\n" for t, k in zip(texts, kinds, strict=True)
        )
    )
    read = read_kinded_texts(path)
    assert texts_identity(*read)["source"] == "<outside>/t.jsonl"  # no machine path
    assert texts_identity(*read)["sha256"] == base["sha256"]


def test_the_record_holds_the_run(tiny):
    record = provenance(tiny, ["a b c"], None, ([0], []), {"n_tokens": 8})
    command = record["command"]  # the words as given, the paths among them portable
    assert len(command) == len(sys.argv) and not any(c.startswith("/") for c in command)
    kept = [c for c, a in zip(command, sys.argv, strict=True) if not a.startswith("/")]
    assert kept == [a for a in sys.argv if not a.startswith("/")]
    env = record["environment"]
    import torch

    assert env["torch_threads"] == torch.get_num_threads() and env["python"].count(".") == 2
    assert env["torch"] and env["transformers"] and env["transformer_lens"]
    model = record["model"]
    assert model["key"] == "tiny" and model["dtype"] == "float32" and model["device"] == "cpu"
    assert model["quantisation"] is None and model["weights_sha256_of"] == "weight tensors"
    from attn_sink_circuits.core.identity import weights_sha256

    assert model["weights_sha256"] == weights_sha256(tiny)
    assert record["settings"] == {"n_tokens": 8} and record["texts"]["n"] == 1
    started, ended = record["time"]["started_epoch"], time.time()
    assert started <= ended and record["time"]["wall_seconds"] >= 0


def test_a_gguf_model_is_named_with_its_quantisation():
    from types import SimpleNamespace

    from attn_sink_circuits.core.identity import ModelInfo, record_info
    from attn_sink_circuits.models.identity import model_identity
    from attn_sink_circuits.models.registry import MODELS

    spec = MODELS["qwen2.5-0.5b"]
    info = ModelInfo(
        key=spec.key, hub_name=spec.hub_name, quantised_source=True, source="pypi:x",
        gguf_sha256=spec.sha256, weights_sha256=None, cache_dir=None, from_cache=True,
        prepend_bos=False, n_layers=24, n_heads=14, n_kv_heads=2, d_model=896, d_mlp=4864,
        dtype="float32", load_seconds=0.0,
    )  # fmt: skip
    model = type("Model", (), {})()
    model.cfg = SimpleNamespace(dtype="torch.float32", device="cpu", model_name="q")
    record_info(model, info)
    found = model_identity(model)
    assert found["description"] == "Qwen2.5-Coder-0.5B-Instruct, GGUF Q4_K_M dequantised to float32"
    assert found["weights_sha256"] == spec.sha256 and found["weights_sha256_of"] == "gguf file"


def test_the_marker_is_written_last_with_the_runs_end(tmp_path):
    out = tmp_path / "out"
    record = provenance(settings={"k": 1})
    with atomic_folder(out, {"what": "test"}, record) as tmp:
        assert not (tmp / MARKER).exists()  # written at the end, before the rename
        time.sleep(1.1)
    marker = read_marker(out)
    assert marker["schema_version"] == SCHEMA_VERSION and marker["run"] == {"what": "test"}
    prov = marker["provenance"]
    assert prov["settings"] == {"k": 1} and prov["code"] == code_identity()
    assert prov["time"]["ended"] > record["time"]["ended"]  # ISO times, to the second
    assert prov["time"]["ended"] >= prov["time"]["started"]
    assert prov["time"]["wall_seconds"] >= record["time"]["wall_seconds"] + 1


def test_old_layouts_load_and_newer_ones_are_refused(tmp_path):
    old = {"summary": {"model": "m"}, "settings": {}}
    (tmp_path / "summary.json").write_text(json.dumps(old))
    assert read_summary(tmp_path) == {**old, "schema_version": 1}
    (tmp_path / MARKER).write_text(json.dumps({"written_by": "circuits", "run": {}}))
    assert read_marker(tmp_path)["run"] == {}
    newer = {"schema_version": SCHEMA_VERSION + 1, "summary": {}}
    (tmp_path / "summary.json").write_text(json.dumps(newer))
    with pytest.raises(ValueError, match=r"schema version \d+, newer than this circuits") as err:
        read_summary(tmp_path)
    assert "\n" not in str(err.value) and "upgrade circuits" in str(err.value)
    (tmp_path / MARKER).write_text(json.dumps({"written_by": "circuits", **newer}))
    with pytest.raises(ValueError, match="upgrade circuits"):
        read_marker(tmp_path)
    with pytest.raises(ValueError, match="not a positive whole number"):
        check_schema_version({"schema_version": "2"}, "x.json")


def test_a_dirty_tree_is_noted_never_refused():
    assert "uncommitted changes" in dirty_note({"code": {"commit": "abc", "dirty": True}})
    assert dirty_note({"code": {"commit": "abc", "dirty": False}}) is None
    assert "unknown" in dirty_note({"code": {"commit": "unknown", "dirty": None}})
    assert finished(None)["code"] == code_identity()


def test_a_written_trace_carries_its_provenance(tmp_path, monkeypatch):
    from attn_sink_circuits.core.texts import texts_sha256
    from attn_sink_circuits.models.planted import P0_TEXTS, planted_p0_model
    from attn_sink_circuits.report import write_trace
    from attn_sink_circuits.studies.p0 import P0Config, trace_p0

    planted = planted_p0_model(folder=tmp_path / "model")
    config = P0Config().with_options(
        n_tokens=20, edge_n_tokens=20, edge_n_fit=4, edge_n_heldout=4, edge_n_stability=10,
        edge_n_curve=8, edge_method="eap",
    )  # fmt: skip
    trace = trace_p0(planted.model, P0_TEXTS, config, progress=False)
    texts = trace.provenance["texts"]
    assert texts["sha256"] == texts_sha256(P0_TEXTS, ["text"] * len(P0_TEXTS))
    assert [P0_TEXTS[i] for i in texts["fit_indices"]] == trace.texts
    assert [P0_TEXTS[i] for i in texts["heldout_indices"]] == trace.heldout_texts
    # A run from a tree with uncommitted changes is written as usual, with a note in its report.
    dirty = {**trace.provenance, "code": {**trace.provenance["code"], "dirty": True}}
    monkeypatch.setattr(trace, "provenance", dirty)
    write_trace(trace, tmp_path / "out")
    saved = read_summary(tmp_path / "out")
    marker = read_marker(tmp_path / "out")
    assert saved["schema_version"] == marker["schema_version"] == SCHEMA_VERSION
    assert saved["provenance"]["settings"] == config.to_dict()
    assert saved["provenance"]["texts"] == marker["provenance"]["texts"] == texts
    assert saved["provenance"]["model"]["key"] == trace.model
    assert saved["provenance"]["time"]["ended"] <= marker["provenance"]["time"]["ended"]
    for name in ("summary.md", "report.html"):
        assert "Made from a tree with uncommitted changes" in (tmp_path / "out" / name).read_text()
