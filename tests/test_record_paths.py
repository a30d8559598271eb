"""Records name no machine path: a path under the repository is written relative to it, one
outside as `<outside>/NAME`, in new records (`attn_sink_circuits.runs.record_paths`) and, by the migration, in
old ones (`attn_sink_circuits.runs.record_migration`), which changes nothing else and leaves alone what a resume
compares. No model runs here."""

from __future__ import annotations

import gzip
import json
import sys

import pytest

from attn_sink_circuits.runs.io import MARKER, atomic_folder, read_marker
from attn_sink_circuits.runs.provenance import provenance, stamped, texts_identity
from attn_sink_circuits.runs.record_migration import (
    CHECKPOINT_KEY,
    compared_on_resume,
    migrate_file,
    migrate_records,
    record_files,
)
from attn_sink_circuits.runs.record_paths import (
    OUTSIDE,
    is_absolute,
    portable,
    portable_path,
    portable_text,
    recorded_file,
    repository_root,
)

REPO = "/srv/clone"
ROOTS = [REPO, "/scratch/snap-abc1234"]


def test_a_path_becomes_relative_to_the_repository_or_outside():
    cases = {
        f"{REPO}/docs/p0/smollm2-135m": "docs/p0/smollm2-135m",
        "/scratch/snap-abc1234/data/texts/mix.jsonl": "data/texts/mix.jsonl",
        f"{REPO}/": ".",
        f"{REPO}/./runs/../docs/x": "docs/x",
        "/home/someone/models/smollm2.Q4_1.gguf": f"{OUTSIDE}/smollm2.Q4_1.gguf",
        f"{REPO}-other/docs": f"{OUTSIDE}/docs",  # a sibling folder is not the repository
        "C:\\Users\\someone\\model.gguf": f"{OUTSIDE}/model.gguf",
        "/tmp": f"{OUTSIDE}/tmp",
        f"folder:{REPO}/runs/r": "folder:runs/r",  # how a loader names the folder it read
        "folder:/home/someone/.cache/rounded/q4_0": f"folder:{OUTSIDE}/q4_0",
        "https://example.org/a/b": "https://example.org/a/b",
        "/venv/lib/site-packages/circuits/cli/__main__.py": f"{OUTSIDE}/circuits/cli/__main__.py",
        "/": "/",
        "runs/x/checkpoints/step_000010": "runs/x/checkpoints/step_000010",
        "smollm2-135m": "smollm2-135m",
        "HuggingFaceTB/SmolLM2-135M": "HuggingFaceTB/SmolLM2-135M",
    }
    for path, want in cases.items():
        assert portable_path(path, ROOTS) == want, path
        assert portable_path(want, ROOTS) == want, want  # rewriting twice changes nothing
    run = "/data/runs/llama/checkpoints/step_000010"
    assert portable_path(run, ROOTS, keep=3) == f"{OUTSIDE}/llama/checkpoints/step_000010"
    assert not is_absolute(f"{OUTSIDE}/x") and is_absolute("D:/x")


def test_the_default_repository_is_the_checkout_holding_the_package():
    root = repository_root()
    assert root is not None and (root / "attn_sink_circuits" / "runs" / "record_paths.py").is_file()
    assert portable_path(root / "docs" / "p0") == "docs/p0"
    assert portable_path(root.parent / "elsewhere" / "m.gguf") == f"{OUTSIDE}/m.gguf"


def test_paths_inside_a_text_are_rewritten_and_nothing_else():
    line = f"cd {REPO} && python scripts/x.py --out=/tmp/kv/run1 --texts {REPO}/data/t.jsonl."
    assert portable_text(line, ROOTS) == (
        f"cd . && python scripts/x.py --out={OUTSIDE}/run1 --texts data/t.jsonl."
    )
    warning = f"{REPO}/.venv/lib/tqdm/auto.py:21: TqdmWarning: see https://a.io/en/stable/x.html\n"
    assert portable_text(warning, ROOTS) == ".venv/lib/tqdm/auto.py:21: TqdmWarning: see " + (
        "https://a.io/en/stable/x.html\n"
    )
    for text in ("1/2/3", "tokens/s and /s", "iVBOR+/AAA/BBB", "file:///x/y", "P0 / P1", "a//b"):
        assert portable_text(text, ROOTS) == text


