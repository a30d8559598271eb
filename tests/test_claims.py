"""The claims table: each claim kind gives "holds" on a tiny model where it is built in and "does
not hold" on a control built without it; the verdict logic; the CLI."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from attn_sink_circuits.models.planted import P0_TEXTS, planted_p0_model
from attn_sink_circuits.stats import MIN_N
from attn_sink_circuits.studies.claims import ClaimsConfig, claims
from attn_sink_circuits.studies.claims.inputs import Basis
from attn_sink_circuits.studies.claims.secondary import SPECS as SECONDARY_SPECS
from attn_sink_circuits.studies.claims.secondary import UNMEASURED, read_secondary, secondary_claims
from attn_sink_circuits.studies.claims.table import (
    AUTO,
    FAILS,
    HOLDS,
    NOT_APPLICABLE,
    UNDECIDED,
    Claim,
    ClaimsTable,
    claim_row,
    mean_interval,
)
from attn_sink_circuits.studies.claims.verdict import (
    Interval,
    counts,
    decisive,
    either,
    judge,
    side,
)

CONFIG = ClaimsConfig(n_texts=8, n_tokens=24)
MARKER = 34  # a residual dimension the planted layout leaves free


def _verdicts(model) -> dict[str, str]:
    return claims(model, list(P0_TEXTS), CONFIG).table.verdicts()


def _constant_values(p):
    """Control: every head of blocks 0-1 reads only the constant direction as its value, so its
    output is the same at every position (nothing can single out P0, no cone)."""
    with torch.no_grad():
        for layer in (0, 1):
            v = p.model.original_model.model.layers[layer].self_attn.v_proj.weight
            v.zero_()
            v[:, p.layout.const] = 1.0
    return p.model


def _semantic(p, write: float = 0.06):
    """Control: the P0 jump comes from the BOS token itself (a marker only <bos> carries, read by
    one neuron of MLP 1 that writes the sink direction), not from position."""
    hf = p.model.original_model
    with torch.no_grad():
        hf.model.embed_tokens.weight[1, MARKER] = 1.0
        m, n = hf.model.layers[1].mlp, 40
        for w in (m.gate_proj.weight[n], m.up_proj.weight[n], m.down_proj.weight[:, n]):
            w.zero_()
        m.gate_proj.weight[n, MARKER], m.gate_proj.weight[n, p.layout.const] = 8.0, -4.0
        m.up_proj.weight[n, MARKER] = 1.0
        m.down_proj.weight[p.layout.sink, n] = write
    return p.model


def _token_keys(p, gain: float = 12.0):
    """Control: the late heads key on the BOS token's identity, not on the P0 state's direction
    (which the MLP still writes)."""
    hf = p.model.original_model
    d_head = p.model.cfg.d_model // p.model.cfg.n_heads
    bos = hf.model.embed_tokens.weight[1, p.layout.token].clone()
    with torch.no_grad():
        for layer in p.sink_layers:
            k_proj = hf.model.layers[layer].self_attn.k_proj.weight
            for kk in range(p.model.cfg.n_key_value_heads):
                k = k_proj[kk * d_head : (kk + 1) * d_head]
                k.zero_()
                k[d_head - 1, p.layout.token] = gain * bos
    return p.model


def _local_head(p, gain: float = 5.0, pair: int = 2):
    """Control: the planted head attends only to the last ~3 positions (query and key read the
    constant direction in a rotary pair turning 0.1 rad per position), so P0, the only position
    with a single key, still stands out and the jump forms, but the head is not spread."""
    a = p.model.original_model.model.layers[0].self_attn
    d_head = p.model.cfg.d_model // p.model.cfg.n_heads
    with torch.no_grad():
        for w in (a.q_proj.weight[:d_head], a.k_proj.weight[:d_head]):
            w.zero_()
            w[pair, p.layout.const] = gain
    return p.model


def _offset_values(p, offset: float = 4.0):
    """Control: the planted head's last value dimension also reads the constant direction
    (`offset`) and writes it onto a free residual dimension the MLP does not read, so every
    position's output is dominated by the same vector: the head still carries the jump (the MLP
    squares its token part) but its P0 output is neither larger nor differently directed."""
    a = p.model.original_model.model.layers[0].self_attn
    last = p.model.cfg.d_model // p.model.cfg.n_heads - 1
    with torch.no_grad():
        a.v_proj.weight[last, p.layout.const] = offset
        col = a.o_proj.weight[:, last]
        scale = col[p.layout.scratch.start + last].item()
        col.zero_()
        col[MARKER] = scale
    return p.model


def _no_bos(p):
    """Control: the model reads its texts without a BOS token, so P0 is each text's first
    character and the planted head's P0 output is that character's vector."""
    p.model.circuits_info = dataclasses.replace(p.model.circuits_info, prepend_bos=False)
    return p.model


def _token_direction(p, write: float = 0.06):
    """Control (no BOS): MLP 1 writes sign(z) z^2 of each scratch coordinate back onto that
    coordinate instead of |z|^2 onto the sink direction, so the P0 norm still jumps but the
    formed state points along the first token's vector."""
    m, lay = p.model.original_model.model.layers[1].mlp, p.layout
    with torch.no_grad():
        for j in range(lay.scratch.stop - lay.scratch.start):
            for k, sign in ((2 * j, 1.0), (2 * j + 1, -1.0)):
                m.down_proj.weight[:, k] = 0.0
                m.down_proj.weight[lay.scratch.start + j, k] = sign * write
    return _no_bos(p)


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """The planted P0 circuit with a P0 norm jump (MLP 1 writes 10x the default)."""
    return planted_p0_model(folder=tmp_path_factory.mktemp("claims"), amplify=10)


