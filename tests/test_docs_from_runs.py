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
    monkeypatch.setattr(make_docs, "STRICT_PAGES", [])  # strict here only where a test says so
    return tmp_path


def test_a_value_mark_takes_its_runs_number(make_docs, fake_root):
    text = "kept <!--v docs/p0/m heldout_faithfulness .2f-->0.99<!--/v--> of it in "
    text += "<!--v docs/p0/m edge_circuit_edges ,d-->1<!--/v--> edges (<!--v docs/p0/m settings.a d-->x<!--/v-->)"
    out = make_docs.render(text, "t.md")
    assert "-->0.82<!--" in out and "-->1,234<!--" in out and "-->1<!--/v-->)" in out


def test_seconds_show_as_whole_minutes(make_docs, fake_root):
    out = make_docs.render("took <!--v docs/p0/m wall_seconds min-->x<!--/v-->", "t.md")
    assert "-->31 min<!--/v-->" in out


def test_seconds_show_as_minutes_and_seconds(make_docs, fake_root):
    out = make_docs.render("took <!--v docs/p0/m wall_seconds minsec-->x<!--/v-->", "t.md")
    assert "-->30 min 53 s<!--/v-->" in out  # 1853.2 s


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


def test_a_published_row_stands_beside_each_cell_as_reference(make_docs, fake_root):
    """CPR / CMD held out with their intervals, beside MIB's published rows for the method on
    GPT-2 small and Qwen2.5-0.5B base (no verdict against them: other models and data); the
    mask beside UGS, named; a method MIB does not list gets "-"; a registry key is shown as
    the model it stands for."""
    run = fake_root / "docs" / "mib" / "t"
    run.mkdir(parents=True)
    cell = {"model": "m", "partner": "s2_io_flip", "method": "eap_ig_inputs", "n_fit_texts": 100,
            "n_heldout_texts": 200, "cpr_heldout": 2.06, "cpr_heldout_ci": [1.95, 2.19],
            "cmd_heldout": 0.018, "cmd_heldout_ci": [0.013, 0.025]}  # fmt: skip
    (run / "summary.json").write_text(json.dumps(cell))
    row = make_docs.mib_published("docs/mib/t").splitlines()[-1]
    assert row == ("| m | s2_io_flip | eap_ig_inputs | 100 | 2.06 [1.95-2.19] | "
                   "0.018 [0.013-0.025] | 1.85 / 0.03 | 1.63 / 0.02 |")  # fmt: skip
    assert "holds" not in make_docs.mib_published("docs/mib/t")
    mask = {**cell, "method": "mask", "model": "qwen2.5-0.5b"}
    (run / "summary.json").write_text(json.dumps(mask))
    row = make_docs.mib_published("docs/mib/t").splitlines()[-1]
    assert row.startswith("| Qwen2.5-Coder-0.5B-Instruct, Q4_K_M dequantised | s2_io_flip |")
    assert row.endswith("| 0.97 / 0.03 (UGS) | 0.98 / 0.03 (UGS) |")
    (run / "summary.json").write_text(json.dumps({**cell, "method": "eap_ig"}))
    assert make_docs.mib_published("docs/mib/t").splitlines()[-1].endswith("| - | - |")


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


# ---------------------------------------------------------------------------------------------
# Typed numbers: a number in a page's prose that no run wrote

TYPED = "The circuit keeps 0.82 of the sink."


def test_a_typed_number_in_prose_is_found_with_its_line(make_docs):
    found = make_docs.typed_numbers(f"# A page\n\n{TYPED}\nblock-3 grows 6.5x, 1e-5, 3/5\n")
    assert [(line, n) for line, n, _ in found] == [
        (3, "0.82"), (4, "3"), (4, "6.5"), (4, "1e-5"), (4, "3"), (4, "5")
    ]  # fmt: skip
    assert found[0][2] == TYPED


@pytest.mark.parametrize(
    ("rule", "text"),
    [
        ("value mark", "f <!--v docs/p0/m heldout_faithfulness .2f-->0.82<!--/v--> held out"),
        ("table mark", "<!--table p0_headline docs/p0/m-->\n| 0.82 | 1,234 |\n<!--/table-->"),
        ("fenced code", "```sh\ncircuits p0 --n-fit 16  # 0.82\n```"),
        ("indented code", "Run:\n\n    circuits p0 --n-fit 16\n    --threads 1\n\nThen"),
        ("inline code", "`--option target=0.82` and `circuits p0\n--quick 6`"),
        ("comment", "<!-- 0.82 is the old value -->"),
        ("link target", "[the run](docs/p0/README.md#held-out-f-1-08) and ![x](a/fig_2.png)"),
        ("url", "https://arxiv.org/abs/2309.17453 and <https://example.org/v1.2>"),
        ("version", "Python 3.11, TransformerLens 4.3, torch==2.13.0, resolved 5.2.0, v2"),
        ("model name", "SmolLM2-135M, Qwen2.5-0.5B, Qwen2.5-Coder-0.5B-Instruct, Gemma 3 270M"),
        ("model name", "GPT-2, GPT2-XL, Llama-3-8B, gemma-3-270m, Gemma 3 applies"),
        ("date", "on 2026-12-07, on 4 December 2026, in Dec 2026 (Gu et al., 2024)"),
        ("reference", "issue 37, issues 35 and 37, seed 001, seeds 0-4, item 4, Table 1, #58"),
        ("reference", "lines 2, 12, 13: the German ones; the issue-23 verdict"),
        ("file or path", "`x` in docs/p0/smollm2-135m and p0_circuit_2.png, rows.csv"),
        ("constant", "a 95 % interval; the band [0.9, 1.1]; GPT2-XL 77.00 % in the paper"),
        ("list marker", "1. first\n2. second"),
        ("identifier", "P0 and L0.H0, L23.MLP, bf16, d64"),
        ("commit", "as of commit 523ba48"),
    ],
)
def test_a_number_a_rule_excuses_is_not_typed_and_the_rest_still_is(make_docs, rule, text):
    """Each rule excuses its numbers and leaves a typed one beside them flagged (so a rule that
    blanked everything would fail)."""
    found = make_docs.typed_numbers(f"{text}\n\n{TYPED}")
    assert [n for _, n, _ in found] == ["0.82"], rule