def test_a_value_is_rewritten_keys_too_and_a_body_keeps_its_texts():
    doc = {f"{REPO}/docs/a": [f"{REPO}/docs/b", 1.5, None, True], "n": {"m": "/opt/m/w.bin"}}
    assert portable(doc, ROOTS) == {
        "docs/a": ["docs/b", 1.5, None, True],
        "n": {"m": f"{OUTSIDE}/w.bin"},
    }
    body = {"text": "#!/usr/bin/env python", "token": "/n", "model": "/opt/m/w.bin"}
    assert portable(body, ROOTS, embedded=False) == {**body, "model": f"{OUTSIDE}/w.bin"}
    with pytest.raises(ValueError, match="the same path"):
        portable({"/a/x/f": 1, "/b/y/f": 2}, ROOTS)


def test_a_portable_command_names_the_same_program():
    # A rerun into a run folder compares the program its marker's command ran.
    from attn_sink_circuits.runs.owned import program

    for argv in (
        ["/venv/lib/site-packages/circuits/cli/__main__.py", "p0", "--out", "/tmp/x/o"],
        ["/home/u/.venv/bin/circuits", "kv"],
        [f"{REPO}/scripts/mib_ioi.py", "--model", "smollm2-135m"],
    ):
        assert program(portable(argv, ROOTS)) == program(argv) is not None


def test_a_recorded_path_is_read_back_where_it_can_be(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "t.jsonl").write_text("{}\n")
    roots = [tmp_path]
    assert recorded_file("data/t.jsonl", roots) == tmp_path / "data" / "t.jsonl"
    assert recorded_file(str(tmp_path / "data" / "t.jsonl"), roots) == tmp_path / "data/t.jsonl"
    for gone in (f"{OUTSIDE}/t.jsonl", "data/none.jsonl", str(tmp_path / "none"), None):
        assert recorded_file(gone, roots) is None


def test_new_records_name_no_machine_path(tmp_path, monkeypatch):
    root = repository_root()
    monkeypatch.setattr(sys, "argv", [str(root / "scripts" / "x.py"), "--out", str(tmp_path / "o")])
    texts = tmp_path / "t.jsonl"
    record = provenance(texts=["a"], source=texts, settings={"run": str(tmp_path / "run")})
    assert record["command"] == ["scripts/x.py", "--out", f"{OUTSIDE}/o"]
    assert record["texts"]["source"] == f"{OUTSIDE}/t.jsonl"
    assert texts_identity(["a"], source=root / "data" / "t.jsonl")["source"] == "data/t.jsonl"
    doc = stamped({"model": str(tmp_path / "m" / "f"), "text": "see /usr/bin/env"}, record)
    assert doc["provenance"]["settings"] == {"run": f"{OUTSIDE}/run"}
    assert doc["model"] == f"{OUTSIDE}/f" and doc["text"] == "see /usr/bin/env"
    with atomic_folder(tmp_path / "out", {"model": str(tmp_path / "m" / "w")}, record):
        pass
    marker = read_marker(tmp_path / "out")
    assert marker["run"] == {"model": f"{OUTSIDE}/w"}
    assert str(tmp_path) not in (tmp_path / "out" / MARKER).read_text()


def _tree(tmp_path):
    """A repository copy at REPO's place: records of every kind, and files a resume compares."""
    docs = tmp_path / "docs" / "run"
    docs.mkdir(parents=True)
    summary = {"b": 1.0, "a": f"{REPO}/docs/run", "é": "ß", f"{REPO}/k": [1e-05, "/opt/m/w.gguf"]}
    files = {
        docs / "summary.json": json.dumps(summary, indent=1, ensure_ascii=False) + "\n",
        docs / "rows.json": json.dumps({"x": "\u00e9", "spec": f"{REPO}/runs/r"}),
        docs / "rows.jsonl": "".join(json.dumps({"f": f"{REPO}/a/b"}) + "\n" for _ in range(2)),
        docs / "claims.md": f"# Claims: {REPO}/runs/r/checkpoints/step_1\n\n| a |\n",
        docs / "README.md": f"Made in {REPO}/docs.\n",
        docs / "texts.jsonl": json.dumps({"text": "#!/usr/bin/env python\nimport os"}) + "\n",
    }
    train = tmp_path / "train" / "run"
    (train / "checkpoints").mkdir(parents=True)
    files[train / "run.json"] = json.dumps({"corpus": {"root": "/usr/lib/python3.11"}})
    files[train / "phases.jsonl"] = json.dumps({"spec": f"{REPO}/x/y"}) + "\n"
    files[tmp_path / "ckpt" / CHECKPOINT_KEY] = json.dumps({"model": f"{REPO}/m/w"})
    files[tmp_path / "traces.jsonl"] = json.dumps({"generation": {"model": "/opt/m/w"}}) + "\n"
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return files