@pytest.fixture(scope="module")
def planted_claims(planted):
    return claims(planted.model, list(P0_TEXTS), CONFIG)


def test_planted_circuit_holds_where_built_in(planted, planted_claims):
    v = planted_claims.table.verdicts()
    built_in = [
        "location.first_two_blocks", "identification.spread_heads_carry_jump",
        "identification.p0_output_distinct", "amplification.mlps_carry_jump",
        "amplification.fixed_direction_variants", "cone.p0_attention_output_larger",
        "reading.keys_read_p0_direction", "reading.circuit_writes_direction",
    ]  # fmt: skip
    assert {c: v[c] for c in built_in} == dict.fromkeys(built_in, HOLDS)
    # With BOS at P0 every text's P0 is the same: the rows across texts are 1 by construction.
    frame = planted_claims.frame().set_index("claim")
    for claim in ("identification.same_across_texts", "amplification.fixed_direction_texts"):
        assert v[claim] == NOT_APPLICABLE and frame.loc[claim, "detail"].startswith(
            "1 by construction"
        ), claim
    # The planted MLP 1 forms the state: block 1, in every text (seed 001's first two blocks).
    where = frame.loc["location.first_two_blocks"]
    assert (where.value, where.n, where.threshold_value) == (1.0, CONFIG.n_texts, 1.0)
    # The planted head copies the first token's identity: its P0 output is distinct by norm
    # for every first token, but points elsewhere for each one. Not built in, so not claimed.
    assert v["identification.same_across_first_tokens"] == FAILS
    shares = planted_claims.table.tables["jump_shares"].set_index("component").share
    assert shares["L0.H0"] > 0.9 and shares["L1.MLP"] > 0.8  # the planted head and MLP
    others = shares.drop(["L0.H0", "L1.MLP", "L0.H1"])  # L0.H1 shares H0's key/value head
    assert others.abs().max() < 0.05
    rows = planted_claims.frame().set_index("claim")
    assert rows.loc["identification.spread_heads_carry_jump", "detail"].startswith(
        "carriers (jump share): L0.H0"
    )
    decided = rows[rows.verdict != NOT_APPLICABLE]
    assert decided.value.notna().all() and (decided.low <= decided.value + 1e-9).all()
    assert (decided.n == CONFIG.n_texts).all()  # every decided P0 row is over the texts


JUMP_PREMISED = (
    "location.first_two_blocks", "identification.spread_heads_carry_jump", "identification.p0_output_distinct",
    "identification.same_across_texts", "identification.same_across_first_tokens",
    "amplification.fixed_direction_texts", "amplification.fixed_direction_variants",
    "reading.circuit_writes_direction",
)  # fmt: skip
"""The rows that describe the P0 norm jump's makers or the formed state: not applicable
without a jump."""


def test_constant_values_control_breaks_the_cone_and_the_jump(tmp_path):
    result = claims(_constant_values(planted_p0_model(folder=tmp_path, amplify=10)),
                    list(P0_TEXTS), CONFIG)  # fmt: skip
    rows = result.frame().set_index("claim")
    cone = rows.loc["cone.p0_attention_output_larger"]
    assert cone.verdict == FAILS and cone.value < CONFIG.cone_ratio
    amp = rows.loc["amplification.mlps_carry_jump"]
    assert amp.verdict == FAILS and amp.threshold == "jump_factor"
    assert amp.value < CONFIG.jump_factor  # nothing singles out P0, so nothing to amplify


def test_no_jump_makes_the_premised_rows_not_applicable(tmp_path):
    """Without a P0 norm jump the claim about the jump itself (MLPs amplify the P0 norm) does
    not hold, with the growth as its number; the rows about the jump's makers or the formed
    state are not applicable and say why."""
    result = claims(planted_p0_model(folder=tmp_path, amplify=0).model, list(P0_TEXTS), CONFIG)
    rows = result.frame().set_index("claim")
    amp = rows.loc["amplification.mlps_carry_jump"]
    assert amp.verdict == FAILS and amp.threshold == "jump_factor"
    assert amp.value == pytest.approx(result.run["p0_norm_growth"], rel=1e-3)
    assert amp.value < CONFIG.jump_factor and "no P0 norm jump" in amp.detail
    for claim in JUMP_PREMISED:
        assert rows.loc[claim, "verdict"] == NOT_APPLICABLE, claim
        assert rows.loc[claim, "detail"].startswith("no P0 norm jump"), claim
        assert math.isnan(rows.loc[claim, "value"]), claim  # no number for an absent premise
    # Claims that do not presuppose the jump are still decided on their numbers.
    assert rows.loc["cone.p0_attention_output_larger", "verdict"] in (HOLDS, FAILS, UNDECIDED)
    assert rows.loc["reading.keys_read_p0_direction", "verdict"] in (HOLDS, FAILS, UNDECIDED)
    assert "**not applicable** (no P0 norm jump" in result.table.markdown()


def test_no_carrier_head_fails_the_claim_and_leaves_the_rest_not_applicable(tmp_path):
    # The semantic control's jump is made by MLP 1; its largest head share is ~0.26.
    model = _semantic(planted_p0_model(folder=tmp_path, amplify=0))
    result = claims(model, list(P0_TEXTS), CONFIG.with_options(carry_share=0.5))
    rows = result.frame().set_index("claim")
    spread = rows.loc["identification.spread_heads_carry_jump"]
    assert spread.verdict == FAILS and spread.threshold == "carry_share"
    assert 0 < spread.value < 0.5 and "no head carries" in spread.detail
    for claim in JUMP_PREMISED[2:5]:
        assert rows.loc[claim, "verdict"] == NOT_APPLICABLE, claim
        assert "no head carries >= carry_share" in rows.loc[claim, "detail"], claim
    assert rows.loc["amplification.mlps_carry_jump", "verdict"] == HOLDS


