"""Secondary-sink detection rules: the presets on hand-made hidden states with known answers."""

from __future__ import annotations

import math

import pytest
import torch

from attn_sink_circuits.sinks.rules import (
    RULES,
    Rule,
    clipper_window,
    compare_rules,
    comparison_frame,
    detect,
    get_rule,
    layer_ranges,
    reference_sink,
)
from attn_sink_circuits.sinks.secondary import lifetime_bounds, lifetime_label

N_LAYERS = 24
SINK_NORM = [1.0] * 6 + [10.0] * 12 + [2.0] * 6
"""Position 0's norm per layer: it jumps into layer 6 and drops into layer 18, so the authors'
clipper searches layers 6..17 (d[5] = +9 is the largest jump, d[17] = -8 the largest drop)."""
COSINES = {
    1: {layer: -0.99 for layer in range(6, 12)},  # anti-aligned: only |cos| passes
    2: {layer: 0.99 for layer in range(0, 6)},  # aligned before the clipper window
    3: {layer: 0.99 for layer in (6, 7, 8, 10, 11, 12)},  # a gap at layer 9
    4: {layer: 0.92 for layer in range(6, 11)},  # between the code's 0.9 and the paper's 0.95
    5: {layer: 0.99 for layer in range(6, 16)},  # 10 layers: bos_sink for the authors at L = 24
}
"""Cosine with position 0 per (position, layer); every other state is orthogonal to it."""


def hand_states() -> torch.Tensor:
    """[layer, pos, 2]: the sink along x with SINK_NORM, the others unit vectors at the
    COSINES angles (orthogonal to the sink where no cosine is given)."""
    states = torch.zeros(N_LAYERS, 6, 2)
    states[:, 0, 0] = torch.tensor(SINK_NORM)
    states[:, 1:, 1] = 1.0
    for pos, by_layer in COSINES.items():
        for layer, c in by_layer.items():
            states[layer, pos] = torch.tensor([c, math.sqrt(1 - c * c)])
    return states


def events(detection) -> list[tuple[int, int, int, str]]:
    return [(e.position, e.l_start, e.lifetime, e.label) for e in detection.events]


def test_authors_code_reproduces_a_hand_computed_example():
    states = hand_states()
    authors = detect(states, "authors_code", final_state=states[-1])
    assert authors.sink == 0
    assert authors.window == (6, 18)
    # Labels at L = 24: 4 < n < 9 secondary, n >= 9 bos_sink (primary-like), else noise.
    assert events(authors) == [
        (1, 6, 6, "secondary"),  # |cos| = 0.99 passes although cos = -0.99
        (3, 6, 6, "secondary"),  # layers 6-8 and 10-12 counted together
        (4, 6, 5, "secondary"),  # 0.92 > 0.9
        (5, 6, 10, "primary-like"),
    ]
    assert authors.events[1].layers == (6, 7, 8, 10, 11, 12)
    paper = detect(states, "paper")
    assert paper.window == (0, N_LAYERS)
    assert events(paper) == [
        (2, 0, 6, "secondary"),  # outside the clipper window: only the paper finds it
        (3, 6, 3, "noise"),  # the gap splits position 3 into two short runs
        (3, 10, 3, "noise"),
        (5, 6, 10, "primary-like"),
    ]


@pytest.mark.parametrize(
    ("option", "value", "changed"),
    [
        # Each option of the authors' code alone, applied to the paper's rule on the same states.
        ("clipper", True, [(3, 6, 3, "noise"), (3, 10, 3, "noise"), (5, 6, 10, "primary-like")]),
        ("absolute_cos", True, [(1, 6, 6, "secondary"), (2, 0, 6, "secondary"),
                                (3, 6, 3, "noise"), (3, 10, 3, "noise"),
                                (5, 6, 10, "primary-like")]),
        ("consecutive", False, [(2, 0, 6, "secondary"), (3, 6, 6, "secondary"),
                                (5, 6, 10, "primary-like")]),
        ("tau", 0.9, [(2, 0, 6, "secondary"), (3, 6, 3, "noise"), (3, 10, 3, "noise"),
                      (4, 6, 5, "secondary"), (5, 6, 10, "primary-like")]),
    ],
)  # fmt: skip
def test_each_authors_option_alone_changes_the_papers_answer(option, value, changed):
    states = hand_states()
    paper = events(detect(states, "paper"))
    alone = events(detect(states, get_rule("paper", **{option: value})))
    assert alone == changed
    assert alone != paper


