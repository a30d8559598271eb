"""The package installs beside others (a free import name, torch as a range, the command
`circuits`) and what runs saved before the move to `attn_sink_circuits` still reads."""

from __future__ import annotations

import importlib.util
import pickle
import re
import tomllib
from pathlib import Path

from attn_sink_circuits.runs.renames import MOVED, current_module
from attn_sink_circuits.runs.steps import STEP_SUFFIX, Steps
from attn_sink_circuits.studies.p0.config import P0Config

ROOT = Path(__file__).resolve().parent.parent
META = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
IN_FLIGHT = {"circuits.known_answers", "circuits._owned", "circuits.record_paths",
             "circuits.record_migration"}  # fmt: skip
"""Old modules of work still in progress elsewhere: they move when they arrive."""


def test_the_metadata_pins_no_exact_torch():
    # pip install into a GPU environment must keep its torch: a range, TransformerLens 4.3's
    # floor; the Makefile installs the CPU wheel it is tested on first.
    torch = [d for d in META["project"]["dependencies"] if re.match(r"torch\b(?![-_])", d)]
    assert len(torch) == 1 and "==" not in torch[0] and ">=2.6" in torch[0], torch
    assert re.search(r"pip install -q torch==[\d.]+\n", (ROOT / "Makefile").read_text())


def test_the_import_name_is_free_and_the_command_stays():
    assert META["project"]["scripts"] == {"circuits": "attn_sink_circuits.cli:main"}
    assert META["tool"]["setuptools"]["packages"]["find"]["include"] == ["attn_sink_circuits*"]
    # No `circuits` package of ours: it would overwrite the PyPI distribution `circuits`.
    assert not (ROOT / "circuits").exists()


def test_old_module_names_read_as_new_ones():
    assert current_module("circuits.tracing.p0.config") == "attn_sink_circuits.studies.p0.config"
    assert current_module("circuits.tasks.ioi") == "attn_sink_circuits.studies.ioi.prompts"
    assert current_module("circuits._io") == "attn_sink_circuits.runs.io"
    assert current_module("circuits.sinks.rules") == "attn_sink_circuits.sinks.rules"
    assert current_module("circuitsvis.utils") == "circuitsvis.utils"
    assert current_module("numpy.core") == "numpy.core"
    for old, new in MOVED:
        present = importlib.util.find_spec(new) is not None
        assert present or old in IN_FLIGHT, f"{old} -> {new} is not a module"


def test_a_checkpoint_written_before_the_move_loads(tmp_path):
    key = {"run": "moved"}
    with Steps(1, "x", False, checkpoint=tmp_path, key=key) as steps:
        steps.run("config", P0Config, n_tokens=16)
    path = tmp_path / f"config{STEP_SUFFIX}"
    with path.open("rb") as fh:
        record = pickle.load(fh)
    # Protocol 0 names each class's module as a line of text: the old layout's name goes in.
    old = pickle.dumps(record, protocol=0).replace(
        b"attn_sink_circuits.studies.p0.config", b"circuits.tracing.p0.config"
    )
    assert b"\ncircuits.tracing.p0.config\n" in old or b"ccircuits.tracing.p0.config\n" in old
    path.write_bytes(old)
    with Steps(1, "x", False, checkpoint=tmp_path, key=key) as steps:
        got = steps.run("config", lambda: None)
    assert got == P0Config(n_tokens=16) and steps.resumed == ["config"]


def test_the_default_texts_are_package_data():
    # An installed package (a wheel holds what package-data names) finds the texts its
    # defaults read; in a checkout they are the repository's data/texts.
    import attn_sink_circuits.core as core
    from attn_sink_circuits.core.texts import DEFAULT_TEXTS

    inside = Path(core.__file__).parent / "data" / "texts"
    globs = META["tool"]["setuptools"]["package-data"]["attn_sink_circuits.core"]
    shipped = {p.name for g in globs for p in inside.parent.parent.glob(g) if p.is_file()}
    assert {"mix.jsonl", "long.jsonl", "README.md"} <= shipped
    assert DEFAULT_TEXTS == (inside / "mix.jsonl").resolve() == ROOT / "data/texts/mix.jsonl"