def test_local_head_control_carries_the_jump_without_spreading(tmp_path):
    result = claims(_local_head(planted_p0_model(folder=tmp_path, amplify=10)), list(P0_TEXTS),
                    CONFIG)  # fmt: skip
    rows = result.frame().set_index("claim")
    assert result.run["p0_norm_jump"]
    shares = result.table.tables["jump_shares"].set_index("component").share
    assert shares["L0.H0"] > 0.9  # it still makes the jump ...
    spread = rows.loc["identification.spread_heads_carry_jump"]
    assert spread.verdict == FAILS and spread.value < 0.05  # ... but attends only locally
    distinct = rows.loc["identification.p0_output_distinct"]
    assert distinct.verdict == HOLDS and distinct.threshold == "distinct_cos"
    assert distinct.sense == "<=" and distinct.high <= CONFIG.distinct_cos
    assert "distinct by direction" in distinct.detail  # the rule's second branch decides


def test_offset_values_control_is_not_distinct(tmp_path):
    model = _offset_values(planted_p0_model(folder=tmp_path, amplify=40))
    rows = claims(model, list(P0_TEXTS), CONFIG).frame().set_index("claim")
    carry = rows.loc["identification.spread_heads_carry_jump"]
    assert carry.verdict == HOLDS and carry.detail.startswith("carriers (jump share): L0.H0")
    distinct = rows.loc["identification.p0_output_distinct"]
    assert distinct.verdict == FAILS and distinct.value < 1.1 and "not distinct" in distinct.detail
    # The shared offset also makes its P0 output (nearly) the same whatever the first token:
    # the rule reads the cosine, not why it is high.
    assert rows.loc["identification.same_across_first_tokens", "verdict"] == HOLDS


def test_without_bos_the_p0_output_and_state_follow_the_first_token(tmp_path):
    plain = claims(_no_bos(planted_p0_model(folder=tmp_path / "a", amplify=10)),
                   list(P0_TEXTS), CONFIG)  # fmt: skip
    assert plain.run["p0"] == "no_bos"
    v = plain.table.verdicts()
    # The head copies each text's first character; the MLP squares it onto one direction.
    assert v["identification.same_across_texts"] == FAILS
    assert v["amplification.fixed_direction_texts"] == HOLDS
    token = claims(_token_direction(planted_p0_model(folder=tmp_path / "b", amplify=10)),
                   list(P0_TEXTS), CONFIG)  # fmt: skip
    rows = token.frame().set_index("claim")
    assert token.run["p0_norm_jump"] and rows.loc["amplification.mlps_carry_jump"].verdict == HOLDS
    for claim in ("amplification.fixed_direction_texts", "amplification.fixed_direction_variants"):
        assert rows.loc[claim, "verdict"] == FAILS and rows.loc[claim, "value"] < 0.5, claim


def test_semantic_control_has_no_fixed_direction_across_first_tokens(tmp_path):
    v = _verdicts(_semantic(planted_p0_model(folder=tmp_path, amplify=0)))
    assert v["amplification.mlps_carry_jump"] == HOLDS  # the jump is there, made by the token
    assert v["amplification.fixed_direction_variants"] == FAILS
    assert v["identification.same_across_first_tokens"] == FAILS


def test_token_keys_control_does_not_read_the_p0_direction(tmp_path):
    result = claims(_token_keys(planted_p0_model(folder=tmp_path, amplify=10)), list(P0_TEXTS),
                    CONFIG)  # fmt: skip
    row = result.frame().set_index("claim").loc["reading.keys_read_p0_direction"]
    assert row.verdict == FAILS and row.value < CONFIG.read_share
    split = result.table.tables["score_split"]
    assert len(split) == 8  # the late heads still attend to P0, through the token's keys
    assert min(sum(s) / len(s) for s in split.key_share) > 0.5


def test_thresholds_decide_and_are_named(planted):
    strict = CONFIG.with_options(cone_ratio=100.0, read_share=0.99)
    v = claims(planted.model, list(P0_TEXTS), strict).table
    rows = v.frame().set_index("claim")
    assert rows.loc["cone.p0_attention_output_larger", "verdict"] == FAILS
    assert rows.loc["cone.p0_attention_output_larger", "threshold"] == "cone_ratio"
    assert rows.loc["cone.p0_attention_output_larger", "threshold_value"] == 100.0
    with pytest.raises(ValueError, match="cone_ratio must be > 0"):
        ClaimsConfig(cone_ratio=0)
    with pytest.raises(ValueError, match="n_texts=8 needed"):
        claims(planted.model, ["one text"], CONFIG)


TEXT = dict(family="f", claim="c", paper="p", wording="w", measurement="m", rule="r", detail="",
            over="")  # fmt: skip


