"""The KV study in three calls (`kv.run(model, data, config)`, then `summary()`, `figures()`,
`save(folder)`): the numbers are the model's own (the full cache's perplexity is the plain
forward's on the same tokens), the table is the policy table of the same tokens, and bad input
is refused in one line."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
import torch
from matplotlib.figure import Figure

from attn_sink_circuits.studies import kv
from attn_sink_circuits.studies.kv import KVConfig, KVRunConfig
from attn_sink_circuits.studies.result import Result

CONFIG = KVRunConfig(
    policies=("window", "streaming_llm", "sink_aware"),
    budgets=(8, 24),
    tokens=96,
    kv=KVConfig(score_from=32, sinks=2),
)
TEXTS = [
    {"text": "The sink holds attention while the window moves on, token by token. " * 3,
     "kind": "prose"},
    {"text": "def f(x):\n    return [y * 2 for y in x if y]\n" * 4, "kind": "code"},
]  # fmt: skip


@pytest.fixture(scope="module")
def texts_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("kv") / "texts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in TEXTS))
    return path


@pytest.fixture(scope="module")
def result(tiny, texts_file):
    """The three calls' middle one, on two texts of the tiny model."""
    return kv.run(tiny, texts_file, CONFIG)


def plain_nll(model, text: str, config: KVRunConfig) -> tuple[float, int]:
    """Mean NLL of the scored tokens (from `score_from` on) in a plain forward, and their
    count."""
    tokens = model.to_tokens(text, truncate=False, move_to_device=False)[0, : config.tokens]
    with torch.inference_mode():
        nll = model(tokens[None], return_type="loss", loss_per_token=True)[0]
    scored = nll[config.kv.score_from - 1 :]
    return float(scored.mean()), len(scored)


def test_three_calls_give_the_models_own_numbers(tiny, result):
    summary = result.summary()
    assert isinstance(result, Result)
    # the full cache is the plain forward, text by text and pooled
    table = result.table
    full = table[table.policy == "full"].set_index("text")
    plain = [plain_nll(tiny, row["text"], CONFIG) for row in TEXTS]
    for t, (nll, n) in enumerate(plain):
        assert full.loc[t, "n_scored"] == n
        assert math.isclose(full.loc[t, "perplexity"], math.exp(nll), rel_tol=1e-5)
    pooled_full = math.exp(sum(nll * n for nll, n in plain) / sum(n for _, n in plain))
    # the finding first: the policy closest to the full cache at the smallest budget
    assert list(summary)[0] == "finding"
    closest = summary["closest"]
    assert closest["budget"] == 8
    assert math.isclose(closest["full_perplexity"], pooled_full, rel_tol=1e-5)
    at_8 = {r["policy"]: r["perplexity"] for r in summary["pooled"] if r["budget"] == 8}
    assert set(at_8) == set(CONFIG.policies)
    assert closest["policy"] == min(at_8, key=at_8.get)
    assert closest["perplexity"] == at_8[closest["policy"]]
    assert f"{closest['perplexity']:.3f} against {pooled_full:.3f}" in summary["finding"]
    assert closest["policy"] in summary["finding"].split(":")[0]
    # a budget of 8 keys evicts: every policy reads at most 8 keys, and the numbers move
    evicting = table[table.policy != "full"]
    assert (evicting.mean_read <= evicting.budget).all()
    assert all(abs(p / pooled_full - 1) > 1e-4 for p in at_8.values())
    figure = result.figures()["kv"]
    assert isinstance(figure, Figure) and "2 texts" in figure.axes[0].get_title()


def test_the_table_is_the_policy_table_of_the_same_tokens(tiny, texts_file, result):
    from attn_sink_circuits.runs.provenance import texts_identity

    rows = [tiny.to_tokens(r["text"], truncate=False, move_to_device=False)[0] for r in TEXTS]
    kinds = [r["kind"] for r in TEXTS]
    expected = kv.policy_table(tiny, rows, CONFIG, kinds, progress=None)
    numbers = [c for c in expected.columns if c != "seconds"]
    pd.testing.assert_frame_equal(result.table[numbers], expected[numbers], rtol=1e-6)
    assert result.record["texts"] == texts_identity([r["text"] for r in TEXTS], kinds,
                                                    source=texts_file)  # fmt: skip
    # the earlier entry gives the same table; a list of texts too (of the plain kind)
    earlier = kv.run_kv(tiny, [r["text"] for r in TEXTS], kinds, CONFIG, progress=None)
    pd.testing.assert_frame_equal(earlier.table[numbers], expected[numbers], rtol=1e-6)
    listed = kv.run(tiny, [r["text"] for r in TEXTS], CONFIG.with_options(n_texts=1))
    assert list(listed.table.kind.unique()) == ["text"]
    first = expected[expected.text == 0]
    pd.testing.assert_frame_equal(
        listed.table[numbers[2:]], first[numbers[2:]], rtol=1e-6, check_dtype=False
    )


def test_save_writes_the_commands_files_named_by_the_result(result, tmp_path):
    from attn_sink_circuits.runs.io import read_marker

    out = result.save(tmp_path / "kv")
    assert sorted(p.name for p in out.iterdir() if p.name in kv.study.FILES) == sorted(
        kv.study.FILES
    )
    marker = read_marker(out)
    assert marker["run"] == {"measured": "kv", "model": result.record["model"]["key"]}
    saved = json.loads((out / "summary.json").read_text())
    assert saved["finding"] == result.summary()["finding"]
    assert saved["provenance"]["settings"]["budgets"] == [8, 24]
    table = pd.read_csv(out / "policies.csv")
    assert table.perplexity.tolist() == pytest.approx(result.table.perplexity.tolist())


@pytest.mark.parametrize(
    ("data", "config", "message"),
    [
        ([], CONFIG, "kv.run: data is a list; give a texts file"),
        ("missing.jsonl", CONFIG, "missing.jsonl: no such text file"),
        (None, CONFIG.with_options(budgets=(96,)), "no policy would evict anything"),
        (["a short text"], CONFIG, "texts [0] have no tokens after --score-from 32"),
    ],
)
def test_bad_input_is_refused_in_one_line(tiny, data, config, message):
    with pytest.raises(ValueError) as err:
        kv.run(tiny, data, config)
    assert message in str(err.value) and len(str(err.value).splitlines()) == 1


@pytest.mark.slow
def test_three_calls_on_smollm2_keep_its_plain_perplexity(smollm2):
    """The bundled long texts by default, cut short: the full cache's pooled perplexity is
    SmolLM2's plain perplexity of the same tokens."""
    from attn_sink_circuits.core.texts import read_texts

    config = KVRunConfig(
        policies=("streaming_llm", "sink_aware"),
        budgets=(16, 48),
        tokens=128,
        n_texts=1,
        kv=KVConfig(score_from=64),
    )
    result = kv.run(smollm2, None, config)
    nll, _ = plain_nll(smollm2, read_texts(kv.DEFAULT_TEXTS)[0], config)
    assert math.isclose(result.summary()["closest"]["full_perplexity"], math.exp(nll),
                        rel_tol=1e-4)  # fmt: skip
    assert result.summary()["closest"]["budget"] == 16
