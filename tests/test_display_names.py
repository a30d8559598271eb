"""Every registry model has a display name saying what its weights really are, and what the
library shows a reader (report title, summary.md, docs tables) uses it, while keys, folder
names and JSON keys keep the short key."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from attn_sink_circuits.models import MODELS, display_name
from attn_sink_circuits.studies.result import TraceResult

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("key", sorted(MODELS))
def test_every_registry_model_has_a_display_name_naming_its_weights(key):
    spec = MODELS[key]
    shown = display_name(key)
    assert shown == spec.display_name and shown != key
    # The quantisation the dequantised weights come from, and that they are dequantised.
    assert spec.quantisation and f"{spec.quantisation} dequantised" in shown
    # The original model's size as its hub name states it (e.g. "0.5B", "135M", "270M").
    size = spec.hub_name.rsplit("/", 1)[-1].split("-")
    assert any(part.upper() in shown.upper() for part in size if part[:1].isdigit()), shown
    if "Instruct" in spec.hub_name:
        assert "Instruct" in shown
    if "Coder" in spec.hub_name:
        assert "Coder" in shown


def test_names_outside_the_registry_are_shown_as_they_are():
    for name in ("gpt2", "/tmp/model.gguf", "tiny", MODELS["smollm2-135m"].display_name):
        assert display_name(name) == name


@dataclass
class Config:
    n: int = 1

    def rough(self) -> bool:
        return False

    def to_dict(self) -> dict:
        return {"n": self.n}


@dataclass
class SmallTrace(TraceResult):
    """A trace with one number and one table: enough for write_trace, no model run."""

    title = "test trace"
    model: str = "qwen2.5-0.5b"
    config: Config = field(default_factory=Config)
    graph: None = None
    seconds: dict = field(default_factory=dict)

    def summary(self) -> dict:
        return {"model": self.model, "value": 0.5}

    def tables(self) -> dict:
        import pandas as pd

        return {"values": pd.DataFrame({"model": [self.model], "value": [0.5]})}

    def figures(self) -> dict:
        return {}

    def text(self) -> str:
        return "One number."


def test_a_written_run_shows_the_display_name_and_keeps_the_key(tmp_path):
    from attn_sink_circuits.report import write_trace

    trace = SmallTrace()
    write_trace(trace, tmp_path / "run")
    shown = "Qwen2.5-Coder-0.5B-Instruct, Q4_K_M dequantised"
    md = (tmp_path / "run" / "summary.md").read_text(encoding="utf-8")
    assert md.splitlines()[0] == f"# test trace: {shown}"
    html = (tmp_path / "run" / "report.html").read_text(encoding="utf-8")
    assert f"<h1>test trace: {shown}</h1>" in html
    # What a program reads keeps the key.
    summary = json.loads((tmp_path / "run" / "summary.json").read_text(encoding="utf-8"))
    assert summary["summary"]["model"] == "qwen2.5-0.5b"
    marker = json.loads((tmp_path / "run" / ".circuits-run.json").read_text(encoding="utf-8"))
    assert marker["run"]["model"] == "qwen2.5-0.5b"


def test_generated_docs_tables_show_the_display_name():
    spec = importlib.util.spec_from_file_location("make_docs", ROOT / "scripts" / "make_docs.py")
    make_docs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_docs)
    rows = make_docs.p0_headline("docs/p0/smollm2-135m").splitlines()
    assert rows[2].startswith(
        "| SmolLM2-135M-Instruct, Q4_1 dequantised | `docs/p0/smollm2-135m` |"
    )


def test_the_model_listing_shows_the_display_names(capsys):
    from attn_sink_circuits.cli.app import main as cli_main

    assert cli_main(["models"]) == 0
    out = capsys.readouterr().out
    for key, spec in MODELS.items():
        line = next(line for line in out.splitlines() if line.startswith(key + " "))
        assert spec.display_name in line