@pytest.mark.parametrize(
    ("text", "typed"),
    [
        ("SmolLM2 block 1", ["1"]),  # a model name does not reach past a space
        ("Gemma 2 of 5 splits", ["2", "5"]),  # only Gemma 3 is a name written with a space
        ("see issue 35, 256 tokens", ["256"]),  # a count after a reference is a count
        ("prose 0.91, tables 0.86", ["0.91", "0.86"]),  # a kind of text, not a paper's Table
        ("kvpress 6.7132, kvpress 0.5.5", ["6.7132"]),  # a measured tool's version is x.y.z
        ("correct/5 of them", ["5"]),  # a path has a name after its slash
        ("a 95.5 % share, 195 % and 0.95 %", ["95.5", "195", "0.95"]),  # constants are exact
        ("GPT2-XL's 77.00 %", ["77.00"]),  # a published constant only as the list writes it
        ("at position 0, 8k edges, 1.2k", ["0", "8", "1.2"]),
    ],
)
def test_where_a_rule_cannot_tell_the_number_is_flagged(make_docs, text, typed):
    assert [n for _, n, _ in make_docs.typed_numbers(text)] == typed


def test_an_item_of_a_list_inside_a_list_item_is_prose_not_code(make_docs):
    text = "- an item\n\n    its second paragraph: 0.82 of the sink\n"
    assert [n for _, n, _ in make_docs.typed_numbers(text)] == ["0.82"]


def test_every_allowed_constant_names_its_source_and_the_code_still_holds_it(make_docs):
    import importlib

    for text, (what, source, value) in make_docs.CONSTANTS.items():
        assert make_docs.NUMBER.search(text) and len(what) > 20, text
        if source is None:  # a published number: paper and table
            assert "Table" in what and "et al." in what, text
            continue
        parts = source.split(".")
        for i in range(len(parts), 0, -1):  # the longest importable prefix, then attributes
            try:
                obj = importlib.import_module(".".join(parts[:i]))
            except ModuleNotFoundError:
                continue
            for name in parts[i:]:
                obj = getattr(obj, name)
            break
        assert obj == value, f"{text}: {source} is {obj!r}, the list says {value!r}"
        numbers = value if isinstance(value, tuple) else (value,)
        shown = [f"{v:g}" for v in numbers] if isinstance(value, tuple) else [f"{value:.0%}"]
        assert all(s.replace("%", " %") in text for s in shown), text


def test_typed_lists_every_page_or_one_pages_numbers(make_docs, fake_root, capsys):
    (fake_root / "README.md").write_text(f"{TYPED}\n")
    (fake_root / "docs" / "p0" / "README.md").write_text("`1` only\n")
    (fake_root / "docs" / "ioi").mkdir()
    (fake_root / "docs" / "ioi" / "RESULTS.md").write_text("written by its script: 7\n")
    assert make_docs.main(["--typed"]) == 0
    assert capsys.readouterr().out.splitlines() == ["    1  README.md", "    0  docs/p0/README.md"]
    assert make_docs.main(["--typed", "README.md"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"README.md:1: 0.82  | {TYPED}",
        "1 typed number(s) in README.md",
    ]
    assert make_docs.main(["--typed", "docs/ioi/RESULTS.md"]) == 2
    assert "not a page the rule reads" in capsys.readouterr().err


def test_check_fails_on_typed_numbers_only_on_strict_pages(
    make_docs, fake_root, monkeypatch, capsys
):
    (fake_root / "README.md").write_text(f"{TYPED}\n")
    (fake_root / "docs" / "p0" / "README.md").write_text(
        "f <!--v docs/p0/m heldout_faithfulness .2f-->0.82<!--/v-->\n"
    )
    assert make_docs.main(["--check"]) == 0
    monkeypatch.setattr(make_docs, "STRICT_PAGES", ["docs/p0/README.md"])
    assert make_docs.main(["--check"]) == 0
    monkeypatch.setattr(make_docs, "STRICT_PAGES", ["README.md", "docs/p0/README.md"])
    capsys.readouterr()
    assert make_docs.main(["--check"]) == 1
    assert "README.md:1: typed number 0.82" in capsys.readouterr().out
    monkeypatch.setattr(make_docs, "STRICT_PAGES", ["docs/nope.md"])
    assert make_docs.main(["--check"]) == 2
    assert "STRICT_PAGES names docs/nope.md" in capsys.readouterr().err


def test_the_repos_strict_pages_hold_no_typed_number(make_docs):
    assert make_docs.strict_failures() == []
