"""Blocking the sinks against blocking as many other keys (`attn_sink_circuits.studies.kv.blocking`)."""

from __future__ import annotations

import pytest
import torch

from attn_sink_circuits.studies.kv.blocking import blocking_table, random_blocks, sink_blocks
from attn_sink_circuits.studies.kv.policies import causal

N = 40
SINKS = [(0,), (0, 9), (0, 9, 21), (0,)]


def test_sink_blocks_remove_exactly_the_sinks_from_later_queries():
    primary = sink_blocks(SINKS, N, "primary")
    assert all(b[1:, 0].all() and b.sum() == N - 1 for b in primary)
    secondary = sink_blocks(SINKS, N, "secondary")
    assert [int(b.sum()) for b in secondary] == [0, N - 10, (N - 10) + (N - 22), 0]
    assert not secondary[1][9, 9] and secondary[1][10, 9]  # a query never loses itself
    with pytest.raises(ValueError, match="target must be one of primary, secondary"):
        sink_blocks(SINKS, N, "tertiary")


@pytest.mark.parametrize("control", ["keys", "tokens"])
def test_controls_block_as_much_and_never_a_sink(control):
    blocks = sink_blocks(SINKS, N, "secondary")
    ctrl = random_blocks(blocks, SINKS, control, seed=0)
    for b, c in zip(blocks, ctrl, strict=True):
        assert not (c & ~causal(N).tril(-1)).any()  # earlier keys only
        assert not c[:, [0, 9, 21]].any()
        if control == "keys":  # the same count for every query that has enough other keys
            rows = torch.arange(N) > 24
            assert (c.sum(-1)[rows] == b.sum(-1)[rows]).all()
        else:
            assert int(c.any(0).sum()) == int(b.any(0).sum())
    again = random_blocks(blocks, SINKS, control, seed=0)
    other = random_blocks(blocks, SINKS, control, seed=1)
    assert all((a == c).all() for a, c in zip(again, ctrl, strict=True))
    assert any((a != c).any() for a, c in zip(other, ctrl, strict=True))


def test_in_a_planted_noop_sink_blocking_the_sink_matters_and_random_keys_do_not(tmp_path):
    from attn_sink_circuits.models.planted import planted_noop_sink_model

    model = planted_noop_sink_model(folder=tmp_path)
    torch.manual_seed(0)
    tokens = torch.randint(3, 200, (N,))
    tokens[0] = 1
    rows = blocking_table(model, tokens, [(0,)], score_from=4, seeds=(0, 1, 2))
    by = {(r.target, r.control, r.seed): r for r in rows}
    base = by[("none", "none", None)].nll
    sink = by[("primary", "sink", None)].nll
    assert abs(sink - base) > 0.5
    for control in ("keys", "tokens"):
        for seed in (0, 1, 2):
            assert abs(by[("primary", control, seed)].nll - base) < 0.02 * abs(sink - base)
    assert by[("primary", "keys", 0)].blocked == by[("primary", "sink", None)].blocked - 1