def test_four_states_on_hand_made_intervals():
    # SmolLM2's spread_heads: 0.517 [0.495, 0.541] against 0.5 straddles the threshold.
    assert side(Interval(0.517, 0.495, 0.541, 16), 0.5) == UNDECIDED
    assert side(Interval(0.6, 0.55, 0.65, 16), 0.5) == HOLDS
    assert side(Interval(0.4, 0.35, 0.45, 16), 0.5) == FAILS
    assert side(Interval(0.5, 0.5, 0.5, 16), 0.5) == HOLDS  # zero width: the value decides
    assert side(Interval(0.4, 0.3, 0.45, 16), 0.5, "<=") == HOLDS
    assert side(Interval(0.45, 0.4, 0.55, 16), 0.5, "<=") == UNDECIDED
    assert side(Interval(0.6, 0.55, 0.65, 16), 0.5, "<=") == FAILS
    # Below the one named minimum n a row is not applicable, whatever its interval.
    assert judge(Interval(0.9, 0.85, 0.95, MIN_N - 1), 0.5) == NOT_APPLICABLE
    assert judge(Interval(0.9, 0.85, 0.95, MIN_N), 0.5) == HOLDS
    assert judge(Interval(0.9, 0.85, 0.95, MIN_N), 0.5, also=False) == FAILS
    assert either(FAILS, HOLDS) == HOLDS and either(FAILS, UNDECIDED) == UNDECIDED
    assert either(FAILS, FAILS) == FAILS
    # A rule over every head: the one outside decides, else one straddling, else the nearest.
    ivs = [Interval(0.9, 0.8, 1.0, 8), Interval(0.52, 0.45, 0.6, 8), Interval(0.3, 0.2, 0.4, 8)]
    assert decisive(ivs, 0.5) == 2 and decisive(ivs[:2], 0.5) == 1
    assert decisive(ivs, 0.5, every=False) == 0  # some block must hold: the furthest holding


def test_claim_row_verdicts_and_interval():
    assert claim_row(CONFIG, [0.6, 0.7] * 3, "carry_share", **TEXT).verdict == HOLDS
    assert claim_row(CONFIG, [0.01, 0.02] * 3, "carry_share", **TEXT).verdict == FAILS
    straddle = claim_row(CONFIG, [0.05, 0.15] * 4, "carry_share", **TEXT)
    assert straddle.verdict == UNDECIDED and straddle.low < 0.1 < straddle.high
    assert straddle.n == 8 and "| 8 |" in ClaimsTable([straddle]).markdown()
    few = claim_row(CONFIG, [0.6, 0.7], "carry_share", **TEXT)  # 2 texts < MIN_N
    assert few.verdict == NOT_APPLICABLE and few.value == pytest.approx(0.65)
    assert few.detail.startswith(f"n = 2 < MIN_N = {MIN_N}")
    assert claim_row(CONFIG, [], "carry_share", **TEXT).verdict == NOT_APPLICABLE  # none
    gone = claim_row(CONFIG, [0.5] * 8, "carry_share", ok=None, **TEXT)
    assert gone.verdict == NOT_APPLICABLE and math.isnan(gone.value)  # no number: no premise
    row = claim_row(CONFIG, [1.0, 2.0, 3.0] * 2, "carry_share", ok=AUTO, bound=5.0, **TEXT)
    assert row.verdict == FAILS and row.threshold_value == 5.0 and row.value == 2.0
    assert claim_row(CONFIG, [0.6] * 8, "carry_share", ok=False, **TEXT).verdict == FAILS
    given = claim_row(CONFIG, [], "rank_ratio", sense="<=", given=Interval(0.2, 0.1, 0.3, 40),
                      **TEXT)  # fmt: skip
    assert (given.verdict, given.n, given.sense) == (HOLDS, 40, "<=")
    mean, lo, hi = mean_interval([1.0, 2.0, 3.0, 4.0], seed=0)
    assert mean == 2.5 and 1.0 <= lo < mean < hi <= 4.0
    assert mean_interval([1.0, 2.0, 3.0, 4.0], seed=0) == (mean, lo, hi)  # seeded
    assert all(math.isnan(x) for x in mean_interval([math.nan]))
    with pytest.raises(ValueError, match="verdict must be one of"):
        Claim("f", "c", "p", "w", "m", 1.0, 1.0, 1.0, "t", 1.0, "r", "maybe")
    with pytest.raises(ValueError, match="ok must be AUTO, None or False"):
        claim_row(CONFIG, [0.6] * 8, "carry_share", ok=True, **TEXT)


def test_counts_are_per_paper():
    rows = [
        claim_row(CONFIG, v, "carry_share", **{**TEXT, "paper": paper, "claim": f"{paper}{i}"})
        for i, (paper, v) in enumerate(
            [("A", [0.6] * 8), ("A", [0.05, 0.15] * 4), ("B", [0.0] * 8), ("B", [0.6] * 2),
             ("A", [0.01] * 8)]
        )
    ]  # fmt: skip
    table = ClaimsTable(rows)
    assert table.by_paper() == {
        "A": {HOLDS: 1, FAILS: 1, UNDECIDED: 1, NOT_APPLICABLE: 0},
        "B": {HOLDS: 0, FAILS: 1, UNDECIDED: 0, NOT_APPLICABLE: 1},
    }
    md = table.markdown()
    assert "**A**: 1 hold, 1 do not hold, 1 undecided, 0 not applicable (3 decided of 3 rows)" in md
    assert md.index("**B**") > md.index("`A4`")  # each paper's rows under its own count
    assert counts(rows, key=lambda r: r.verdict)[HOLDS][HOLDS] == 1


