"""Known answers: Tracr-compiled programs loaded from the committed fixtures (no jax)."""

from __future__ import annotations

import pytest
import torch

from circuits.core.sites import hook_name
from circuits.models.compiled import load_compiled

PROGRAMS = ("reverse", "frac_prevs", "hist", "sort")


@pytest.fixture(scope="module")
def compiled():
    return {name: load_compiled(name) for name in PROGRAMS}


@pytest.mark.parametrize("name", PROGRAMS)
def test_residual_stream_equals_tracr_on_every_input(compiled, name):
    """After every attention and MLP, on every input of every length up to the maximum, the
    bridge's residual stream is Tracr's (atol 1e-5), and so is the decoded output."""
    c = compiled[name]
    model = c.model
    hooks = [hook_name(kind, layer) for layer in range(model.cfg.n_layers)
             for kind in ("resid_mid", "resid_post")]  # fmt: skip
    n_inputs = 0
    for length in c.lengths:
        tokens = c.tokens(length)
        logits, cache = model.run_with_cache(tokens, names_filter=hooks)
        ours = torch.stack([cache[h] for h in hooks], 1)
        theirs = c.residuals(length)
        assert ours.shape == theirs.shape
        torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=0)
        out = c.tracr_output(length)[:, 1:]
        if c.meta["output"]["categorical"]:
            assert torch.equal(logits.argmax(-1)[:, 1:].float(), out)
        else:
            torch.testing.assert_close(logits[..., 0][:, 1:], out, atol=1e-5, rtol=0)
        n_inputs += tokens.shape[0]
    vocab = len(c.meta["vocab"])
    assert n_inputs == sum(vocab**n for n in c.lengths)


def test_reverse_decodes_and_tokenizes(compiled):
    c = compiled["reverse"]
    tokens = c.model.to_tokens("1 2 3")
    assert torch.equal(tokens, c.encode([1, 2, 3]))
    logits = c.model(tokens)
    values = [v for v, _ in sorted(c.meta["output"]["encoding"], key=lambda p: p[1])]
    assert [values[i] for i in logits.argmax(-1)[0, 1:].tolist()] == [3, 2, 1]


def test_frac_prevs_reads_one_output_column(compiled):
    c = compiled["frac_prevs"]
    logits = c.model(c.encode(["x", "w", "x", "x"]))
    assert logits.shape[-1] == 1
    torch.testing.assert_close(logits[0, 1:, 0], torch.tensor([1.0, 1 / 2, 2 / 3, 3 / 4]),
                               atol=1e-5, rtol=0)  # fmt: skip


def test_bad_names_and_values_say_so(compiled):
    with pytest.raises(ValueError, match="no compiled model 'nope'.*reverse"):
        load_compiled("nope")
    with pytest.raises(ValueError, match="not in its vocabulary"):
        compiled["reverse"].encode([1, 7])
