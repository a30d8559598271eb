"""Known answers: Tracr-compiled programs loaded from the committed fixtures (no jax)."""

from __future__ import annotations

import pytest
import torch

from attn_sink_circuits.core.sites import hook_name
from attn_sink_circuits.discovery.config import DiscoveryConfig
from attn_sink_circuits.models.compiled import load_compiled
from attn_sink_circuits.studies.known_answers.scoring import (
    circuit_faithfulness,
    method_scores,
    precision_at_size,
    roc_auc,
    runner_for,
    score_cell,
)
from attn_sink_circuits.studies.known_answers.sinks import design_table, p0_tracer
from attn_sink_circuits.studies.known_answers.task import SEED, partners, task_tokens
from attn_sink_circuits.studies.known_answers.truth import (
    ACDC_DIFFERENCES,
    ACDC_TRUTH,
    TARGET,
    edge_effects,
    merged,
    resample_truth,
    zero_truth,
)

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


# -- the truth derived from the program ---------------------------------------------------------

HIST_ZERO = {
    "embed->L0.H0.q",  # Select(tokens, tokens, EQ): the query reads the tokens (and `one`)
    "embed->L0.H0.k",  # ... the key the tokens (and BOS)
    "embed->L0.H0.v",  # SelectorWidth's value: BOS's indicator
    "embed->L0.MLP",  # the MLP turns BOS's share 1/(w+1) into w: reads `one` and BOS
    "L0.H0->L0.MLP",  # ... and the head's output
    f"L0.MLP->{TARGET}",  # the unembedding reads hist:*
}


def test_hist_truth_by_hand(compiled):
    """The smallest program, checked by hand against Tracr's SelectorWidth: under zero ablation
    every declared edge; under resample only those whose value varies (the token identity into
    q and k, the count onwards; BOS's value and `one` are the same in every text)."""
    c = compiled["hist"]
    zero = {e.name for e in zero_truth(c)}
    assert zero == HIST_ZERO
    tokens = task_tokens(c)
    resample = {e.name for e in resample_truth(c, tokens, partners(tokens))}
    assert resample == HIST_ZERO - {"embed->L0.H0.v", "embed->L0.MLP"}
    labels = {e.name: e.labels for e in zero_truth(c)}
    assert labels["embed->L0.H0.v"] == ("tokens:BOS",)
    assert set(labels["embed->L0.MLP"]) == {"one", "tokens:BOS"}


@pytest.mark.parametrize("name", PROGRAMS)
@pytest.mark.parametrize("ablation", ["zero", "resample"])
def test_true_edges_are_the_ones_exact_patching_sees(compiled, name, ablation):
    """Every edge outside the derived truth changes nothing when ablated alone (exact patching,
    ACDC's metric); every true edge but the explained inert ones changes the output."""
    c = compiled[name]
    tokens = task_tokens(c)
    truth = zero_truth(c) if ablation == "zero" else resample_truth(c, tokens, partners(tokens))
    effects = edge_effects(c, tokens, ablation, seed=SEED)
    true = {e.name for e in truth}
    assert true <= set(effects)
    assert max(v for k, v in effects.items() if k not in true) < 1e-9
    inert = set(merged(ACDC_DIFFERENCES.get(name, {}))) if ablation == "zero" else set()
    inert |= {"embed->L2.H0.k"} if (name, ablation) == ("sort", "zero") else set()
    assert min(v for k, v in effects.items() if k in true - inert) > 1e-3


@pytest.mark.parametrize("name", sorted(ACDC_TRUTH))
def test_acdc_truth_is_the_derived_truth_less_the_explained_edges(compiled, name):
    c = compiled[name]
    derived = {e.name for e in zero_truth(c, split=True)}
    acdc = set(ACDC_TRUTH[name])
    assert acdc <= derived
    assert derived - acdc == set(ACDC_DIFFERENCES[name])
    effects = edge_effects(c, task_tokens(c), "zero")
    used = {k for k, v in effects.items() if v > 1e-9}
    assert set(merged(acdc)) == used  # ACDC's truth, merged onto one embed, is what is used
    for edge in merged(ACDC_DIFFERENCES[name]):
        if edge not in merged(acdc):  # a merged embed edge ACDC keeps through the other part
            assert effects[edge] < 1e-9, edge