def test_the_migration_rewrites_the_paths_and_nothing_else(tmp_path):
    files = _tree(tmp_path)
    (tmp_path / "docs" / "run" / "c.json.gz").write_bytes(
        gzip.compress(json.dumps({"out": "/work/x/c"}).encode(), mtime=0)
    )
    every = [*files, tmp_path / "docs" / "run" / "c.json.gz"]
    chosen = record_files(every)
    assert tmp_path / "docs" / "run" / "README.md" not in chosen  # a page, not a report
    counts = migrate_records(every, ROOTS)
    docs = tmp_path / "docs" / "run"
    assert {p.name: n for p, n in counts.items()} == {
        "summary.json": 3, "rows.json": 1, "rows.jsonl": 2, "claims.md": 1, "c.json.gz": 1,
    }  # fmt: skip
    want = files[docs / "summary.json"].replace(f'"{REPO}/docs/run"', '"docs/run"')
    want = want.replace(f'"{REPO}/k"', '"k"').replace('"/opt/m/w.gguf"', f'"{OUTSIDE}/w.gguf"')
    assert (docs / "summary.json").read_text(encoding="utf-8") == want
    assert (docs / "rows.json").read_text() == '{"x": "\\u00e9", "spec": "runs/r"}'
    assert (docs / "claims.md").read_text() == "# Claims: runs/r/checkpoints/step_1\n\n| a |\n"
    assert json.loads(gzip.decompress((docs / "c.json.gz").read_bytes())) == {"out": f"{OUTSIDE}/c"}
    for path in [
        docs / "README.md",
        docs / "texts.jsonl",
        *[p for p in files if "docs" not in str(p)],
    ]:
        assert path.read_text(encoding="utf-8") == files[path], path
    assert migrate_records(every, ROOTS) == {}  # a second pass finds nothing


def test_what_a_resume_compares_is_never_touched(tmp_path):
    files = _tree(tmp_path)
    from attn_sink_circuits.runs.steps import KEY_FILE

    assert CHECKPOINT_KEY == KEY_FILE
    for path in files:
        reason = compared_on_resume(path)
        assert (reason is not None) == ("docs" not in str(path)), path
        assert migrate_file(path, ROOTS) == 0 or "docs" in str(path)
        if reason:
            assert path.read_text(encoding="utf-8") == files[path]


def test_a_notebook_has_its_text_outputs_rewritten_not_its_code(tmp_path):
    cells = [
        {"cell_type": "code", "source": [f"open('{REPO}/data/t.jsonl')"], "outputs": [
            {"output_type": "stream", "name": "stderr", "text": [f"{REPO}/.venv/tqdm.py:2: W\n"]},
            {"output_type": "display_data", "data": {"image/png": "iVBOR+/AAA/BBB",
                                                     "text/plain": [f"<Figure> {REPO}/a/b"]}},
        ]},
    ]  # fmt: skip
    path = tmp_path / "n.ipynb"
    path.write_text(json.dumps({"cells": cells, "nbformat": 4}, indent=1) + "\n")
    assert migrate_file(path, ROOTS) == 2
    cell = json.loads(path.read_text())["cells"][0]
    assert cell["source"] == cells[0]["source"]
    assert cell["outputs"][0]["text"] == [".venv/tqdm.py:2: W\n"]
    assert cell["outputs"][1]["data"] == {
        "image/png": "iVBOR+/AAA/BBB",
        "text/plain": ["<Figure> a/b"],
    }
    # The same path in the code and in an output: rewriting the output would change the code.
    cells[0]["source"] = [f"{REPO}/.venv/tqdm.py:2: W\n"]
    path.write_text(json.dumps({"cells": cells, "nbformat": 4}, indent=1) + "\n")
    with pytest.raises(ValueError, match="n.ipynb: rewriting its paths would change more"):
        migrate_file(path, ROOTS)
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="bad.json: "):
        migrate_file(tmp_path / "bad.json", ROOTS)
