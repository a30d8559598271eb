"""The docs' marked numbers and tables equal what their committed runs wrote
(`scripts/make_docs.py`), and the marks themselves work: a hand-typed number over a mark fails."""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def make_docs():
    spec = importlib.util.spec_from_file_location("make_docs", ROOT / "scripts" / "make_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_marked_number_in_the_docs_is_its_runs(make_docs, capsys):
    assert make_docs.main(["--check"]) == 0, capsys.readouterr().out


@pytest.fixture
def fake_root(make_docs, tmp_path, monkeypatch):
    run = tmp_path / "docs" / "p0" / "m"
    run.mkdir(parents=True)
    summary = {
        "model": "m",
        "wall_seconds": 1853.2,
        "edge_circuit_edges": 1234,
        "edge_circuit_of_all_edges": 30930,
        "heldout_faithfulness": 0.8237,
        "heldout_faithfulness_ci": [0.74, 0.92],
        "random_faithfulness_mean": 0.001,
        "random_faithfulness_sd": 0.002,
        "complement_faithfulness": -0.01,
        "edge_stability_mean": 0.9,
    }
    (run / "summary.json").write_text(json.dumps({"summary": summary, "settings": {"a": 1}}))
    monkeypatch.setattr(make_docs, "ROOT", tmp_path)
    return tmp_path


def test_a_value_mark_takes_its_runs_number(make_docs, fake_root):
    text = "kept <!--v docs/p0/m heldout_faithfulness .2f-->0.99<!--/v--> of it in "
    text += "<!--v docs/p0/m edge_circuit_edges ,d-->1<!--/v--> edges (<!--v docs/p0/m settings.a d-->x<!--/v-->)"
    out = make_docs.render(text, "t.md")
    assert "-->0.82<!--" in out and "-->1,234<!--" in out and "-->1<!--/v-->)" in out


def test_seconds_show_as_whole_minutes(make_docs, fake_root):
    out = make_docs.render("took <!--v docs/p0/m wall_seconds min-->x<!--/v-->", "t.md")
    assert "-->31 min<!--/v-->" in out


def test_a_hand_typed_number_over_a_mark_is_reported(make_docs, fake_root):
    doc = fake_root / "README.md"
    doc.write_text("f <!--v docs/p0/m heldout_faithfulness .2f-->0.99<!--/v-->\n")
    (bad,) = make_docs.differences(doc)
    assert "README.md:1" in bad and "0.99" in bad and "0.82" in bad
    assert make_docs.main(["--check"]) == 1
    assert make_docs.main([]) == 0 and "-->0.82<!--" in doc.read_text()
    assert make_docs.differences(doc) == []


def test_a_table_mark_is_made_from_its_runs(make_docs, fake_root):
    text = "<!--table p0_headline docs/p0/m-->\nold\n<!--/table-->\n"
    out = make_docs.render(text, "t.md")
    assert "| m | `docs/p0/m` | 1,234 of 30,930 | 0.82 (0.74-0.92) | 0.18 |" in out
    assert "old" not in out


def test_a_mark_naming_a_missing_run_or_key_is_one_clear_error(make_docs, fake_root):
    with pytest.raises(ValueError, match="t.md: docs/p0/nope: no such run"):
        make_docs.render("<!--v docs/p0/nope f .2f-->1<!--/v-->", "t.md")
    with pytest.raises(ValueError, match="key 'nope'"):
        make_docs.render("<!--v docs/p0/m nope .2f-->1<!--/v-->", "t.md")
    with pytest.raises(ValueError, match="unknown table 'nope'"):
        make_docs.render("<!--table nope-->\n<!--/table-->", "t.md")


def test_an_included_table_is_the_runs_file_with_the_columns_asked(make_docs, fake_root):
    (fake_root / "docs" / "p0" / "m" / "runs.md").write_text(
        "| a | b | c |\n|---|---|---|\n| 1 | 2 | 3 |\n"
    )
    out = make_docs.render(
        "<!--table include docs/p0/m/runs.md c a-->\nold\n<!--/table-->\n", "t.md"
    )
    assert "| c | a |\n| --- | --- |\n| 3 | 1 |" in out and "old" not in out
    with pytest.raises(ValueError, match="no column z; it has a, b, c"):
        make_docs.render("<!--table include docs/p0/m/runs.md z-->\n<!--/table-->\n", "t.md")


def test_a_kv_table_has_a_row_per_setting_and_a_column_per_text(make_docs, fake_root):
    run = fake_root / "docs" / "kv" / "m"
    run.mkdir(parents=True)
    key = {"experiment": "streaming", "first": "text", "budget": 256, "sinks": 1}
    rows = [
        {**key, "policy": "streaming_llm", "text": t, "perplexity": p}
        for t, p in ((0, 9.5), (2, 7.25))
    ]
    pooled = [{**key, "policy": "streaming_llm", "perplexity": 8.3}]
    (run / "summary.json").write_text(json.dumps({"rows": rows, "pooled": pooled}))
    out = make_docs.kv_table("docs/kv/m", "streaming")
    assert "| streaming_llm, 1 first tokens | 256 | 9.50 | 7.25 | 8.30 |" in out
    with pytest.raises(ValueError, match="no 'budgets' rows"):
        make_docs.kv_table("docs/kv/m", "budgets")


def test_a_cross_partner_row_names_both_partners_and_their_faithfulness(make_docs, fake_root):
    run = fake_root / "docs" / "mib" / "r"
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps(
        {"model": "m", "method": "eap", "partner": "s2_io_flip"}))  # fmt: skip
    judged = {"faithfulness": 0.86, "faithfulness_ci": [0.83, 0.89], "n_edges": 1234,
              "random_faithfulness": -0.0001}  # fmt: skip
    (run / "under_abc.json").write_text(json.dumps({
        "provenance": {"settings": {"partner": "abc"}}, "s2_io_flip": judged,
        "abc": {**judged, "faithfulness": 0.1, "faithfulness_ci": [-0.01, 0.2]}}))  # fmt: skip
    out = make_docs.mib_cross_partner("docs/mib/r/under_abc.json")
    row = "| m | eap | s2_io_flip | 1,234 | 0.86 [0.83, 0.89] | abc | 0.10 [-0.01, 0.20] | 0.00 |"
    assert row in out.splitlines()


