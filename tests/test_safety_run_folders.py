"""Nothing of the user's is deleted (issue 55): a run folder's marker lists the files its run
wrote; a later run replaces only those, refuses a folder holding anything else (a user's file,
another command's run) in one line naming it, and with --force replaces only the listed files."""

from __future__ import annotations

import json

from attn_sink_circuits import cli
from attn_sink_circuits.runs.io import MARKER, atomic_folder, read_marker
from attn_sink_circuits.runs.owned import add_to_run, writing_as

TRIGGER = ["trigger", "--steps", "5", "--seeds", "0", "--attention", "softmax"]


def _err(capsys) -> str:
    err = capsys.readouterr().err
    return err[err.find("circuits ") :]  # after any progress bar


def _tree(folder) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}  # fmt: skip


def test_a_users_file_in_a_run_folder_is_refused_then_kept_under_force(tmp_path, capsys):
    out = tmp_path / "t"
    assert cli.main([*TRIGGER, "--out", str(out)]) == 0
    written = read_marker(out)["files"]
    assert written and MARKER not in written and read_marker(out)["writer"] == "circuits trigger"
    assert sorted(written) == sorted(n for n in _tree(out) if n != MARKER)
    (out / "MY_NOTES.md").write_text("mine")
    before = _tree(out)
    assert cli.main([*TRIGGER, "--out", str(out)]) == 2
    err = _err(capsys)
    assert (
        err.count("\n") == 1
        and f"--out {out} holds MY_NOTES.md, which its run did not write" in err
    )
    assert "--force" in err and _tree(out) == before
    assert cli.main([*TRIGGER, "--out", str(out), "--force"]) == 0
    after = _tree(out)
    assert after["MY_NOTES.md"] == b"mine" and "MY_NOTES.md" not in read_marker(out)["files"]
    assert set(after) == set(before)  # the run's files replaced, nothing else touched
    assert [p.name for p in tmp_path.iterdir()] == ["t"]  # no scratch left


def test_another_commands_run_is_refused_and_force_replaces_only_its_files(tmp_path, capsys):
    out = tmp_path / "run"
    with writing_as("circuits p0"), atomic_folder(out) as tmp:
        (tmp / "summary.md").write_text("the p0 report")
        (tmp / "graphs").mkdir()
        (tmp / "graphs" / "circuit.graphml").write_text("<graphml/>")
    assert read_marker(out)["files"] == ["graphs/circuit.graphml", "summary.md"]
    assert cli.main([*TRIGGER, "--out", str(out)]) == 2
    err = _err(capsys)
    assert err.count("\n") == 1 and "holds a run of `circuits p0`, not of `circuits trigger`" in err
    assert (out / "summary.md").read_text() == "the p0 report"
    (out / "notes.txt").write_text("mine")  # --force: p0's listed files go, the user's stays
    assert cli.main([*TRIGGER, "--out", str(out), "--force"]) == 0
    names = set(_tree(out))
    assert "notes.txt" in names and "summary.md" not in names
    assert "graphs/circuit.graphml" not in names
    assert read_marker(out)["writer"] == "circuits trigger"


def test_an_old_marker_owns_its_folder_only_when_every_file_is_the_librarys(tmp_path, capsys):
    out = tmp_path / "old"
    out.mkdir()
    (out / MARKER).write_text(json.dumps({"written_by": "circuits"}))  # no list of files
    (out / "summary.json").write_text("{}")
    (out / "curve.csv.gz").write_bytes(b"")
    (out / "notes.md").write_text("mine")
    assert cli.main([*TRIGGER, "--out", str(out)]) == 2
    err = _err(capsys)
    assert f"--out {out} holds notes.md, which its run did not write" in err
    (out / "notes.md").unlink()
    assert cli.main([*TRIGGER, "--out", str(out)]) == 0
    assert "curve.csv.gz" not in _tree(out)  # the old run's file, replaced with its folder


def test_a_file_added_to_a_run_afterwards_is_listed_and_replaced_with_it(tmp_path, capsys):
    out = tmp_path / "t"
    assert cli.main([*TRIGGER, "--out", str(out)]) == 0
    (out / "under_abc.json").write_text("{}")  # a script re-judged the run
    add_to_run(out, out / "under_abc.json")
    assert "under_abc.json" in read_marker(out)["files"]
    assert cli.main([*TRIGGER, "--out", str(out)]) == 0
    assert not (out / "under_abc.json").exists()


def test_the_program_of_a_command_line():
    from attn_sink_circuits.runs.owned import program

    assert program(["/venv/bin/circuits", "p0", "--quick"]) == "circuits p0"
    assert program(["/src/circuits/cli/__main__.py", "kv", "--out", "o"]) == "circuits kv"
    assert program(["scripts/mib_ioi.py", "--model", "m"]) == "mib_ioi.py"
    assert program(["/home/circuits/.venv/lib/pytest/__main__.py", "tests"]) == "__main__.py"
    assert program(["-c"]) is None and program([]) is None