# -- sinks by design ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", PROGRAMS)
def test_bos_mass_is_the_designed_one(compiled, name):
    """Every designed head on every input: SelectorWidth heads put 1/(w+1) on BOS, Aggregate
    heads 1 for a query that matches no key and 0 otherwise (measured within 1e-5)."""
    rows = design_table(compiled[name])
    assert {r.length for r in rows} == set(compiled[name].lengths)
    assert max(r.max_abs_error for r in rows) < 1e-5


def test_gu_alpha_misreads_design_sinks(compiled):
    """Gu's alpha counts BOS's own row (its query attends to BOS alone): the length head of
    reverse gives 1/4 to BOS from every later query of a 3-token input, under Sink^0.3's
    threshold, yet alpha is 7/16 > 0.3; its Aggregate head gives BOS nothing from any later
    query, yet alpha is 1/(n+1) and counts it as a sink head at lengths 1 and 2."""
    rows = {(r.head, r.length): r for r in design_table(compiled["reverse"])}
    width = rows[("L0.H0", 3)]
    assert width.measured_mean == pytest.approx(0.25, abs=1e-6) and not width.mass_sink
    assert width.gu_alpha == pytest.approx(7 / 16, abs=1e-6) and width.gu_sink
    for length in (1, 2):
        agg = rows[("L3.H0", length)]
        assert agg.measured_mean < 1e-6 and agg.gu_sink
        assert agg.gu_alpha == pytest.approx(1 / (length + 1), abs=1e-6)


# -- methods against the truth -----------------------------------------------------------------


def test_auc_and_precision_break_ties_against_the_truth():
    truth = torch.tensor([True, True, False, False])
    assert roc_auc(torch.tensor([2.0, 1.0, 1.0, 0.0]), truth) == pytest.approx(0.75)
    assert roc_auc(torch.tensor([1.0, 1.0, 1.0, 1.0]), truth) == 0.0
    assert precision_at_size(torch.tensor([2.0, 1.0, 1.0, 0.0]), truth) == 0.5
    assert precision_at_size(torch.tensor([2.0, 1.5, 1.0, 0.0]), truth) == 1.0


def test_methods_recover_hist_and_eap_sees_nothing_at_the_clean_run(compiled):
    """On hist, EAP-IG and exact path patching rank the true edges first under both ablations;
    EAP's gradient of a squared error at the clean run is zero, so every score ties."""
    c = compiled["hist"]
    for ablation in ("zero", "resample"):
        for method in ("eap_ig", "path_patching"):
            cell = score_cell(c, ablation, method)
            assert cell.auc == 1.0 and cell.precision_at_true_size == 1.0, (ablation, method)
        runner = runner_for(c, ablation)
        eap = method_scores(runner, "eap", DiscoveryConfig(ablation=ablation))
        assert float(eap.abs().max()) == 0.0


def test_true_circuits_are_faithful(compiled):
    for name in PROGRAMS:
        for ablation in ("zero", "resample"):
            f = circuit_faithfulness(compiled[name], ablation)
            assert f["mse_true_circuit"] < 1e-9 < 0.1 < f["mse_empty_circuit"], (name, ablation)


def test_p0_tracer_names_no_upstream_component(compiled):
    """Tracr's BOS attention comes from BOS's embedding alone: the P0 tracer's localisation
    names no head and no MLP (it does not apply to the one-block hist)."""
    assert p0_tracer(compiled["hist"], task_tokens(compiled["hist"])) is None
    for name in ("reverse", "frac_prevs", "sort"):
        found = p0_tracer(compiled[name], task_tokens(compiled[name]))
        assert found["named_heads"] == [] and found["named_mlps"] == [], name
        assert found["largest_drop"] == 0.0  # no ablation at P0 lowers the late P0 attention
        assert max(found["norm_ratio"]) < 1  # the P0 state is never massive
