"""The IOI task: seeded prompts with ABC partners, the vocabulary check, name positions, and on
the real default model's tokenizer: every word one token, names where the templates put them."""

from __future__ import annotations

import pytest
import torch

from attn_sink_circuits.studies.ioi.prompts import (
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


IO_LETTERS, S_LETTERS, OTHER_LETTERS = "ABCDEFGH", "PQRSTUVW", "JKLMNXYZ"


def letter_pairs(model, n: int = 8):
    """IOI-shaped pairs for the byte tokenizer: one-letter names (one token each), IO from
    IO_LETTERS, S from S_LETTERS, both orders; the corrupt text names three other letters."""
    from attn_sink_circuits.discovery.pairs import tokenize

    rows = []
    for i in range(n):
        io, s = IO_LETTERS[i % 8], S_LETTERS[(3 * i) % 8]
        a, b = (io, s) if i % 2 == 0 else (s, io)
        c = OTHER_LETTERS[i % 8], OTHER_LETTERS[(i + 1) % 8], OTHER_LETTERS[(i + 2) % 8]
        rows.append({"clean": f"when {a} and {b} met, {s} gave it to",
                     "corrupt": f"when {c[0]} and {c[1]} met, {c[2]} gave it to",
                     "answer": io, "wrong": s})  # fmt: skip
    return tokenize(model, rows, "letters")


def test_direct_effects_add_up_to_the_logit_difference(tiny):
    """The heads' direct effects, with the embedding's and the MLPs' (computed here from the
    cache, the final norm's scale written out by hand), sum to the model's logit difference."""
    from attn_sink_circuits.studies.ioi.name_movers import name_mover_table

    pairs = letter_pairs(tiny)
    heads = [(layer, h) for layer in range(4) for h in range(4)]
    table = name_mover_table(tiny, pairs, heads)
    assert [r["head"] for r in table] == [f"L{layer}.H{h}" for layer, h in heads]
    hf = tiny.original_model
    with torch.no_grad():
        logits, cache = tiny.run_with_cache(pairs.clean)
        rows = torch.arange(len(pairs))
        model_diff = (logits[rows, -1, pairs.answer] - logits[rows, -1, pairs.wrong]).mean()
        final = cache["ln_final.hook_in"][:, -1]
        norm = hf.model.norm
        scale = norm.weight * torch.rsqrt(
            final.pow(2).mean(-1, keepdim=True) + norm.variance_epsilon
        )
        read = hf.lm_head.weight[pairs.answer] - hf.lm_head.weight[pairs.wrong]  # [n, d]
        parts = [cache["hook_embed"][:, -1]] + [cache[f"blocks.{layer}.hook_mlp_out"][:, -1]
                                                 for layer in range(4)]  # fmt: skip
        others = sum(float(((p * scale) * read).sum(-1).mean()) for p in parts)
    heads_sum = sum(r["direct_effect"] for r in table)
    assert abs(model_diff) > 1e-3  # a random model, but not a zero difference
    assert heads_sum + others == pytest.approx(float(model_diff), abs=1e-4)
    assert all(r["direct_share"] == pytest.approx(r["direct_effect"] / float(model_diff), rel=1e-4)
               for r in table)  # fmt: skip
    for r in table:
        assert 0 <= r["attn_io"] <= 1 and r["attn_io"] + r["attn_s1"] + r["attn_s2"] <= 1 + 1e-6


def planted_name_mover(folder):
    """The tiny model with head L3.H0 planted as a name mover: tokens carry unit identity
    vectors (dims 1-16) that the unembedding reads back; IO letters carry a marker (dim 33) on
    which L3.H0 keys from every query, and its value/output weights copy the identity."""
    from attn_sink_circuits.models.tiny import N_SPECIAL, VOCAB, tiny_model

    model = tiny_model(folder=folder)
    hf = model.original_model
    gen = torch.Generator().manual_seed(1)
    vecs = torch.randn(VOCAB, 16, generator=gen)
    vecs = vecs / vecs.norm(dim=-1, keepdim=True)
    with torch.no_grad():
        emb = hf.model.embed_tokens.weight
        emb.zero_()
        emb[:, 0], emb[:, 1:17] = 1.0, vecs
        for letter in IO_LETTERS:
            emb[ord(letter) + N_SPECIAL, 33] = 1.0
        hf.lm_head.weight.zero_()
        hf.lm_head.weight[:, 1:17] = vecs
        attn = hf.model.layers[3].self_attn  # query head 0 reads key/value head 0
        attn.q_proj.weight[:16].zero_()
        attn.q_proj.weight[15, 0] = 3.0  # the slowest rotary pair: q.k barely turns
        attn.k_proj.weight[:16].zero_()
        attn.k_proj.weight[15, 33] = 3.0
        attn.v_proj.weight[:16].zero_()
        attn.v_proj.weight[:16, 1:17] = torch.eye(16)
        attn.o_proj.weight[:, :16].zero_()
        attn.o_proj.weight[1:17, :16] = torch.eye(16)
    return model


def test_planted_name_mover_is_found(tmp_path):
    from attn_sink_circuits.studies.ioi.name_movers import (
        NameMoverRule,
        is_name_mover,
        name_mover_table,
    )

    model = planted_name_mover(tmp_path)
    pairs = letter_pairs(model)
    heads = [(layer, h) for layer in range(4) for h in range(4)]
    table = {r["head"]: r for r in name_mover_table(model, pairs, heads)}
    planted = table.pop("L3.H0")
    assert planted["attn_io"] > 0.9 and planted["attn_s1"] + planted["attn_s2"] < 0.05
    assert planted["copy_score"] == 1.0
    assert planted["direct_effect"] > 1.0 and planted["direct_share"] > 0.5
    assert planted["name_mover"]
    assert not any(r["name_mover"] for r in table.values())
    assert max(r["copy_score"] for r in table.values()) < 0.5
    # Each threshold alone turns the verdict: the planted row with one value just past it.
    rule = NameMoverRule()
    for key, value in (("attn_io", 0.19), ("attn_s2", 0.51), ("direct_share", 0.04),
                       ("direct_effect", -1.0), ("copy_score", 0.49)):  # fmt: skip
        assert not is_name_mover({**planted, key: value}, rule), key
    assert is_name_mover(planted, rule)