def _secondary_tables(
    sink_cos=0.98, noise=0.05, slope=1.0, rank=0.2, dip=0.5, control_cos=0.1, n=40
) -> dict:
    """A secondary trace's tables (as `circuits secondary` writes them) and the two controls'
    (as `attn_sink_circuits.studies.claims.controls` measures them) where every claim is built in: n sink tokens
    whose log score and lifetime follow log(MLP norm) with `slope` (plus `noise`), a
    token-matched rank ratio `rank`, and eight texts whose P0 mass dips by `dip` when their
    sinks are ablated; each argument breaks one claim."""
    rng = np.random.default_rng(0)
    log_norm = rng.uniform(3.0, 6.0, n)
    jitter = rng.normal(0.0, 1.0, (2, n)) * noise * 3.0
    forming = pd.DataFrame(
        {"group": ["sink"] * n + ["control"] * 8, "text": list(range(n)) + list(range(8)),
         "position": [5] * (n + 8), "layer": [3] * (n + 8),
         "mlp_cos": list(sink_cos + jitter[0] * 0.01) + [control_cos + d for d in
                                                          (0.0, 0.1, -0.1, 0.0) * 2],
         "mlp_norm": list(np.exp(log_norm)) + [5.0] * 8,
         "mean_score": list(np.exp(slope * log_norm - 7 + jitter[0])) + [None] * 8,
         "lifetime": list(4 + slope * log_norm + jitter[1]) + [None] * 8}
    )  # fmt: skip
    active = [0, 0, 2, 2, 0, 0]
    layers = pd.DataFrame({"layer": range(6), "p0_mass": [0.1, 0.5, 0.25, 0.25, 0.5, 0.5],
                           "n_active@0.95": active, "cand_cos_median": [0.2] * 6})  # fmt: skip
    dips = dip + np.linspace(-0.02, 0.02, 8)
    valley = pd.DataFrame({"text": range(8), "layers": "3-5", "clean_mass": 0.5 * (1 - dips),
                           "ablated_mass": 0.5, "dip": dips, "clean_cos": 0.97,
                           "ablated_cos": 0.6})  # fmt: skip
    matched = pd.DataFrame([{"layer": 3, "n": n, "ratio": rank, "low": rank - 0.05,
                             "high": rank + 0.05, "sink_pr": 10 * rank, "control_pr": 10.0,
                             "unpaired": 0, "tokens": "' the' x40"}])  # fmt: skip
    return {"forming": forming, "layers": layers, "valley_control": valley,
            "matched_rank": matched}  # fmt: skip


def test_secondary_claims_hold_where_built_in():
    table = secondary_claims(_secondary_tables(), CONFIG)
    assert table.verdicts() == {f"secondary.{n}": HOLDS for n in SECONDARY_SPECS}
    rows = table.frame().set_index("claim")
    assert rows.loc["secondary.norm_predicts_score", "n"] == 40  # sink tokens
    assert rows.loc["secondary.primary_valley", "n"] == 8  # texts with sinks
    assert rows.loc["secondary.inputs_low_rank", "sense"] == "<="
    fit = rows.loc["secondary.norm_predicts_score"]
    assert fit.low < fit.value < fit.high  # bootstrapped over the sink tokens


@pytest.mark.parametrize(
    ("control", "broken"),
    [
        ({"sink_cos": 0.2}, ["mlp_aligns_with_sink"]),  # the forming MLP writes elsewhere
        ({"sink_cos": 0.6, "control_cos": 0.7}, ["mlp_aligns_with_sink"]),  # not sink-specific
        ({"noise": 3.0}, ["norm_predicts_score", "norm_predicts_lifetime"]),  # low R^2
        ({"slope": -1.0}, ["norm_predicts_score", "norm_predicts_lifetime"]),  # wrong sign
        ({"rank": 0.9}, ["inputs_low_rank"]),  # as low-rank as the same tokens elsewhere
        ({"dip": 0.0}, ["primary_valley"]),  # ablating the sinks leaves P0 mass alone
        ({"dip": -0.5}, ["primary_valley"]),  # P0 mass rises with the sinks
    ],
)
def test_secondary_control_breaks_exactly_its_claim(control, broken):
    verdicts = secondary_claims(_secondary_tables(**control), CONFIG).verdicts()
    expected = {f"secondary.{n}": FAILS if n in broken else HOLDS for n in SECONDARY_SPECS}
    assert verdicts == expected


def test_secondary_straddling_control_is_undecided():
    tables = _secondary_tables(rank=0.5)  # [0.45, 0.55] around rank_ratio 0.5
    tables["valley_control"]["dip"] = np.linspace(0.0, 0.2, 8)  # around dip_share 0.1
    v = secondary_claims(tables, CONFIG).verdicts()
    assert v["secondary.inputs_low_rank"] == v["secondary.primary_valley"] == UNDECIDED


