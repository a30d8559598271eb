"""Passkey retrieval under a cache policy (`attn_sink_circuits.studies.kv.retrieval`), on the tiny model: the
prompts hold the needle where they say, the answer is the key's tokens, the cached answer step
gives the whole-sequence hooks' numbers, a window that cannot reach the needle does not read
it, and a model that cannot retrieve with the full cache makes its rows "not applicable"."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch

from attn_sink_circuits.studies.kv import KVConfig, keep_masks, masked_nll
from attn_sink_circuits.studies.kv.passkey import HEADER, NEEDLE, QUESTION, passkey_prompts
from attn_sink_circuits.studies.kv.retrieval import (
    NOT_APPLICABLE,
    budget_tokens,
    mark_applicable,
    pooled_accuracy,
    prefill,
    prompt_masks,
    retrieval_table,
    score_prompt,
    wilson_interval,
)

POLICIES = ("window", "streaming_llm", "heavy_hitters", "snapkv", "sink_aware")
GPL = (4,)  # long.jsonl's GPL-3: ASCII, so one byte token per character


@pytest.fixture(scope="module")
def prompts(tiny):
    return passkey_prompts(tiny, 3, tokens=600, seed=3, rows=GPL, depths=[0.1, 0.5, 0.9])


@pytest.fixture(scope="module")
def sinks(tiny):
    return [(0,), (0, 40), (0, 40), (0,)]


def test_the_needle_is_at_the_asked_depth_and_the_key_where_said(tiny, prompts):
    for item, depth in zip(prompts, [0.1, 0.5, 0.9], strict=True):
        text = tiny.to_string(item.prompt[1:])
        assert text.startswith(HEADER) and text.endswith(QUESTION)
        needle = NEEDLE.format(key=item.key).rstrip("\n")
        assert tiny.to_string(item.prompt[item.needle[0] : item.needle[1]]) == needle
        assert text.count(item.key) == 2 and len(item.key) == 5 and item.key.isdigit()
        for mention in item.key_positions:
            assert list(mention) == list(range(mention[0], mention[0] + 5))
            assert tiny.to_string(item.prompt[list(mention)]) == item.key
        # the needle starts the line that holds the filler's character (= token) at `depth`
        before, after = text[len(HEADER) :].split(needle + "\n")
        filler = before + after[: -len(QUESTION)]
        at = int(depth * len(filler))
        assert before == "" or before.endswith("\n")
        assert len(before) <= at < len(before) + after.index("\n") + 1
    assert [p.needle_depth for p in prompts] == sorted(p.needle_depth for p in prompts)


def test_prompts_are_deterministic_by_seed(tiny, prompts):
    again = passkey_prompts(tiny, 3, tokens=600, seed=3, rows=GPL, depths=[0.1, 0.5, 0.9])
    assert [p.key for p in again] == [p.key for p in prompts]
    assert all(torch.equal(a.prompt, b.prompt) for a, b in zip(again, prompts, strict=True))
    other = passkey_prompts(tiny, 3, tokens=600, seed=4, rows=GPL, depths=[0.1, 0.5, 0.9])
    assert [p.key for p in other] != [p.key for p in prompts]
    assert all(600 - 80 <= len(p.prompt) <= 600 for p in prompts + other)  # whole lines (<= 78)


def test_the_answer_is_the_keys_tokens(tiny, prompts):
    for item in prompts:
        assert item.answer.tolist() == tiny.to_tokens(" " + item.key, prepend_bos=False)[0].tolist()
        assert tiny.to_string(item.tokens[-len(item.answer) :]) == " " + item.key
        assert torch.equal(item.tokens[: len(item.prompt)], item.prompt)


def test_a_full_budget_gives_the_full_caches_answer_nll(tiny, prompts, sinks):
    item = prompts[1]
    pre = prefill(tiny, item.prompt, patterns=True)
    full = score_prompt(tiny, item, "full", None, KVConfig(), sinks, pre)
    for policy in POLICIES:
        got = score_prompt(tiny, item, policy, len(item.prompt), KVConfig(), sinks, pre)
        assert abs(got.answer_nll - full.answer_nll) < 1e-5, policy
        assert got.predicted == full.predicted and got.key_kept == 1.0
    small = score_prompt(tiny, item, "window", 16, KVConfig(), sinks, pre)
    assert abs(small.answer_nll - full.answer_nll) > 1e-3


def test_the_cached_answer_step_is_the_whole_sequence_forward(tiny, prompts, sinks):
    """The masks are `keep_masks`' compress-once masks, and the answer's NLL through the cache
    is `masked_nll` of the whole sequence under them."""
    item = prompts[0]
    p = len(item.prompt)
    pre = prefill(tiny, item.prompt, patterns=True)
    config = KVConfig(prefix=p, score_from=p)
    for policy in POLICIES:
        row = score_prompt(tiny, item, policy, 0.1, KVConfig(), sinks, pre)
        masks = keep_masks(tiny, item.tokens, policy, row.budget, config, sinks)
        mine = prompt_masks(tiny, item, policy, row.budget, KVConfig(), pre, sinks)
        assert all(torch.equal(a, b) for a, b in zip(masks, mine, strict=True)), policy
        whole = float(masked_nll(tiny, item.tokens, masks)[p - 1 :].sum())
        assert math.isclose(row.answer_nll, whole, rel_tol=1e-5, abs_tol=1e-4), policy


def test_a_window_short_of_the_needle_does_not_read_it(tiny, prompts):
    item = prompts[0]  # needle near the start, hundreds of tokens before the question
    p, n = len(item.prompt), len(item.tokens)
    needle = list(range(*item.needle))
    pre = prefill(tiny, item.prompt)
    for budget, reads in [(p - item.needle[1] - 1, False), (p - item.needle[0], True)]:
        masks = prompt_masks(tiny, item, "window", budget, KVConfig(), pre)
        answer_rows = [m[p:n][:, needle] for m in masks]
        assert all(rows.all() if reads else not rows.any() for rows in answer_rows), budget
        row = score_prompt(tiny, item, "window", budget, KVConfig(), pre=pre)
        assert row.key_kept == (1.0 if reads else 0.0)


def test_a_model_that_cannot_retrieve_is_not_applicable(tiny, prompts):
    table = retrieval_table(tiny, prompts[:2], ["window"], [16], progress=None)
    assert len(table) == 2 * 2 and set(table.budget_spec) == {"full", "16"}
    assert (table.full_accuracy == 0).all() and not table.applicable.any()
    assert set(pooled_accuracy(table).status) == {NOT_APPLICABLE}
    kept = mark_applicable(table, min_full=0.0)
    assert kept.applicable.all() and set(pooled_accuracy(kept).status) == {""}


def test_applicability_is_judged_per_model():
    rows = [
        ("a", "full", True),
        ("a", "window", False),
        ("b", "full", False),
        ("b", "window", True),
    ]
    table = pd.DataFrame(rows, columns=["model", "policy", "correct"])
    marked = mark_applicable(table, 0.8)
    assert marked.applicable.tolist() == [True, True, False, False]
    with pytest.raises(ValueError, match="full-cache rows"):
        mark_applicable(table[table.policy != "full"])


def test_wilson_interval_and_budgets():
    low, high = wilson_interval(0, 5)
    assert low == pytest.approx(0.0, abs=1e-12) and high == pytest.approx(
        1.96**2 / (5 + 1.96**2), abs=1e-4
    )
    low, high = wilson_interval(5, 10)
    assert low == pytest.approx(0.2366, abs=1e-4) and high == pytest.approx(0.7634, abs=1e-4)
    assert budget_tokens(0.1, 1997) == 200 and budget_tokens(64, 1997) == 64
    for bad in (0, 1.5, True, -3):
        with pytest.raises(ValueError, match="a budget is tokens"):
            budget_tokens(bad, 100)


# -- the run folder (`python -m attn_sink_circuits.studies.kv.passkey_check`) ---------------
def test_budgets_are_shares_or_token_counts(capsys):
    from attn_sink_circuits.studies.kv.passkey_check import budget, main

    assert budget("10%") == pytest.approx(0.1) and budget("0.25") == 0.25 and budget("64") == 64
    with pytest.raises(SystemExit) as stop:
        main(["--budgets", "ten"])
    assert stop.value.code == 2
    assert "--budgets: 'ten' is neither a share" in capsys.readouterr().err


def test_a_run_folder_on_the_tiny_model_resumes_from_its_rows(tiny, tmp_path, monkeypatch):
    import json

    import attn_sink_circuits.models as models
    from attn_sink_circuits.studies.kv import retrieval
    from attn_sink_circuits.studies.kv.passkey_check import main

    monkeypatch.setattr(models, "load_model", lambda key: tiny)
    progress, out = tmp_path / "rows.jsonl", tmp_path / "run"
    argv = ["--model", "tiny", "--prompts", "2", "--tokens", "600", "--rows", "4", "--policies",
            "window", "--budgets", "16", "10%", "--progress", str(progress), "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    table = pd.read_csv(out / "rows.csv")
    assert len(table) == 2 * 3 and set(table.budget_spec) == {"full", "16", "10%"}
    assert not table.applicable.any()  # a random model does not retrieve with the full cache
    summary = json.loads((out / "summary.json").read_text())
    assert [p["prompt"] for p in summary["prompts"]] == [0, 1]
    assert summary["provenance"]["settings"]["budgets"] == ["16", "10%"]
    assert len(progress.read_text().splitlines()) == 6
    # The same settings again: every prompt's rows come from the progress file.
    monkeypatch.setattr(retrieval, "retrieval_table", lambda *a, **k: pytest.fail("measured"))
    assert main(argv) == 0
    assert pd.read_csv(out / "rows.csv").equals(table)