def test_a_mib_cell_row_gives_its_circuits_stability_or_a_dash(make_docs, fake_root):
    run = fake_root / "docs" / "mib" / "c"
    run.mkdir(parents=True)
    cell = {"model": "m", "partner": "s2_io_flip", "method": "eap_ig_inputs", "n_fit_texts": 100,
            "n_heldout_texts": 200, "cpr_heldout": 2.0, "cpr_fit": 2.1, "cmd_heldout": 0.02,
            "cmd_fit": 0.01, "n_edges": 331, "n_edges_total": 123211,
            "heldout_faithfulness": 0.86, "heldout_faithfulness_ci": [0.83, 0.89],
            "random_faithfulness_mean": -0.0001, "stability_mean": 0.9195}  # fmt: skip
    (run / "summary.json").write_text(json.dumps(cell))
    row = make_docs.mib_cells("docs/mib/c").splitlines()[-1]
    assert row.startswith("| m | s2_io_flip | eap_ig_inputs | 100 / 200 | 2.00 (2.10) |")
    assert row.endswith("| 331 (123,211) | 0.86 (0.83-0.89) | 0.14 | 0.000 | 0.92 |")
    (run / "summary.json").write_text(json.dumps({**cell, "stability_mean": float("nan")}))
    assert make_docs.mib_cells("docs/mib/c").splitlines()[-1].endswith("| 0.000 | - |")
    # a setting that is not the protocol's names the variant; memory bounds do not
    settings = {"method": "mask", "batch_size": 16, "grad_batch": 4, "mask_target_share": 0.001}
    variant = {**cell, "method": "mask", "protocol": "mib", "provenance": {"settings": settings}}
    (run / "summary.json").write_text(json.dumps(variant))
    row = make_docs.mib_cells("docs/mib/c").splitlines()[-1]
    assert row.startswith("| m | s2_io_flip | mask (mask_target_share=0.001) | 100 / 200 |")


def test_a_targets_row_judges_each_area_by_its_interval(make_docs, fake_root):
    """CPR / CMD held out against the best published Qwen numbers (1.92 / 0.01) and MIB's row
    for the method: holds, does not hold or undecided by where the interval lies; the mask is
    judged against UGS, named; a method MIB does not list gets "-"; too few pairs, n/a."""
    run = fake_root / "docs" / "mib" / "t"
    run.mkdir(parents=True)
    cell = {"model": "m", "partner": "s2_io_flip", "method": "eap_ig_inputs", "n_fit_texts": 100,
            "n_heldout_texts": 200, "cpr_heldout": 2.06, "cpr_heldout_ci": [1.95, 2.19],
            "cmd_heldout": 0.018, "cmd_heldout_ci": [0.013, 0.025]}  # fmt: skip
    (run / "summary.json").write_text(json.dumps(cell))
    row = make_docs.mib_targets("docs/mib/t").splitlines()[-1]
    assert row == ("| m | s2_io_flip | eap_ig_inputs | 100 | 2.06 [1.95-2.19] | holds | holds "
                   "(1.63) | 0.018 [0.013-0.025] | does not hold | undecided (0.02) |")  # fmt: skip
    mask = {**cell, "method": "mask", "cpr_heldout": 1.90, "cpr_heldout_ci": [1.85, 1.95]}
    (run / "summary.json").write_text(json.dumps(mask))
    row = make_docs.mib_targets("docs/mib/t").splitlines()[-1]
    assert "| 1.90 [1.85-1.95] | undecided | holds (0.98 UGS) |" in row
    assert row.endswith("| does not hold | holds (0.03 UGS) |")
    (run / "summary.json").write_text(
        json.dumps({**cell, "method": "eap_ig", "n_heldout_texts": 4})
    )
    row = make_docs.mib_targets("docs/mib/t").splitlines()[-1]
    assert row.endswith("| not applicable | - | 0.018 [0.013-0.025] | not applicable | - |")


def test_the_ioi_results_page_is_what_its_generator_writes():
    """docs/ioi/RESULTS.md is `scripts/ioi_docs.py docs/ioi`'s output, not a hand-edited copy."""
    import subprocess
    import sys

    made = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "ioi_docs.py"), str(ROOT / "docs" / "ioi")],
        capture_output=True, text=True, check=True, cwd=ROOT,
    )  # fmt: skip
    page = (ROOT / "docs" / "ioi" / "RESULTS.md").read_text(encoding="utf-8")
    assert made.stdout == page, "regenerate: scripts/ioi_docs.py docs/ioi > docs/ioi/RESULTS.md"
