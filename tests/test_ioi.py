"""The IOI task: seeded prompts with ABC partners, the vocabulary check, name positions, and on
the real default model's tokenizer: every word one token, names where the templates put them."""

from __future__ import annotations

import pytest
import torch

from circuits.tasks.ioi import (
    NAMES,
    TEMPLATES,
    check_vocabulary,
    ioi_pairs,
    ioi_prompts,
    name_positions,
)


def test_prompts_are_seeded_and_corrupted_abc():
    a, b, c = ioi_prompts(40, seed=3), ioi_prompts(40, seed=3), ioi_prompts(40, seed=4)
    assert a == b and a != c
    assert {p.order for p in a} == {"ABBA", "BABA"}
    assert len({p.template for p in a}) > 3
    for p in a:
        words = p.clean.replace(",", " ").replace(".", " ").split()
        assert words.count(p.s) == 2 and words.count(p.io) == 1  # S repeated, IO once
        first = words.index(p.io) < words.index(p.s)
        assert first == (p.order == "ABBA")
        bad = p.corrupt.replace(",", " ").replace(".", " ").split()
        used = [w for w in bad if w in NAMES]
        assert len(used) == 3 and len(set(used)) == 3  # three distinct names, none repeated
        assert p.io not in used and p.s not in used
        assert p.row()["answer"] == f" {p.io}" and p.row()["wrong"] == f" {p.s}"
    with pytest.raises(ValueError, match="at least 5 names"):
        ioi_prompts(2, names=NAMES[:4])


def test_vocabulary_check_names_multi_token_words(tiny):
    bad = check_vocabulary(tiny.tokenizer)  # a byte tokenizer: every word is several tokens
    assert set(bad) == {"names", "places", "objects"} and "Mary" in bad["names"]
    with pytest.raises(ValueError, match="not one token for this tokenizer"):
        ioi_pairs(tiny, 4)


@pytest.mark.slow
def test_ioi_on_the_default_model(smollm2):
    assert check_vocabulary(smollm2.tokenizer) == {}
    pairs, prompts = ioi_pairs(smollm2, 16, seed=0)
    # Seeded random draws: 16 prompts need not cover all 8 templates, but must mix several.
    used = {p.template for p in prompts}
    assert pairs.shape[0] == 16 and used <= set(range(len(TEMPLATES))) and len(used) >= 4
    where = name_positions(pairs)
    rows = torch.arange(16)
    assert torch.equal(pairs.clean[rows, torch.tensor(where["io"])], pairs.answer)
    assert torch.equal(pairs.clean[rows, torch.tensor(where["s2"])], pairs.wrong)
    assert all(s1 < s2 for s1, s2 in zip(where["s1"], where["s2"], strict=True))
    assert torch.equal(pairs.clean[:, -1], pairs.corrupt[:, -1])  # same template, same end
