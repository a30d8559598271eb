"""`circuits discover --pairs FILE`: a run on the tiny model writes its files (the EAP-IG graph
among them); bad pair files and settings fail with one line and exit 2, before the model loads
where a tokenizer is not needed."""

from __future__ import annotations

import json

import pytest

from attn_sink_circuits import cli
from attn_sink_circuits.cli import loading

ROWS = [
    {"clean": f"When {a}n and {b}b ran, {b}b gave it to", "corrupt":
     f"When {c}n and {d}b ran, {e}b gave it to", "answer": a, "wrong": b}
    for a, b, c, d, e in ["ABCDE", "BCDEA", "CDEAB", "DEABC", "EABCD", "FGHIJ", "GHIJF", "HIJFG"]
]  # fmt: skip
FAST = ["--edge-method", "eap", "--edge-n-fit", "5", "--edge-n-heldout", "3", "--edge-n-boot",
        "10", "--edge-n-stability", "2", "--edge-n-random", "2", "--edge-n-curve", "4",
        "--edge-max-exact", "3"]  # fmt: skip


@pytest.fixture
def loads(tiny, monkeypatch):
    calls = []

    def load(args):
        calls.append(args.model)
        return tiny

    monkeypatch.setattr(loading, "load", load)
    return calls


def _file(tmp_path, rows, name="pairs.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_discover_on_a_pairs_file_writes_the_circuit(tmp_path, loads, capsys):
    out = tmp_path / "out"
    argv = ["discover", "--pairs", str(_file(tmp_path, ROWS)), "--out", str(out), *FAST]
    assert cli.main(argv) == 0
    assert loads == ["smollm2-135m"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_fit_texts"] == 5 and summary["n_heldout_texts"] == 3
    assert summary["ablation"] == "resample" and summary["metric"].startswith("logit_diff")
    graph = json.loads((out / "circuit.eap-ig.json").read_text())
    assert sum(e["in_graph"] for e in graph["edges"].values()) >= summary["n_edges"] > 0
    assert (out / "curve.csv").is_file() and (out / "edges.csv").is_file()
    record = summary["provenance"]  # which model, pairs and split made it
    assert len(record["model"]["weights_sha256"]) == 64 and record["settings"]["method"] == "eap"
    assert record["texts"]["n"] == 8 and record["texts"]["source"].endswith("pairs.jsonl")
    assert record["texts"]["fit_indices"] == [0, 1, 2, 3, 4]
    assert record["texts"]["heldout_indices"] == [5, 6, 7]


@pytest.mark.parametrize(
    "change, message, loaded",
    [
        (lambda r: r[:3], "holds 3 pairs; --edge-n-fit 5 + --edge-n-heldout 3 = 8 are needed", False),
        (lambda r: [{**r[0], "wrong": None}] + r[1:], "pair 1: field(s) wrong missing", False),
        (lambda r: r[:2] + [{**r[2], "corrupt": r[2]["corrupt"] + "!"}] + r[3:],
         "pair 3: clean is 34 tokens, corrupt 35", True),
    ],
)  # fmt: skip
def test_bad_pair_files_fail_in_one_line(tmp_path, loads, capsys, change, message, loaded):
    path = _file(tmp_path, change(ROWS))
    argv = ["discover", "--pairs", str(path), "--out", str(tmp_path / "o"), *FAST]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert bool(loads) == loaded
    assert not (tmp_path / "o").exists()


def test_discover_refuses_another_ablation(tmp_path, loads, capsys):
    argv = ["discover", "--pairs", str(_file(tmp_path, ROWS)), "--out", str(tmp_path / "o"),
            "--edge-ablation", "mean"]  # fmt: skip
    assert cli.main(argv) == 2
    assert "use --edge-ablation resample" in capsys.readouterr().err and not loads


def test_faithfulness_judges_a_pair_circuit_and_an_eap_ig_file(tmp_path, loads, capsys):
    pairs = _file(tmp_path, ROWS)
    out = tmp_path / "out"
    assert cli.main(["discover", "--pairs", str(pairs), "--out", str(out), *FAST]) == 0
    found = json.loads((out / "summary.json").read_text())
    for circuit, extra in (
        (out / "circuit.json", []),
        (out / "circuit.eap-ig.json", ["--model", "qwen2.5-0.5b"]),
    ):
        judged = tmp_path / f"judged-{circuit.stem}"
        argv = ["faithfulness", str(circuit), "--pairs", str(pairs), "--out", str(judged), *extra,
                "--n-random", "2", "--n-boot", "10"]  # fmt: skip
        assert cli.main(argv) == 0, capsys.readouterr().err
        result = json.loads((judged / "faithfulness.json").read_text())
        assert result["n_texts"] == len(ROWS) and result["n_edges"] == found["n_edges"]
    assert result["faithfulness"] == pytest.approx(
        json.loads((tmp_path / "judged-circuit" / "faithfulness.json").read_text())["faithfulness"]
    )  # the EAP-IG file holds the same circuit
    capsys.readouterr()
    argv = ["faithfulness", str(out / "circuit.eap-ig.json"), "--pairs", str(pairs)]
    assert cli.main(argv) == 2
    assert "names no model; pass --model" in capsys.readouterr().err
    argv = ["export", str(out / "circuit.json"), "--format", "eap-ig"]
    assert cli.main(argv) == 2  # discover wrote it already
    assert "circuit.eap-ig.json exists; pass --force" in capsys.readouterr().err
    assert cli.main([*argv, "--out", str(tmp_path / "again.json")]) == 2
    assert "not a registry model" in capsys.readouterr().err  # the tiny model's shape