def test_secondary_premise_absent_is_not_applicable(tmp_path):
    # As `circuits secondary` writes a model without secondary sinks (Qwen2.5-0.5B): the
    # per-token tables are empty files.
    tables = _secondary_tables()
    tables["layers"].to_csv(tmp_path / "layers.csv", index=False)
    pd.DataFrame().to_csv(tmp_path / "forming.csv", index=False)
    rows = secondary_claims(read_secondary(tmp_path), CONFIG).rows
    assert [r.verdict for r in rows] == [NOT_APPLICABLE] * 5
    assert all(r.detail == "the secondary trace found no secondary sink" for r in rows)
    assert all(r.threshold in ClaimsConfig.__dataclass_fields__ for r in rows)
    # A table lacking a column the claims read is refused before any model loads.
    tables["forming"].drop(columns="mlp_norm").to_csv(tmp_path / "forming.csv", index=False)
    with pytest.raises(ValueError, match="forming.csv lacks the column"):
        read_secondary(tmp_path)
    # Fewer sink tokens than the named minimum (Qwen2.5-1.5B's 2): nothing to judge.
    two = _secondary_tables(n=2)
    rows = secondary_claims(two, CONFIG).rows
    assert {r.verdict for r in rows} == {NOT_APPLICABLE}
    assert all(r.detail.startswith("only 2 sink tokens: n = 2 < MIN_N") for r in rows)
    # Anisotropy (Gemma 3): the median ordinary token passes the cosine test in an active layer.
    flat = _secondary_tables()
    flat["layers"].loc[2, "cand_cos_median"] = 0.968
    rows = secondary_claims(flat, CONFIG).rows
    assert {r.verdict for r in rows} == {NOT_APPLICABLE}
    assert "at layer 2 the median ordinary token's cosine with the sink state is 0.968" in (
        rows[0].detail
    )
    flat["layers"].loc[0, "cand_cos_median"] = 0.99  # a layer without events does not count
    flat["layers"].loc[2, "cand_cos_median"] = 0.2
    assert set(secondary_claims(flat, CONFIG).verdicts().values()) == {HOLDS}
    # Controls not measured (a trace's own tables, no model): those two rows say so.
    bare = {k: v for k, v in _secondary_tables().items() if k in ("forming", "layers")}
    rows = secondary_claims(bare, CONFIG).frame().set_index("claim")
    for name in ("inputs_low_rank", "primary_valley"):
        assert rows.loc[f"secondary.{name}", "verdict"] == NOT_APPLICABLE
        assert rows.loc[f"secondary.{name}", "detail"] == UNMEASURED
    # One premise absent at a time: nothing to fit, too few pairs for a PCA.
    flat = _secondary_tables()
    flat["forming"]["lifetime"] = 5.0
    flat["matched_rank"]["n"] = CONFIG.min_pca_tokens - 1
    v = secondary_claims(flat, CONFIG).verdicts()
    assert (
        v["secondary.norm_predicts_lifetime"] == v["secondary.inputs_low_rank"] == (NOT_APPLICABLE)
    )
    assert v["secondary.norm_predicts_score"] == HOLDS


def test_planted_secondary_sink_is_formed_by_an_aligned_mlp(tmp_path):
    from attn_sink_circuits.models.planted import planted_secondary_model
    from attn_sink_circuits.studies.secondary import find_secondary, forming_mlp, make_corpus

    p = planted_secondary_model(folder=tmp_path)
    texts = ["ab,cd,ef,gh", "xy,zw,uv,st", "no,pe,qr,mn", "ij,kl,op,rs"]
    corpus = make_corpus(p.model, texts)
    census = find_secondary(p.model, corpus, progress=False)
    forming = forming_mlp(p.model, corpus, census, progress=False)
    tables = {"forming": forming.frame, "layers": census.layers_frame()}
    rows = secondary_claims(tables, CONFIG).frame().set_index("claim")
    assert rows.loc["secondary.mlp_aligns_with_sink", "verdict"] == HOLDS
    assert rows.loc["secondary.mlp_aligns_with_sink", "value"] > 0.99
    # Every planted sink lives exactly `lifetime` layers: nothing for a lifetime fit to explain.
    assert rows.loc["secondary.norm_predicts_lifetime", "verdict"] == NOT_APPLICABLE


COMMA_TEXTS = ["a,b,c,d,e,f,g", "h,i,j,k,l,m,n", "o,p,q,r,s,t,u", "v,w,x,y,z,a,b"]


def _comma_sinks(p, rows, texts=None) -> pd.DataFrame:
    """Every planted token of `rows` (of the texts `texts`, default all) as a sink token."""
    return pd.DataFrame(
        [{"text": t, "position": j, "layer": p.l_start, "lifetime": p.lifetime}
         for t, row in enumerate(rows) for j, tok in enumerate(row)
         if tok == p.token_id and (texts is None or t in texts)]
    )  # fmt: skip


def test_valley_control_on_planted_secondary_sinks(tmp_path):
    """The planted ',' sinks take the sink heads' attention from P0 in their layers: ablating
    their forming MLP gives it back (dip > dip_share, the sinks' cosine with P0 falls). Where
    the MLP writes nothing, no sink forms and the same ablation moves nothing (dip ~0)."""
    from attn_sink_circuits.models.planted import planted_secondary_model
    from attn_sink_circuits.studies.claims.controls import valley_control

    for write, folder in ((10.0, "a"), (0.0, "b")):
        p = planted_secondary_model(sink_write=write, folder=tmp_path / folder)
        rows = [p.model.to_tokens(t)[0].tolist() for t in COMMA_TEXTS]
        valley = valley_control(p.model, rows, _comma_sinks(p, rows))
        assert len(valley) == 4 and set(valley.layers) == {f"{p.l_start}-{p.l_start + 2}"}
        if write:
            assert (valley.dip > CONFIG.dip_share).all()
            assert (valley.ablated_cos < valley.clean_cos - 0.1).all()
        else:
            assert valley.dip.abs().max() < 0.01


def test_token_matched_controls(tmp_path):
    from attn_sink_circuits.models.planted import planted_secondary_model
    from attn_sink_circuits.studies.claims.controls import matched_pairs, matched_rank

    # Token 5 is a sink at (0, 1); (1, 2) is an event; (1, 1) repeats the prefix [1, 5] of row
    # 0: the only control is (0, 3). Token 9 has no control: its sink stays unpaired.
    rows = [[1, 5, 6, 5, 7, 9], [1, 5, 5, 8]]
    sinks = pd.DataFrame({"text": [0, 0], "position": [1, 5], "layer": [2, 2]})
    events = pd.DataFrame({"text": [0, 1, 0], "position": [1, 2, 5]})
    pairs = matched_pairs(rows, sinks, events, seed=0)
    assert pairs[["group", "text", "position", "token_id"]].values.tolist() == [
        ["sink", 0, 1, 5], ["control", 0, 3, 5]
    ]  # fmt: skip
    # Planted: every ',' is a sink, but only texts 0-1's are listed as events. Their controls
    # are texts 2-3's ',': the same token, as low-rank as the sinks, so the ratio is ~1 and
    # the claim does not hold (random tokens as controls would make the sinks look low-rank).
    p = planted_secondary_model(folder=tmp_path)
    rows = [p.model.to_tokens(t)[0].tolist() for t in COMMA_TEXTS]
    sinks = _comma_sinks(p, rows, texts=(0, 1)).assign(group="sink")
    tables = {"forming": sinks, "events": sinks[["text", "position"]]}
    rank = matched_rank(p.model, rows, tables, CONFIG).iloc[0]
    assert rank.n == 12 and rank.unpaired == 0 and rank.tokens == "',' x12"
    assert rank.ratio > 0.6 and rank.low <= rank.ratio <= rank.high
    row = secondary_claims({**_secondary_tables(), "matched_rank": pd.DataFrame([rank])}, CONFIG)
    assert row.verdicts()["secondary.inputs_low_rank"] == FAILS