def test_library_relabels_the_papers_events_by_depth():
    states = hand_states()
    library = detect(states, "library")
    # Same events as the paper (same runs), labels scaled to L = 24: (2.4, 15).
    assert [e[:3] for e in events(library)] == [e[:3] for e in events(detect(states, "paper"))]
    assert [e[3] for e in events(library)] == ["secondary"] * 4
    assert lifetime_bounds(24, scale=False) == pytest.approx((4.0, 9.0))
    assert lifetime_bounds(30, scale=False) == pytest.approx((4.0, 15.0))
    assert [lifetime_label(n, 30, scale=False) for n in (4, 5, 14, 15)] == [
        "noise", "secondary", "secondary", "primary-like",
    ]  # fmt: skip


def test_reference_sink_candidates_and_positions_after_it():
    states = hand_states()
    states[:, 1] *= 8.0  # position 1 now has the largest mean norm among 0, 1, 2
    states[:, 4] *= 50.0  # and position 4 the largest anywhere
    norms = states.norm(dim=-1)
    assert reference_sink(norms) == 4
    assert reference_sink(norms, (0, 1, 2)) == 1
    assert reference_sink(norms, (0, 1)) == 1
    assert reference_sink(norms, (0, 7)) == 0  # candidates past the text are ignored
    with pytest.raises(ValueError, match="inside a 6-token text"):
        reference_sink(norms, (6, 7))
    # With the sink at 1, position 0 can pass only when positions before the sink are tested.
    states[2:5, 0] = states[2:5, 1] / 8.0  # position 0 along the sink at layers 2-4
    before = get_rule("library", sink_candidates=(0, 1, 2))
    assert detect(states, before).sink == 1
    assert (0, 2, 3, "secondary") in events(detect(states, before))
    after = get_rule(before, after_sink_only=True)
    assert [e for e in events(detect(states, after)) if e[0] == 0] == []
    assert events(detect(states, after)) == [e for e in events(detect(states, before)) if e[0] > 1]
    assert Rule.authors_code(chat_template=False).sink_candidates == (0, 1)


def test_clipper_window_edges():
    assert clipper_window(torch.tensor(SINK_NORM)) == (6, 18)
    # The largest drop right after the jump: a window of one layer.
    assert clipper_window(torch.tensor([1.0, 9.0, 2.0, 2.5])) == (1, 2)
    # The largest jump into the last layer leaves nothing to search.
    assert clipper_window(torch.tensor([1.0, 2.0, 9.0])) == (2, 2)
    with pytest.raises(ValueError, match="at least 2 layers"):
        clipper_window(torch.tensor([1.0]))


def test_final_norm_replaces_the_last_layer():
    states = hand_states()
    final = states[-1].clone()
    final[2] = torch.tensor([0.99, math.sqrt(1 - 0.99**2)])  # position 2 aligned after the norm
    with_norm = get_rule("library", final_norm=True)
    assert (2, N_LAYERS - 1, 1, "noise") in events(detect(states, with_norm, final))
    assert (2, N_LAYERS - 1, 1, "noise") not in events(detect(states, "library"))
    with pytest.raises(ValueError, match="after the final norm"):
        detect(states, with_norm)


