"""MIB's protocol on the command line: `circuits discover --protocol mib` (the preset's settings
under the flags given, pairs with its partner, padding and BOS, `importances.mib.json` beside
the other files), `--partner`, `circuits export --format mib` (the importance file, a binary
circuit, ten circuits at MIB's sizes), and an ungrouped MIB file judged edge for edge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_mib import FLIP, LONGER, SHORTER

from attn_sink_circuits import cli
from attn_sink_circuits.cli import discover, loading
from attn_sink_circuits.discovery.config import DiscoveryConfig
from attn_sink_circuits.discovery.dag import mib_edge_count
from attn_sink_circuits.graph.eap_ig import from_eap_ig

ROOT = Path(__file__).resolve().parents[1]
# Eight pairs of three lengths (MIB's padding), the flip partner: 5 fit, 3 held out.
ROWS = [*FLIP[:3], LONGER, *FLIP[3:], SHORTER]
FAST = ["--edge-n-fit", "5", "--edge-n-heldout", "3", "--edge-ig-steps", "2", "--edge-n-boot",
        "10", "--edge-n-stability", "2", "--edge-n-random", "2", "--edge-n-curve", "4",
        "--edge-max-exact", "3", "--threads", "1"]  # fmt: skip


@pytest.fixture
def tiny_loads(tiny, monkeypatch):
    monkeypatch.setattr(loading, "load", lambda args: tiny)


def _file(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _settings(*argv: str):
    args = cli.app.parse(["discover", "--task", "ioi", "--out", "x", *argv])
    config = discover.settings(
        args
    )  # an IOIConfig: what `attn_sink_circuits.studies.ioi.run` takes
    return config.discovery, {"name": config.protocol, "overrides": config.overrides()}, args


def test_the_mib_preset_fills_what_the_flags_leave_and_given_flags_win():
    config, record, args = _settings("--protocol", "mib", "--edge-ig-steps", "3",
                                     "--edge-method", "eap_ig", "--edge-n-fit", "10")  # fmt: skip
    # given: ig_steps 3 and method eap_ig (the library's default value, given explicitly)
    assert (config.method, config.ig_steps) == ("eap_ig", 3)
    assert (config.ig_grid, config.kv_inputs, config.grow) == ("left", "ungrouped", "top")
    assert (args.edge_n_fit, args.edge_n_heldout) == (10, 200)
    assert record == {"name": "mib", "overrides": {"ig_steps": 3, "method": "eap_ig", "n_fit": 10}}
    plain, record, args = _settings()
    assert plain == DiscoveryConfig(ablation="resample") and record["name"] == "library"
    assert (args.edge_n_fit, args.edge_n_heldout, record["overrides"]) == (32, 32, {})
    config, _, _ = _settings("--protocol", "mib")
    assert (config.method, config.ig_steps, config.ablation) == ("eap_ig_inputs", 5, "resample")


@pytest.mark.parametrize(
    ("argv", "want"),
    [
        (["--protocol", "mib"], {"n": 300, "partner": "s2_io_flip", "pad": True, "bos": True}),
        (["--protocol", "mib", "--partner", "abc", "--edge-n-heldout", "4"],
         {"n": 104, "partner": "abc", "pad": True, "bos": True}),
        ([], {"n": 64, "partner": "abc", "pad": False, "bos": None}),
        (["--partner", "s2_io_flip"], {"n": 64, "partner": "s2_io_flip", "pad": False, "bos": None}),
    ],
)  # fmt: skip
def test_task_ioi_pairs_take_the_protocols_partner_padding_and_bos(
    argv, want, tiny_loads, monkeypatch, tmp_path, capsys
):
    import attn_sink_circuits.studies.ioi.prompts as ioi

    seen = {}

    def pairs(model, n, seed=0, **kw):  # the last step before discovery: record, then stop
        seen.update(n=n, **kw)
        raise ValueError("stopped at the pairs")

    monkeypatch.setattr(ioi, "ioi_pairs", pairs)
    out = tmp_path / "o"
    assert cli.main(["discover", "--task", "ioi", "--out", str(out), *argv]) == 2
    assert "stopped at the pairs" in capsys.readouterr().err and seen == want


def test_partner_and_protocol_choices_and_misuse_fail_in_one_line(tmp_path, capsys):
    from attn_sink_circuits.cli.pairs import PARTNERS
    from attn_sink_circuits.studies.ioi.prompts import PARTNERS as IOI_PARTNERS

    assert PARTNERS == tuple(IOI_PARTNERS)
    for flag, bad, guess in (
        ("--protocol", "mibb", "mib"),
        ("--partner", "s2_io_flipp", "s2_io_flip"),
    ):
        with pytest.raises(SystemExit) as exc:
            cli.main(["discover", "--task", "ioi", flag, bad, "--out", str(tmp_path / "o")])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and err.startswith("usage: circuits discover ")
        assert err.rstrip().splitlines()[-1].endswith(f"invalid choice: '{bad}' (choose from "
                                                      f"{', '.join(map(repr, PARTNERS if flag == '--partner' else ('library', 'mib')))}) (did you mean {guess}?)")  # fmt: skip
    path = _file(tmp_path / "pairs.jsonl", ROWS)
    argv = ["discover", "--pairs", str(path), "--partner", "abc", "--out", str(tmp_path / "o")]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--partner abc makes the corrupted prompts of --task ioi" in err


@pytest.fixture(scope="module")
def run(tiny, tmp_path_factory):
    """A `discover --protocol mib` run on the tiny model (padded pairs of three lengths)."""
    folder = tmp_path_factory.mktemp("mib")
    path = _file(folder / "pairs.jsonl", ROWS)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(loading, "load", lambda args: tiny)
        argv = ["discover", "--pairs", str(path), "--protocol", "mib", *FAST]
        assert cli.main([*argv, "--out", str(folder / "run")]) == 0
    return folder / "run"


def _effects_csv(run) -> dict[str, tuple[float, float]]:
    """edges.csv as {"sender->receiver": (estimated effect, exact direct effect or nan)}, the
    target named as EAP-IG files name it."""
    import pandas as pd

    rows = pd.read_csv(run / "edges.csv")
    return {
        f"{s}->{'target:logits' if r.startswith('target:') else r}": (est, direct)
        for s, r, est, direct in rows[
            ["sender", "receiver", "estimated_effect", "direct_effect"]
        ].values
    }


def test_discover_with_the_mib_protocol_writes_mibs_importance_file(run, tiny):
    summary = json.loads((run / "summary.json").read_text())
    assert summary["protocol"] == {"name": "mib", "overrides": {
        "n_fit": 5, "n_heldout": 3, "ig_steps": 2, "n_boot": 10, "n_stability": 2, "n_random": 2,
        "n_curve": 4, "max_exact": 3}}  # fmt: skip
    assert summary["method"] == "eap_ig_inputs" and summary["ablation"] == "resample"
    longest = max(len(tiny.to_tokens(r["clean"])[0]) for r in ROWS)
    assert summary["n_tokens"] == longest  # padded to the longest pair
    n = summary["n_edges_total"]
    assert n == mib_edge_count(4, 4)  # the ungrouped graph: k / v per query head
    graph = json.loads((run / "circuit.json").read_text())
    assert json.loads(graph["graph"]["protocol"])["name"] == "mib"
    data = json.loads((run / "importances.mib.json").read_text())
    assert len(data["edges"]) == n and data["cfg"]["score_convention"] == "mib"
    assert sum(e["in_graph"] for e in data["edges"].values()) == summary["n_edges"]
    # read back: every circuit edge's effect is minus its score, as edges.csv has it
    effects, csv = from_eap_ig(data, n_kv_heads=4), _effects_csv(run)
    assert effects.keys() == csv.keys() and len(csv) == summary["n_edges"]
    for name, effect in effects.items():
        assert effect == pytest.approx(csv[name][0], abs=1e-7)
    # signs: the edges measured exactly (ablated alone) that lower the logit difference score
    # positive in the file (MIB's sign: positive supports), those that raise it negative
    exact = {k: direct for k, (_, direct) in csv.items() if direct == direct}
    assert len(exact) == 3
    for name, direct in exact.items():
        assert (effects[name] < 0) == (direct < 0), name


def _judge(circuit, pairs, out, capsys, *extra) -> dict:
    argv = ["faithfulness", str(circuit), "--pairs", str(pairs), "--out", str(out), *extra,
            "--n-random", "2", "--n-boot", "10", "--threads", "1"]  # fmt: skip
    assert cli.main(argv) == 0, capsys.readouterr().err
    return json.loads((out / "faithfulness.json").read_text())


def test_an_ungrouped_mib_file_is_judged_edge_for_edge(
    run, tiny_loads, tmp_path, capsys, monkeypatch
):
    from attn_sink_circuits.discovery import saved
    from attn_sink_circuits.discovery.saved import ungrouped_file

    data = json.loads((run / "importances.mib.json").read_text())
    found = json.loads((run / "summary.json").read_text())["n_edges"]
    # the circuit keeps some query heads' v input and not the others' of the same kv head
    assert ungrouped_file(data, n_heads=4, n_kv_heads=2)
    pairs = _file(tmp_path / "flip.jsonl", FLIP)  # one length: judged without padding
    graph = _judge(run / "circuit.json", pairs, tmp_path / "g", capsys)
    mib = _judge(run / "importances.mib.json", pairs, tmp_path / "m", capsys,
                 "--model", "qwen2.5-0.5b")  # fmt: skip
    assert graph["n_edges"] == mib["n_edges"] == found and mib["n_texts"] == len(FLIP)
    assert mib["faithfulness"] == pytest.approx(graph["faithfulness"], abs=1e-6)
    # folded onto the shared k / v inputs (as before), the same file is another circuit
    monkeypatch.setattr(saved, "ungrouped_file", lambda *a: False)
    folded = _judge(run / "importances.mib.json", pairs, tmp_path / "f", capsys,
                    "--model", "qwen2.5-0.5b")  # fmt: skip
    assert abs(folded["faithfulness"] - mib["faithfulness"]) > 1e-3


def test_export_mib_writes_the_importance_file_or_the_binary_circuit(run, tmp_path, capsys):
    importances = json.loads((run / "importances.mib.json").read_text())
    assert cli.main(["export", str(run), "--format", "mib", "--out", str(tmp_path / "i.json")]) == 0
    assert "importance scores of every edge" in capsys.readouterr().out
    assert json.loads((tmp_path / "i.json").read_text()) == importances
    # the circuit's own file scores its edges only: its binary circuit, read with MIB's
    # convention (signed top-n: largest score first) starts at the most supporting edge
    argv = ["export", str(run / "circuit.eap-ig.json"), "--format", "mib"]
    assert cli.main([*argv, "--out", str(tmp_path / "c.json")]) == 0
    assert "binary circuit" in capsys.readouterr().out
    binary = json.loads((tmp_path / "c.json").read_text())
    kept = [k for k, e in binary["edges"].items() if e["in_graph"]]
    assert set(kept) == {k for k, e in importances["edges"].items() if e["in_graph"]}
    top = max(binary["edges"], key=lambda k: binary["edges"][k]["score"])
    effects = _effects_csv(run)
    most_supporting = min(effects, key=lambda k: effects[k][0])
    assert from_eap_ig({**binary, "edges": {top: {**binary["edges"][top]}}}, 4) == {
        most_supporting: pytest.approx(effects[most_supporting][0])
    }
    # a file this library wrote before MIB's sign (no mark, the effect as the score) turns
    old = {**binary, "cfg": {k: v for k, v in binary["cfg"].items() if k != "score_convention"},
           "edges": {k: {**e, "score": -e["score"]} for k, e in binary["edges"].items()}}  # fmt: skip
    (tmp_path / "old.json").write_text(json.dumps(old))
    assert cli.main(["export", str(tmp_path / "old.json"), "--format", "mib"]) == 0
    assert json.loads((tmp_path / "old-mib.json").read_text()) == binary  # default --out
    capsys.readouterr()
    assert cli.main([*argv, "--out", str(tmp_path / "c.json")]) == 2
    assert "c.json exists; pass --force" in capsys.readouterr().err


def test_export_mib_sizes_writes_ten_circuits_as_mibs_evaluator_makes_them(run, tmp_path, capsys):
    from attn_sink_circuits.discovery.areas import MIB_FRACTIONS

    data = json.loads((run / "importances.mib.json").read_text())
    summary = json.loads((run / "summary.json").read_text())
    n = len(data["edges"])
    order = sorted(data["edges"], key=lambda k: data["edges"][k]["score"], reverse=True)
    out = tmp_path / "sizes"
    argv = ["export", str(run), "--format", "mib", "--mib-sizes", "--out", str(out)]
    assert cli.main(argv) == 0 and "10 binary circuits" in capsys.readouterr().out
    counts = []
    for k in MIB_FRACTIONS:
        circuit = json.loads((out / f"circuit_{k:g}.json").read_text())
        kept = {e for e, v in circuit["edges"].items() if v["in_graph"]}
        assert kept <= set(order[: int(k * n)])  # the top int(k n) by signed score, pruned
        nodes = {name for name, v in circuit["nodes"].items() if v["in_graph"]}
        assert all(e.split("->")[0] in nodes for e in kept)
        counts.append(len(kept))
    assert counts[0] == 0 and counts[-1] == n and counts == sorted(counts)
    # this library's prune drops a few more dead ends than MIB's (docs/mib/README.md)
    library = summary["mib"]["fit"]["n_edges_signed"]
    assert all(c >= lib for c, lib in zip(counts, library, strict=True)) and counts != [0] * 10
    capsys.readouterr()
    assert cli.main([*argv[:4], "--mib-sizes", "--out", str(tmp_path / "x")]) == 0  # abs: same k
    capsys.readouterr()  # its progress bar (stderr)
    for bad, message in (
        (["export", str(run / "circuit.json"), "--format", "json", "--mib-sizes"],
         "--mib-sizes goes with --format mib"),
        (["export", str(run / "circuit.eap-ig.json"), "--format", "mib", "--mib-sizes", "--out",
          str(tmp_path / "y")], "scores only its own circuit's edges"),
        (["export", str(tmp_path), "--format", "mib"], "is a folder without importances.mib.json"),
    ):  # fmt: skip
        assert cli.main(bad) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err


# -- a saved circuit is judged under what it was found with -----------------------------------

FLIP_RUN = ROOT / "docs/mib/runs/smollm2-135m-s2_io_flip-eap_ig_inputs-100"
"""A committed MIB run (scripts/mib_ioi.py, before graphs recorded their partner): its graph
names the partner only in `data`, its summary.json the protocol."""


def _pairs_made(monkeypatch, capsys, argv) -> tuple[int, dict, str]:
    """(exit code, what ioi_pairs was asked for, stderr) of `circuits faithfulness ARGV`,
    stopped at the pairs."""
    import attn_sink_circuits.studies.ioi.prompts as ioi

    seen = {}

    def pairs(model, n, seed=0, **kw):
        seen.update(n=n, **kw)
        raise ValueError("stopped at the pairs")

    monkeypatch.setattr(ioi, "ioi_pairs", pairs)
    rc = cli.main(["faithfulness", *map(str, argv), "--threads", "1"])
    return rc, seen, capsys.readouterr().err


def test_a_saved_ioi_circuit_is_judged_with_the_partner_and_protocol_it_was_found_with(
    tiny_loads, monkeypatch, capsys
):
    circuit = FLIP_RUN / "circuit.json.gz"
    rc, seen, err = _pairs_made(monkeypatch, capsys, [circuit, "--task", "ioi", "--n-pairs", 8])
    assert rc == 2 and "note:" not in err, err
    assert seen == {"n": 8, "partner": "s2_io_flip", "pad": True, "bos": True}
    # another partner or protocol is taken, with one note a setting before the result
    argv = [circuit, "--task", "ioi", "--partner", "abc", "--protocol", "library"]
    rc, seen, err = _pairs_made(monkeypatch, capsys, argv)
    assert seen == {"n": 32, "partner": "abc", "pad": False, "bos": None}
    notes = [line for line in err.splitlines() if "note:" in line]
    assert len(notes) == 4, err
    assert "judged under partner abc, not s2_io_flip (found under it)" in err
    assert "judged under protocol library, not mib" in err and "padding off, not on" in err


def test_a_circuit_whose_partner_is_unknown_or_of_another_task_is_refused(
    tiny_loads, tmp_path, monkeypatch, capsys
):
    from attn_sink_circuits.graph.io import read, write

    graph = read(FLIP_RUN / "circuit.json.gz")
    graph.graph["data"] = (
        "IOI pairs (attn_sink_circuits.studies.ioi.prompts)"  # as docs/ioi's graphs name it
    )
    write(graph, tmp_path / "circuit.json")
    rc, seen, err = _pairs_made(monkeypatch, capsys, [tmp_path / "circuit.json", "--task", "ioi"])
    assert rc == 2 and not seen and err.count("\n") == 1
    assert "does not record the partner" in err and "--partner" in err and "--protocol" in err
    rc, seen, _ = _pairs_made(monkeypatch, capsys, [tmp_path / "circuit.json", "--task", "ioi",
                                                    "--protocol", "mib"])  # fmt: skip
    assert seen["partner"] == "s2_io_flip"
    graph.graph["task"] = "pairs"  # found on a --pairs file
    write(graph, tmp_path / "circuit.json")
    rc, seen, err = _pairs_made(monkeypatch, capsys, [tmp_path / "circuit.json", "--task", "ioi"])
    assert rc == 2 and not seen and "found on a --pairs file, not on task ioi" in err


def test_new_graphs_record_task_partner_protocol_padding_and_bos(run, tiny_loads, monkeypatch,
                                                                 capsys):  # fmt: skip
    graph = json.loads((run / "circuit.json").read_text())["graph"]
    assert (graph["task"], graph["partner"], graph["pad"], graph["bos"]) == (
        "pairs", "", "true", "true")  # fmt: skip
    # an EAP-IG / MIB file names none of them: judged under --protocol (mib) and says so
    rc, seen, err = _pairs_made(monkeypatch, capsys, [run / "importances.mib.json", "--task",
                                                      "ioi", "--model", "qwen2.5-0.5b"])  # fmt: skip
    assert seen == {"n": 32, "partner": "s2_io_flip", "pad": True, "bos": True}
    assert "note: an EAP-IG / MIB graph JSON does not say how its pairs were made: judged " \
           "under protocol mib (partner s2_io_flip" in err  # fmt: skip


def test_judge_saved_makes_a_tasks_pairs_as_the_circuit_was_found(tiny, monkeypatch):
    import attn_sink_circuits.studies.ioi.prompts as ioi
    from attn_sink_circuits.discovery.saved import TASK_PAIRS, judge_saved

    seen = {}

    def pairs(model, n, seed=0, **kw):
        seen.update(n=n, seed=seed, **kw)
        raise ValueError("stopped at the pairs")

    monkeypatch.setattr(ioi, "ioi_pairs", pairs)
    with pytest.raises(ValueError, match="stopped at the pairs"):
        judge_saved(tiny, FLIP_RUN / "circuit.json.gz", "ioi", seed=3)
    assert seen == {"n": TASK_PAIRS, "seed": 3, "partner": "s2_io_flip", "pad": True, "bos": True}


@pytest.mark.slow
def test_the_committed_mib_flip_circuit_judged_without_flags_gives_its_flip_number(
    tmp_path, capsys
):
    """SmolLM2's committed MIB circuit (held-out f 0.86 on 200 flip pairs, 0.10 under ABC:
    under_abc.json), judged on 16 new pairs with no --partner / --protocol."""
    argv = ["faithfulness", str(FLIP_RUN / "circuit.json.gz"), "--task", "ioi", "--n-pairs",
            "16", "--pair-seed", "1", "--edge-n-random", "1", "--edge-n-boot", "100",
            "--threads", "1", "--out", str(tmp_path / "f")]  # fmt: skip
    assert cli.main(argv) == 0
    result = json.loads((tmp_path / "f" / "faithfulness.json").read_text())
    found = json.loads((FLIP_RUN / "summary.json").read_text())["heldout_faithfulness"]
    assert (result["protocol"], result["partner"]) == ("mib", "s2_io_flip")
    assert result["faithfulness"] == pytest.approx(found, abs=0.15)
    assert result["faithfulness_ci"][0] > 0.5  # ABC's 0.10 [0.05, 0.15] is far below