def test_trigger_theorems_in_table_form():
    from attn_sink_circuits.studies.claims.trigger import theorem_rows
    from attn_sink_circuits.studies.trigger import (
        SINK_BOUND,
        TrainConfig,
        TriggerModelConfig,
        TriggerTask,
        TriggerTransformer,
        eval_batch,
        make_batch,
        measure,
        relu_construction,
        train_model,
    )  # fmt: skip

    task = TriggerTask()
    batch = make_batch(task, 128, seed=1)
    built = theorem_rows(measure(relu_construction(task), batch), "hand-set", CONFIG)
    assert [(r.claim, r.verdict) for r in built] == [("trigger.theorem3", HOLDS)]
    torch.manual_seed(0)
    untrained = TriggerTransformer(TriggerModelConfig.for_task(task, attention="relu"))
    control = theorem_rows(measure(untrained, batch), "untrained ReLU", CONFIG)
    assert [(r.claim, r.verdict) for r in control] == [("trigger.theorem3", FAILS)]
    train = TrainConfig(steps=400, n_checkpoints=1, seed=0)
    soft = train_model(task, TriggerModelConfig.for_task(task), train, False)
    rows = theorem_rows(measure(soft.model, eval_batch(task, train)), "softmax", CONFIG)
    assert [(r.claim, r.verdict) for r in rows] == [("trigger.theorem1", HOLDS)]
    assert rows[0].value > SINK_BOUND


