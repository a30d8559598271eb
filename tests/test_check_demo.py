"""scripts/check_demo.py's comparison (`--compare A B`) on two small hand-made run folders:
a number moved beyond the tolerance is reported, one within it is not, a missing file is
reported, and the provenance fields that legitimately differ are left out."""

from __future__ import annotations

import copy
import gzip
import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SPEC = importlib.util.spec_from_file_location("check_demo", ROOT / "scripts" / "check_demo.py")
check_demo = importlib.util.module_from_spec(SPEC)
sys.modules.setdefault("check_demo", check_demo)  # a dataclass looks its module up there
SPEC.loader.exec_module(check_demo)

SUMMARY = {
    "provenance": {
        "time": {"started": "2026-12-04T20:53:38Z", "wall_seconds": 1853.2},
        "code": {"commit": "ebbfab72"},
        "command": ["circuits", "p0", "--out", "runs/a"],
        "model": {"key": "smollm2-135m", "weights_sha256": "b179c9"},
    },
    "summary": {
        "edge_circuit_edges": 8064,
        "heldout_faithfulness": 1.0808775498825816,
        "heldout_faithfulness_ci": [1.0689988076686858, 1.0904466181993484],
        "p0_norm_after_last_jump": 25101.873046875,
        "node_circuit_heads": ["L0.H2", "L0.H5"],
    },
    "seconds": {"edges": 1477.22},
    "resumed_steps": [],
}
CURVE = "top_n,n_edges,faithfulness_fit,source\n1,0,0.0,greedy growth\n3,12,0.52,greedy growth\n"


def write_run(folder: Path, summary: dict, curve: str = CURVE) -> Path:
    folder.mkdir()
    (folder / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    (folder / "faithfulness_curve.csv").write_text(curve, encoding="utf-8")
    (folder / "edge_circuit.csv.gz").write_bytes(
        gzip.compress(b"sender,receiver,effect\na,b,0.25\n")
    )
    return folder


def changed(**edits) -> dict:
    """SUMMARY with `edits` applied to its "summary" part."""
    out = copy.deepcopy(SUMMARY)
    out["summary"].update(edits)
    return out


def run(tmp_path: Path, capsys, b_summary: dict, curve: str = CURVE) -> tuple[int, str]:
    a = write_run(tmp_path / "a", SUMMARY)
    b = write_run(tmp_path / "b", b_summary, curve)
    status = check_demo.main(["--compare", str(a), str(b)])
    return status, capsys.readouterr().out


def test_equal_within_tolerance_and_provenance_left_out(tmp_path, capsys):
    b = changed(heldout_faithfulness=1.0808775498825816 + 5e-5, p0_norm_after_last_jump=25101.875)
    b["provenance"]["time"] = {"started": "2027-01-01T00:00:00Z", "wall_seconds": 400.0}
    b["provenance"]["code"]["commit"] = "0123abcd"
    b["provenance"]["command"][-1] = "/tmp/demo-check-x/p0"
    b["seconds"]["edges"] = 300.0
    b["resumed_steps"] = ["variants", "position"]
    status, out = run(tmp_path, capsys, b)
    assert status == 0, out
    assert out.startswith("equal: ")
    # 25101.873 vs 25101.875 differs by 0.002 absolutely, 8e-8 relatively: the relative rule;
    # 5e-5 on 1.08 is the largest, 5e-5 / 1.08.
    assert "4.6e-05, at summary.json: summary.heldout_faithfulness" in out.splitlines()[0]


def test_number_beyond_tolerance_reported(tmp_path, capsys):
    status, out = run(tmp_path, capsys, changed(heldout_faithfulness=1.0810))
    assert status == 1
    lines = out.splitlines()
    assert lines[0].startswith("DIFFERENT: 1 differences")
    assert "summary.json: summary.heldout_faithfulness: 1.0808775498825816 vs 1.081" in out


def test_large_value_moved_relatively_reported(tmp_path, capsys):
    status, out = run(tmp_path, capsys, changed(p0_norm_after_last_jump=25105.0))
    assert status == 1 and "summary.p0_norm_after_last_jump" in out


def test_list_entries_and_text_compared(tmp_path, capsys):
    b = changed(heldout_faithfulness_ci=[1.0689988076686858, 1.1], node_circuit_heads=["L0.H2"])
    status, out = run(tmp_path, capsys, b)
    assert status == 1
    assert "summary.heldout_faithfulness_ci[1]: 1.0904466181993484 vs 1.1" in out
    assert "summary.node_circuit_heads[1]: only in A ('L0.H5')" in out


def test_csv_cell_reported_by_row_and_column(tmp_path, capsys):
    curve = CURVE.replace("3,12,0.52", "3,12,0.5202")
    status, out = run(tmp_path, capsys, copy.deepcopy(SUMMARY), curve)
    assert status == 1
    assert "faithfulness_curve.csv: row 1.faithfulness_fit: 0.52 vs 0.5202" in out
    assert out.startswith("DIFFERENT: 1 differences")


def test_missing_file_reported(tmp_path, capsys):
    a = write_run(tmp_path / "a", SUMMARY)
    b = write_run(tmp_path / "b", SUMMARY)
    (b / "edge_circuit.csv.gz").unlink()
    status = check_demo.main(["--compare", str(a), str(b)])
    out = capsys.readouterr().out
    assert status == 1
    assert "edge_circuit.csv.gz: file only in A" in out


def test_missing_folder_one_line(tmp_path, capsys):
    a = write_run(tmp_path / "a", SUMMARY)
    status = check_demo.main(["--compare", str(a), str(tmp_path / "nowhere")])
    err = capsys.readouterr().err
    assert status == 2
    assert err.strip().count("\n") == 0 and "is not a folder" in err


@pytest.mark.parametrize("text", ["{not json", ""])
def test_unreadable_file_reported(tmp_path, capsys, text):
    a = write_run(tmp_path / "a", SUMMARY)
    b = write_run(tmp_path / "b", SUMMARY)
    (b / "summary.json").write_text(text, encoding="utf-8")
    status = check_demo.main(["--compare", str(a), str(b)])
    assert status == 1
    assert "summary.json: cannot be read" in capsys.readouterr().out


def test_provenance_that_names_the_inputs_is_compared(tmp_path, capsys):
    b = copy.deepcopy(SUMMARY)
    b["provenance"]["model"]["weights_sha256"] = "0000ff"
    status, out = run(tmp_path, capsys, b)
    assert status == 1
    assert "provenance.model.weights_sha256: 'b179c9' vs '0000ff'" in out
