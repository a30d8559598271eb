"""The KV streaming experiments (`python -m attn_sink_circuits.studies.kv.streaming`): the rows
each experiment measures, their pooling, and a run folder of the first look on a tiny model
(the full cache's row is the plain forward's NLL; a rerun measures nothing again)."""

from __future__ import annotations

import json
import math

import pytest

from attn_sink_circuits.studies.kv import experiments, streaming
from attn_sink_circuits.studies.kv.evaluate import masked_nll


def test_each_experiment_has_its_rows_and_every_row_its_own_key():
    rows = experiments.jobs([0, 2])
    count = {e: sum(r["experiment"] == e for r in rows) for e in experiments.EXPERIMENTS}
    # Per long text: streaming 8 (full, window, 4 sink counts, newlines twice); budgets 2 x 4
    # policies less the window at 256 (a streaming row); targets full + 2 x 4; reindexed 2 + 2 x
    # 2; capped 2; blocking none + 2 targets x (the sink + 2 controls x 5 seeds). First look once.
    per_text = {"streaming": 8, "budgets": 7, "targets": 9, "reindexed": 6, "capped": 2,
                "blocking": 23}  # fmt: skip
    assert count == {**{e: 2 * n for e, n in per_text.items()}, "first_look": 6}
    assert len({experiments.key(r) for r in rows}) == len(rows)
    assert {r["text"] for r in rows if r["experiment"] == "first_look"} == {-1}
    assert [r["text"] for r in rows[:8]] == [0] * 8  # the first text's rows come first


def test_rows_pool_over_texts_by_their_scored_tokens():
    row = {"experiment": "budgets", "first": "text", "policy": "window", "budget": 64, "sinks": 4}
    rows = [{**row, "text": 0, "nll": 1.0, "n_scored": 100},
            {**row, "text": 2, "nll": 2.0, "n_scored": 300},
            {**row, "text": 0, "budget": 256, "nll": 3.0, "n_scored": 10}]  # fmt: skip
    pooled = experiments.means(rows)
    assert len(pooled) == 2 and pooled[0]["texts"] == 2 and pooled[1]["texts"] == 1
    assert pooled[0]["perplexity"] == pytest.approx(math.exp((100 * 1.0 + 300 * 2.0) / 400))
    assert pooled[1]["perplexity"] == pytest.approx(math.exp(3.0))


def test_the_first_look_on_a_tiny_model_resumes_and_writes_its_folder(tiny, tmp_path, monkeypatch):
    import attn_sink_circuits.models as models

    monkeypatch.setattr(models, "load_model", lambda key: tiny)
    progress, out = tmp_path / "rows.jsonl", tmp_path / "run"
    argv = ["--model", "tiny", "--texts", "0", "--experiments", "first_look",
            "--progress", str(progress), "--out", str(out)]  # fmt: skip
    assert streaming.main(argv) == 0
    rows = [json.loads(line) for line in progress.read_text().splitlines()]
    assert [(r["policy"], r["budget"]) for r in rows] == [
        ("full", 1024), ("window", 256), ("streaming_llm", 257), ("streaming_llm", 260),
        ("window", 64), ("streaming_llm", 65),
    ]  # fmt: skip
    ids = streaming.tokens_of(tiny, -1, "text")
    plain = masked_nll(tiny, ids, None)[255:]  # tokens from position 256 on
    assert rows[0]["n_scored"] == len(plain) == 768
    assert rows[0]["nll"] == pytest.approx(float(plain.mean()), rel=1e-5)
    assert rows[4]["nll"] != pytest.approx(rows[0]["nll"], rel=1e-6)  # a window of 64 differs
    # A rerun measures nothing again: every row is in the progress file.
    monkeypatch.setattr(streaming, "measure", lambda *a: pytest.fail("measured again"))
    assert streaming.main([*argv, "--write-only"]) == 0
    assert len(progress.read_text().splitlines()) == 6
    summary = json.loads((out / "summary.json").read_text())
    assert [r["nll"] for r in summary["rows"]] == [r["nll"] for r in rows]
    full = summary["pooled"][0]
    assert full["policy"] == "full" and full["perplexity"] == pytest.approx(
        math.exp(rows[0]["nll"]), rel=1e-9
    )
    assert summary["provenance"]["settings"]["experiments"] == ["first_look"]
    assert sorted(p.name for p in out.iterdir()) == [".circuits-run.json", "rows.csv",
                                                     "summary.json"]  # fmt: skip