def test_cli_writes_claims_files(planted, tmp_path, monkeypatch, capsys):
    from attn_sink_circuits.cli import loading, main

    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(P0_TEXTS) + "\n")
    monkeypatch.setattr(loading, "load", lambda args: planted.model)
    out = tmp_path / "out"
    assert main(["claims", "--texts", str(texts), "--out", str(out)]) == 0
    names = {p.name for p in out.iterdir()}
    assert {"claims.csv", "claims.json", "claims.md", "report.html", "claim_cone.png",
            "p0_norm.csv"} <= names  # fmt: skip
    doc = json.loads((out / "claims.json").read_text())
    assert doc["schema_version"] >= 2 and doc["provenance"]["model"]["key"]
    assert doc["provenance"]["texts"]["n"] == CONFIG.n_texts
    assert len(doc["claims"]) == 11 and doc["claims"][0]["verdict"] in (HOLDS, FAILS)
    assert sum(doc["by_paper"]["Peng et al. 2026"].values()) == 11
    assert "| `cone.p0_attention_output_larger` |" in (out / "claims.md").read_text()
    assert main(["claims", "--secondary", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "lacks forming.csv" in capsys.readouterr().err


def test_rejudge_reads_a_saved_run_back(planted_claims, tmp_path):
    """Judged again from its saved tables, without the model, a run gives its own rows."""
    from attn_sink_circuits.studies.claims import rejudge, write_claims

    write_claims(planted_claims, tmp_path / "run")
    again = rejudge(tmp_path / "run")
    cols = ["claim", "verdict", "value", "low", "high", "n", "threshold_value"]
    pd.testing.assert_frame_equal(again.frame()[cols], planted_claims.frame()[cols])
    assert again.provenance["rejudged"]["folder"] == str(tmp_path / "run")
    (tmp_path / "run" / "p0_norm.csv").unlink()  # a run saved before per-text norms were kept
    row = rejudge(tmp_path / "run").frame().set_index("claim").loc["location.first_two_blocks"]
    assert (row.verdict, row.value, row.n) == (HOLDS, 1.0, CONFIG.n_texts)
    assert math.isnan(row.low) and "kept no per-text or embedding norms" in row.detail


def test_first_two_blocks_sees_block_zero():
    """Gemma 3's shape (P0 norms of 8 texts, rounded): the P0 norm grows 114x across block 0
    into 28.7x the other positions' median, then the others catch up (5-7x) and the state is
    massive again from block 4 after a 1.9x growth. The state is made in block 0: inside the
    first two blocks, which only the embedding (block 0's input) shows; without it the P0
    tracer's rule falls back to the largest growth from block 1 on (2.17x across block 3)."""
    from attn_sink_circuits.studies.claims.location import location_claims, text_blocks
    from attn_sink_circuits.studies.p0.formation import Formation

    norms = torch.tensor([[2987.0, 5109.0, 6252.0, 13582.0, 26160.0]] * 8)
    ratios = torch.tensor([[28.7, 5.0, 5.2, 7.0, 11.4]] * 8)
    basis = Basis("m", "bos", 8, 24, Formation([], [], [3], [4]), True, 2.17, norms, ratios,
                  torch.full((8,), 26.1), torch.full((8,), 1.0))  # fmt: skip
    assert text_blocks(basis, CONFIG) == [0.0] * 8
    row = location_claims(basis, CONFIG)[0]
    assert (row.verdict, row.value, row.n) == (HOLDS, 0.0, 8) and "x114" in row.detail
    blind = dataclasses.replace(basis, embed_norm=None, embed_ratio=None)
    row = location_claims(blind, CONFIG)[0]
    assert (row.verdict, row.value) == (FAILS, 3.0) and "block 0 not judged" in row.detail
    # SmolLM2's shape: 2.3x after block 0 is no massive state; the last jump is block 3 here.
    small = dataclasses.replace(basis, p0_norm=norms * torch.tensor([1, 1, 1, 10.0, 10.0]),
                                norm_ratio=torch.tensor([[2.3, 5.0, 5.2, 70.0, 80.0]] * 8))  # fmt: skip
    assert location_claims(small, CONFIG)[0].value == 3.0
    # No block grows the norm jump_factor times: no block made the state.
    flat = dataclasses.replace(basis, p0_norm=torch.ones(8, 5), embed_norm=torch.ones(8))
    assert location_claims(flat, CONFIG)[0].verdict == NOT_APPLICABLE


def test_claims_join_another_report(planted_claims, tmp_path):
    from attn_sink_circuits.report import write_trace
    from attn_sink_circuits.studies.claims.attach import with_claims

    extra = secondary_claims(_secondary_tables(), CONFIG)
    joined = with_claims(planted_claims, extra, [1])
    assert joined.model == planted_claims.model  # everything else is the trace's own
    assert len(joined.tables()["claims"]) == 5
    assert joined.summary()["claims"]["secondary.primary_valley"] == HOLDS
    html = write_trace(joined, tmp_path / "r").read_text()
    assert "The papers&#x27; claims, measured" in html or "The papers' claims, measured" in html
    assert "secondary.mlp_aligns_with_sink" in html


def test_side_by_side_reads_what_the_cli_wrote(planted_claims, tmp_path):
    from attn_sink_circuits.studies.claims.compare import (
        markdown,
        paper_counts,
        read_claims,
        side_by_side,
    )

    joined = planted_claims.table + secondary_claims(_secondary_tables(), CONFIG)
    joined.frame().to_csv(tmp_path / "claims.csv", index=False)
    other = planted_claims.frame().head(2).assign(verdict=FAILS, value=math.nan)
    frame = side_by_side({"planted": read_claims(tmp_path), "other": other})
    assert list(frame.columns) == ["paper", "claim", "planted", "other"] and len(frame) == 16
    first = frame.iloc[0]
    assert first.planted == f"holds (1, n {CONFIG.n_texts})" and first.other == "**no**"
    assert frame.iloc[-1].other == ""  # a claim the other table lacks
    assert markdown(frame).splitlines()[2].startswith("| Peng et al. 2026 | `location.")
    tally = paper_counts({"planted": read_claims(tmp_path)}).set_index(["paper", "verdict"])
    assert tally.loc[("Wong et al. 2025", HOLDS), "planted"] == 5  # the papers apart
    assert tally.loc[("Peng et al. 2026", NOT_APPLICABLE), "planted"] == 2  # by construction
    assert tally.planted.sum() == 16
    with pytest.raises(ValueError, match="has no claims.csv"):
        read_claims(tmp_path / "nowhere")


def test_qk_norm_with_p0_along_its_direction_makes_the_key_split_not_applicable(
    planted, planted_claims
):
    """With a BOS token P0's key input is the P0-state direction itself, so removing its excess
    along it only rescales the key; a key norm (Gemma 3's QK-norm) undoes that, and the split
    would read ~0 whatever the heads read: not applicable, the number kept in the detail."""
    from attn_sink_circuits.studies.claims.inputs import prepare
    from attn_sink_circuits.studies.claims.reading import reading_claims

    tables = planted_claims.table.tables
    split = tables["score_split"]
    assert not split.qk_norm.any()  # the tiny Llama has no key norm ...
    assert min(min(c) for c in split.p0_key_cos) > 0.999  # ... and P0 (BOS) is the direction
    inputs = prepare(planted.model, list(P0_TEXTS), CONFIG)
    normed = split.assign(qk_norm=True)
    row = reading_claims(inputs, normed, tables["writers"], tables["jump_shares"], CONFIG)[0]
    assert row.verdict == NOT_APPLICABLE and "QK-norm" in row.detail and math.isnan(row.value)
    tilted = normed.assign(p0_key_cos=[[0.9] * len(c) for c in split.p0_key_cos])
    row = reading_claims(inputs, tilted, tables["writers"], tables["jump_shares"], CONFIG)[0]
    assert row.verdict == HOLDS  # a direction that is not P0's own input is decided as before


def test_cone_reads_the_attention_output_itself(planted, planted_claims):
    """The cone rows read each block's attention output as the attention computes it (before
    any post-attention norm; for the tiny Llama that is also `hook_attn_out`)."""
    from attn_sink_circuits.core.sites import hook_name
    from attn_sink_circuits.studies.claims.cone import RAW_ATTN_OUT
    from attn_sink_circuits.studies.claims.inputs import prepare

    tokens = prepare(planted.model, list(P0_TEXTS), CONFIG).tokens
    name = hook_name(RAW_ATTN_OUT, 0)
    _, cache = planted.model.run_with_cache(tokens, names_filter=[name])
    p0 = cache[name][:, 0].norm(dim=-1).mean()
    cone = planted_claims.table.tables["cone"].set_index("layer")
    assert float(p0) == pytest.approx(cone.p0_norm[0], rel=1e-5)
