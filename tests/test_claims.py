"""The claims table: each claim kind gives "holds" on a tiny model where it is built in and "does
not hold" on a control built without it; the verdict logic; the CLI."""

from __future__ import annotations

import dataclasses
import json
import math

import pandas as pd
import pytest
import torch

from circuits.claims import ClaimsConfig, claims
from circuits.claims.secondary import SPECS as SECONDARY_SPECS
from circuits.claims.secondary import read_secondary, secondary_claims
from circuits.claims.table import (
    AUTO,
    FAILS,
    HOLDS,
    NOT_APPLICABLE,
    Claim,
    claim_row,
    mean_interval,
)
from circuits.models.planted import P0_TEXTS, planted_p0_model

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
        "identification.spread_heads_carry_jump", "identification.p0_output_distinct",
        "identification.same_across_texts", "amplification.mlps_carry_jump",
        "amplification.fixed_direction_texts", "amplification.fixed_direction_variants",
        "cone.p0_attention_output_larger", "reading.keys_read_p0_direction",
        "reading.circuit_writes_direction",
    ]  # fmt: skip
    assert {c: v[c] for c in built_in} == dict.fromkeys(built_in, HOLDS)
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
    assert rows.value.notna().all() and (rows.low <= rows.value + 1e-9).all()


JUMP_PREMISED = (
    "identification.spread_heads_carry_jump", "identification.p0_output_distinct",
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
    assert rows.loc["cone.p0_attention_output_larger", "verdict"] in (HOLDS, FAILS)
    assert rows.loc["reading.keys_read_p0_direction", "verdict"] in (HOLDS, FAILS)
    assert "**not applicable** (no P0 norm jump" in result.table.markdown()


def test_no_carrier_head_fails_the_claim_and_leaves_the_rest_not_applicable(tmp_path):
    # The semantic control's jump is made by MLP 1; its largest head share is ~0.26.
    model = _semantic(planted_p0_model(folder=tmp_path, amplify=0))
    result = claims(model, list(P0_TEXTS), CONFIG.with_options(carry_share=0.5))
    rows = result.frame().set_index("claim")
    spread = rows.loc["identification.spread_heads_carry_jump"]
    assert spread.verdict == FAILS and spread.threshold == "carry_share"
    assert 0 < spread.value < 0.5 and "no head carries" in spread.detail
    for claim in JUMP_PREMISED[1:4]:
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
    assert distinct.verdict == HOLDS and distinct.value < CONFIG.distinct_ratio
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


def test_claim_row_verdicts_and_interval():
    text = dict(family="f", claim="c", paper="p", wording="w", measurement="m", rule="r",
                detail="", over="")  # fmt: skip
    assert claim_row(CONFIG, [0.6, 0.7], "carry_share", **text).verdict == HOLDS
    assert claim_row(CONFIG, [0.01, 0.02], "carry_share", **text).verdict == FAILS
    assert claim_row(CONFIG, [], "carry_share", **text).verdict == FAILS  # nothing measured
    assert claim_row(CONFIG, [0.5], "carry_share", ok=None, **text).verdict == NOT_APPLICABLE
    row = claim_row(CONFIG, [1.0, 2.0, 3.0], "carry_share", ok=AUTO, bound=5.0, **text)
    assert row.verdict == FAILS and row.threshold_value == 5.0 and row.value == 2.0
    mean, lo, hi = mean_interval([1.0, 2.0, 3.0, 4.0], seed=0)
    assert mean == 2.5 and 1.0 <= lo < mean < hi <= 4.0
    assert mean_interval([1.0, 2.0, 3.0, 4.0], seed=0) == (mean, lo, hi)  # seeded
    assert all(math.isnan(x) for x in mean_interval([math.nan]))
    with pytest.raises(ValueError, match="verdict must be one of"):
        Claim("f", "c", "p", "w", "m", 1.0, 1.0, 1.0, "t", 1.0, "r", "maybe")


def _secondary_tables(
    sink_cos=0.98, r2=0.8, sink_pr=2.0, dip=0.5, control_cos=0.1, slope=1.0
) -> dict:
    """A secondary trace's tables (as `circuits secondary` writes them) where every claim is
    built in; each argument breaks one."""
    forming = pd.DataFrame(
        {"group": ["sink"] * 4 + ["control"] * 4,
         "mlp_cos": [sink_cos] * 4 + [control_cos + d for d in (0.0, 0.1, -0.1, 0.0)]}
    )  # fmt: skip
    fits = pd.DataFrame(
        [{"y": y, "x": "log_mlp_norm", "slope": slope, "intercept": 0.0, "r2": r2, "n": 40,
          "subset": "all"} for y in ("log_score", "lifetime")]
    )  # fmt: skip
    pca = pd.DataFrame(
        [{"layer": 3, "group": "sink", "n": 40, "top1": 0.8, "participation_ratio": sink_pr},
         {"layer": 3, "group": "control", "n": 40, "top1": 0.2, "participation_ratio": 10.0}]
    )  # fmt: skip
    active = [0, 0, 2, 2, 0, 0]
    mass = [0.1, 0.5, 0.5 * (1 - dip), 0.5 * (1 - dip), 0.5, 0.5]
    layers = pd.DataFrame({"layer": range(6), "p0_mass": mass, "n_active@0.95": active})
    return {"forming": forming, "fits": fits, "pca": pca, "layers": layers}


def test_secondary_claims_hold_where_built_in():
    good = secondary_claims(_secondary_tables(), CONFIG).verdicts()
    assert good == {f"secondary.{n}": HOLDS for n in SECONDARY_SPECS}


@pytest.mark.parametrize(
    ("control", "broken"),
    [
        ({"sink_cos": 0.2}, ["mlp_aligns_with_sink"]),  # the forming MLP writes elsewhere
        ({"sink_cos": 0.6, "control_cos": 0.7}, ["mlp_aligns_with_sink"]),  # not sink-specific
        ({"r2": 0.1}, ["norm_predicts_score", "norm_predicts_lifetime"]),
        ({"slope": -1.0}, ["norm_predicts_score", "norm_predicts_lifetime"]),  # wrong sign
        ({"sink_pr": 8.0}, ["inputs_low_rank"]),  # 0.8 of the controls' rank: full rank
        ({"dip": 0.0}, ["primary_valley"]),
        ({"dip": -0.5}, ["primary_valley"]),  # P0 mass rises where secondaries live
    ],
)
def test_secondary_control_breaks_exactly_its_claim(control, broken):
    verdicts = secondary_claims(_secondary_tables(**control), CONFIG).verdicts()
    expected = {f"secondary.{n}": FAILS if n in broken else HOLDS for n in SECONDARY_SPECS}
    assert verdicts == expected


def test_secondary_premise_absent_is_not_applicable(tmp_path):
    # As `circuits secondary` writes a model without secondary sinks (Qwen2.5-0.5B): the
    # per-token tables are empty files.
    tables = _secondary_tables()
    for name, frame in tables.items():
        frame.to_csv(tmp_path / f"{name}.csv", index=False)
    for name in ("forming", "pca"):
        pd.DataFrame().to_csv(tmp_path / f"{name}.csv", index=False)
    rows = secondary_claims(read_secondary(tmp_path), CONFIG).rows
    assert [r.verdict for r in rows] == [NOT_APPLICABLE] * 5
    assert all(r.detail == "the secondary trace found no secondary sink" for r in rows)
    assert all(r.threshold in ClaimsConfig.__dataclass_fields__ for r in rows)
    # Traces written before the fits had subsets (Gemma 3 270M's) read as fits on all tokens;
    # a table lacking a column the claims read is refused before any model loads.
    tables["fits"].drop(columns="subset").to_csv(tmp_path / "fits.csv", index=False)
    tables["forming"].to_csv(tmp_path / "forming.csv", index=False)
    assert set(read_secondary(tmp_path)["fits"].subset) == {"all"}
    tables["layers"].drop(columns="p0_mass").to_csv(tmp_path / "layers.csv", index=False)
    with pytest.raises(ValueError, match="layers.csv lacks the column"):
        read_secondary(tmp_path)
    few = _secondary_tables()
    few["pca"]["n"] = CONFIG.min_pca_tokens - 1
    row = secondary_claims(few, CONFIG).frame().set_index("claim").loc["secondary.inputs_low_rank"]
    assert row.verdict == NOT_APPLICABLE and "< min_pca_tokens" in row.detail
    # One premise absent at a time: nothing to fit, no PCA, no layer without secondaries.
    flat = _secondary_tables(r2=math.nan)
    flat["pca"] = flat["pca"].iloc[:0]
    flat["layers"]["n_active@0.95"] = [0, 1, 1, 1, 1, 1]
    v = secondary_claims(flat, CONFIG).verdicts()
    assert v == {"secondary.mlp_aligns_with_sink": HOLDS} | {
        f"secondary.{n}": NOT_APPLICABLE for n in list(SECONDARY_SPECS)[1:]
    }


def test_planted_secondary_sink_is_formed_by_an_aligned_mlp(tmp_path):
    from circuits.models.planted import planted_secondary_model
    from circuits.tracing.secondary import find_secondary, forming_mlp, make_corpus, mlp_geometry
    from circuits.tracing.secondary.fit import norm_fit

    p = planted_secondary_model(folder=tmp_path)
    texts = ["ab,cd,ef,gh", "xy,zw,uv,st", "no,pe,qr,mn", "ij,kl,op,rs"]
    corpus = make_corpus(p.model, texts)
    census = find_secondary(p.model, corpus, progress=False)
    forming = forming_mlp(p.model, corpus, census, progress=False)
    tables = {"forming": forming.frame, "fits": norm_fit(forming).to_frame(),
              "pca": mlp_geometry(forming, min_points=4).summary,
              "layers": census.layers_frame()}  # fmt: skip
    rows = secondary_claims(tables, CONFIG).frame().set_index("claim")
    assert rows.loc["secondary.mlp_aligns_with_sink", "verdict"] == HOLDS
    assert rows.loc["secondary.mlp_aligns_with_sink", "value"] > 0.99
    # Every planted sink lives exactly `lifetime` layers: nothing for a lifetime fit to explain.
    assert rows.loc["secondary.norm_predicts_lifetime", "verdict"] == NOT_APPLICABLE


def test_trigger_theorems_in_table_form():
    from circuits.claims.trigger import theorem_rows
    from circuits.trigger import (
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
    from circuits import cli
    from circuits.cli import loading

    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(P0_TEXTS) + "\n")
    monkeypatch.setattr(loading, "load", lambda args: planted.model)
    out = tmp_path / "out"
    assert cli.main(["claims", "--texts", str(texts), "--out", str(out)]) == 0
    names = {p.name for p in out.iterdir()}
    assert {"claims.csv", "claims.json", "claims.md", "report.html", "claim_cone.png"} <= names
    doc = json.loads((out / "claims.json").read_text())
    assert len(doc["claims"]) == 10 and doc["claims"][0]["verdict"] in (HOLDS, FAILS)
    assert "| `cone.p0_attention_output_larger` |" in (out / "claims.md").read_text()
    assert cli.main(["claims", "--secondary", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "lacks forming.csv" in capsys.readouterr().err


def test_claims_join_another_report(planted_claims, tmp_path):
    from circuits.claims.attach import with_claims
    from circuits.report import write_trace

    extra = secondary_claims(_secondary_tables(0.98, 0.8, 2.0, 0.5), CONFIG)
    joined = with_claims(planted_claims, extra, [1])
    assert joined.model == planted_claims.model  # everything else is the trace's own
    assert len(joined.tables()["claims"]) == 5
    assert joined.summary()["claims"]["secondary.primary_valley"] == HOLDS
    html = write_trace(joined, tmp_path / "r").read_text()
    assert "The papers&#x27; claims, measured" in html or "The papers' claims, measured" in html
    assert "secondary.mlp_aligns_with_sink" in html


def test_side_by_side_reads_what_the_cli_wrote(planted_claims, tmp_path):
    from circuits.claims.compare import markdown, read_claims, side_by_side

    planted_claims.frame().to_csv(tmp_path / "claims.csv", index=False)
    other = planted_claims.frame().head(2).assign(verdict=FAILS, value=math.nan)
    frame = side_by_side({"planted": read_claims(tmp_path), "other": other})
    assert list(frame.columns) == ["claim", "planted", "other"] and len(frame) == 10
    first = frame.iloc[0]
    assert first.planted.startswith("holds (") and first.other == "**no**"
    assert frame.iloc[-1].other == ""  # a claim the other table lacks
    assert markdown(frame).splitlines()[2].startswith("| `identification.")
    with pytest.raises(ValueError, match="has no claims.csv"):
        read_claims(tmp_path / "nowhere")


def test_qk_norm_with_p0_along_its_direction_makes_the_key_split_not_applicable(
    planted, planted_claims
):
    """With a BOS token P0's key input is the P0-state direction itself, so removing its excess
    along it only rescales the key; a key norm (Gemma 3's QK-norm) undoes that, and the split
    would read ~0 whatever the heads read: not applicable, the number kept in the detail."""
    from circuits.claims.inputs import prepare
    from circuits.claims.reading import reading_claims

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
    from circuits.claims.cone import RAW_ATTN_OUT
    from circuits.claims.inputs import prepare
    from circuits.sites import hook_name

    tokens = prepare(planted.model, list(P0_TEXTS), CONFIG).tokens
    name = hook_name(RAW_ATTN_OUT, 0)
    _, cache = planted.model.run_with_cache(tokens, names_filter=[name])
    p0 = cache[name][:, 0].norm(dim=-1).mean()
    cone = planted_claims.table.tables["cone"].set_index("layer")
    assert float(p0) == pytest.approx(cone.p0_norm[0], rel=1e-5)
