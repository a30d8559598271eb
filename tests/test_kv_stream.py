"""Bounded-memory streaming (`attn_sink_circuits.studies.kv.stream`): the same numbers as the full-pattern
evaluation, from chunks of queries over the few keys a policy can keep."""

from __future__ import annotations

import pytest
import torch

from attn_sink_circuits.studies.kv import KVConfig, keep_masks, masked_nll
from attn_sink_circuits.studies.kv.policies import LOCAL, CacheView, get_policy
from attn_sink_circuits.studies.kv.stream import ROWS, Plan, candidates, streaming_nll

N = ROWS + 60  # two chunks of queries
CONFIG = KVConfig(sinks=2, score_from=8)
SINKS = [(0,), (0, 17), (0, 17, 140), (0, 140)]


@pytest.fixture(scope="module")
def text():
    torch.manual_seed(2)
    tokens = torch.randint(3, 200, (N,))
    tokens[0] = 1
    return tokens


@pytest.mark.parametrize("policy", sorted(LOCAL))
def test_a_chunk_of_rows_is_those_rows_of_the_whole_mask(policy):
    whole = get_policy(policy)(CacheView(2, N, None, SINKS[2]), 24, CONFIG)
    plan = Plan(policy, 24, CONFIG, N, tuple(SINKS))
    for q0, q1 in ((0, 10), (100, 160), (N - 7, N)):
        cols = candidates(plan, 2, q0, q1)
        view = CacheView(2, N, None, SINKS[2], queries=torch.arange(q0, q1), keys=cols)
        part = get_policy(policy)(view, 24, CONFIG)
        assert (part == whole[q0:q1][:, cols]).all()
        assert whole[q0:q1].sum() == part.sum()  # no kept key outside the candidates


@pytest.mark.parametrize("policy", sorted(LOCAL))
def test_streaming_equals_the_full_pattern_evaluation(tiny, text, policy):
    sinks = SINKS if policy == "sink_aware" else None
    masks = keep_masks(tiny, text, policy, 24, CONFIG, sinks)
    full = masked_nll(tiny, text, masks)
    streamed = streaming_nll(tiny, text, policy, 24, CONFIG, sinks)
    assert float((streamed - full).abs().max()) < 1e-5
    with torch.inference_mode():
        plain = float(tiny(text[None], return_type="loss"))
    if policy != "full":  # the budget binds
        assert abs(float(streamed.mean()) - plain) > 1e-4


def test_streaming_refuses_what_it_cannot_do_in_one_line(tiny, text):
    with pytest.raises(ValueError, match="heavy_hitters decides the whole text at once"):
        streaming_nll(tiny, text, "heavy_hitters", 24, CONFIG)
    with pytest.raises(ValueError, match="streaming mode with positions kept"):
        streaming_nll(tiny, text, "window", 24, CONFIG.with_options(positions="reindexed"))
    with pytest.raises(ValueError, match="sink_aware needs the measured sinks of each of the 4"):
        streaming_nll(tiny, text, "sink_aware", 24, CONFIG)
    with pytest.raises(ValueError, match="in chunks only full, sink_aware, streaming_llm"):
        get_policy("heavy_hitters")(CacheView(0, N, queries=torch.arange(3)), 8, CONFIG)