def test_compare_rules_counts_each_preset_on_the_same_states():
    states = hand_states()
    table = compare_rules(
        [states, states], [states[-1]] * 2, prompt_lens=[3, 6], natural_ends=[4, None]
    ).set_index("rule")
    assert list(table.index) == list(RULES)
    assert table.loc["authors_code", "events"] == 8
    assert table.loc["authors_code", "secondary"] == 6
    assert table.loc["authors_code", "primary-like"] == 2
    # Text 0: prompt = positions 0-2 (secondary at 1 in prompt; 3, 4 generated); text 1: all prompt.
    assert table.loc["authors_code", "secondary_prompt"] == 1 + 3
    assert table.loc["authors_code", "secondary_generated"] == 2
    assert table.loc["authors_code", "secondary_after_end"] == 1  # position 4 of text 0
    assert table.loc["authors_code", "tau"] == 0.9 and table.loc["paper", "tau"] == 0.95
    assert table.loc["paper", "noise"] == 4
    assert table.loc["library", "secondary"] == 8
    assert table.loc["authors_code", "windows"] == "6-17"
    assert table.loc["paper", "windows"] == "0-23"
    assert table.loc["paper", "sinks"] == "0"
    with pytest.raises(ValueError, match="need final_states"):
        compare_rules([states])
    with pytest.raises(ValueError, match="2 prompt lengths for 1 texts"):
        compare_rules([states], rules=["paper"], prompt_lens=[3, 4])
    found = {"paper": [detect(states, "paper")] * 2}
    unique = [[True] * 6, [True, True, False, True, True, True]]  # paper: position 2 only
    assert comparison_frame(found, unique=unique).loc[0, "secondary_unique"] == 1 + 0
    with pytest.raises(ValueError, match="one detection per text"):
        comparison_frame({"paper": found["paper"], "library": found["paper"][:1]})


def test_bad_rules_are_refused():
    with pytest.raises(ValueError, match="unknown rule 'wong'; known rules: paper, authors_code"):
        get_rule("wong")
    with pytest.raises(ValueError, match="unknown rule options"):
        get_rule("paper", window=3)
    with pytest.raises(ValueError, match="tau must be in"):
        Rule(tau=1.5)
    with pytest.raises(ValueError, match="sink_candidates"):
        Rule(sink_candidates=(0, 0))
    with pytest.raises(ValueError, match="sink_candidates"):
        Rule(sink_candidates=(-1,))
    with pytest.raises(ValueError, match="noise_fraction"):
        Rule(noise_fraction=0.7, primary_fraction=0.4)
    with pytest.raises(TypeError, match="clipper"):
        Rule(clipper=1)
    assert get_rule("paper", tau=0.9).name == "paper+tau=0.9"
    assert get_rule("paper") is RULES["paper"]
    assert get_rule("paper", tau=0.95, clipper=False) is RULES["paper"]  # nothing changes
    assert get_rule(RULES["authors_code"], sink_candidates=[0, 1]).sink_candidates == (0, 1)


def test_rules_describe_themselves_and_have_one_home():
    from attn_sink_circuits.sinks import constants
    from attn_sink_circuits.studies.secondary.config import SecondaryConfig

    assert tuple(RULES) == constants.RULE_NAMES
    assert SecondaryConfig.__dataclass_fields__["rule"].metadata["choices"] == tuple(RULES)
    assert RULES["authors_code"].tau == constants.AUTHORS_TAU
    assert RULES["paper"].tau == RULES["library"].tau == constants.TAU
    assert RULES["authors_code"].describe(30) == (
        "authors_code: |cos| > 0.9 with the sink (largest mean norm among positions 0, 1, 2), "
        "positions after it, passing layers counted, layers of the sink-clipper window, "
        "secondary if 4 < lifetime < 15, last layer after the final norm"
    )
    assert RULES["library"].describe(30).endswith("secondary if 3 < lifetime < 18.75")
    assert RULES["paper"].describe(8).endswith("4 < lifetime < -7 (none at this depth)")
    assert layer_ranges([2, 3, 4, 7, 9, 10]) == "2-4,7,9-10" and layer_ranges([]) == ""
