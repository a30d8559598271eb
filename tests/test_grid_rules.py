"""Size rules on a per-text grid (`attn_sink_circuits.discovery.grid_rules`): on hand-made
grids whose right answer is known, and against the known-answer models (a planted P0 circuit,
Tracr programs), at one and two torch threads."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from attn_sink_circuits.discovery.grid_rules import (
    RULES,
    RuleConfig,
    apply_rules,
    choose,
    halves,
    read_grid,
    split_grid,
    stays_from,
)
from attn_sink_circuits.discovery.text_grid import circuit_at, edges_frame, grid_masks, grid_sizes


def grid_table(f_by_size: dict[int, list[float]], kinds: list[str], split: str = "fit"):
    """A grid table whose text i at size n has faithfulness f_by_size[n][i] (model 1, empty 0,
    so value = faithfulness)."""
    rows = []
    for n, fs in f_by_size.items():
        for t, (f, k) in enumerate(zip(fs, kinds, strict=True)):
            rows.append({"split": split, "top_n": n, "n_edges": n, "text": t, "kind": k,
                         "value": f, "model": 1.0, "empty": 0.0, "faithfulness": f})  # fmt: skip
    return pd.DataFrame(rows)


KINDS = ["a"] * 4 + ["b"] * 4


def noisy_crossing():
    """A curve that crosses into the band at 20 by one lucky point, falls out at 40 and stays
    inside from 80 on; at 160 the whole model (f = 1)."""
    rng = np.random.default_rng(0)
    means = {10: 0.5, 20: 0.95, 40: 0.7, 80: 1.0, 120: 1.0, 160: 1.0}
    spread = {10: 0.05, 20: 0.02, 40: 0.05, 80: 0.02, 120: 0.02, 160: 0.0}
    return grid_table({n: list(means[n] + spread[n] * rng.standard_normal(8)) for n in means},
                      KINDS)  # fmt: skip


def test_stays_from():
    assert stays_from(np.array([False, True, False, True, True])) == 3
    assert stays_from(np.array([True, True])) == 0
    assert stays_from(np.array([True, False])) == 2


def test_rules_on_a_noisy_crossing():
    """band_by_kind takes the lucky first crossing; the rules that ask the curve to stay take
    the size from which it does."""
    chosen = apply_rules(noisy_crossing()).set_index("rule").n_edges
    assert chosen["band_by_kind"] == 20
    for rule in ("band_stays", "lower_bound", "lower_bound_by_kind", "crossval"):
        assert chosen[rule] == 80, rule


def test_lower_bound_waits_for_a_tight_interval():
    """One text far below the others: every kind inside the band on the mean (b: 0.91), not
    on the interval's lower end; the rule takes the next size, where every text is at 1."""
    fs = {10: [0.2] * 8, 20: [1.05] * 7 + [0.5], 40: [1.0] * 8, 80: [1.0] * 8}
    table = grid_table(fs, KINDS)
    assert choose(table, "band_by_kind")["n_edges"] == 20
    assert choose(table, "lower_bound")["n_edges"] == 40
    assert choose(table, "lower_bound_by_kind")["n_edges"] == 40


def test_heldout_rows_never_move_the_choice():
    """The same fit rows with two different held-out sets: the same choice; the held-out f is
    that of the chosen size on the held-out texts."""
    fit = noisy_crossing()
    good = grid_table({n: [1.0] * 8 for n in (10, 20, 40, 80, 120, 160)}, KINDS, "heldout")
    bad = grid_table({n: [0.1] * 8 for n in (10, 20, 40, 80, 120, 160)}, KINDS, "heldout")
    a = apply_rules(pd.concat([fit, good]))
    b = apply_rules(pd.concat([fit, bad]))
    assert a.n_edges.tolist() == b.n_edges.tolist()
    assert a.heldout_faithfulness.tolist() == pytest.approx([1.0] * len(RULES))
    assert b.heldout_faithfulness.tolist() == pytest.approx([0.1] * len(RULES))


def test_halves_split_every_kind():
    a, b = halves(["x"] * 4 + ["y"] * 3, np.random.default_rng(0))
    assert sorted([*a, *b]) == list(range(7))
    assert sum(i < 4 for i in a) == 2 and sum(i >= 4 for i in a) == 2  # y's odd text in a


def test_bad_inputs_say_so(tmp_path):
    table = noisy_crossing()
    with pytest.raises(ValueError, match="unknown size rule 'nope'"):
        choose(table, "nope")
    with pytest.raises(ValueError, match="no such grid file"):
        read_grid(tmp_path / "missing.csv")
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="not a per-text grid"):
        read_grid(tmp_path / "other.csv")
    with pytest.raises(ValueError, match="no heldout texts"):
        split_grid(table, "heldout")
    with pytest.raises(ValueError, match="folds must be odd"):
        RuleConfig(folds=4)


def test_saved_grid_reads_back(tmp_path):
    """A grid written gzip'd is found under its plain name and gives the same choices."""
    table = noisy_crossing()
    table.to_csv(tmp_path / "g.csv.gz", index=False)
    assert apply_rules(tmp_path / "g.csv").equals(apply_rules(table))


def test_grid_sizes():
    assert grid_sizes(8, 32) == list(range(1, 9))
    sizes = grid_sizes(30000, 32, near=2000)
    assert sizes[0] == 1 and sizes[-1] == 30000 and len(sizes) <= 33
    assert sum(500 <= n <= 8000 for n in sizes) >= 16  # the dense half around the choice


# -- known answers -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def planted():
    from attn_sink_circuits.models.planted import planted_p0_model

    return planted_p0_model(amplify=1.0)


def planted_choices(planted, threads: int) -> dict[str, int]:
    from attn_sink_circuits.studies.known_answers.planted import planted_runner
    from attn_sink_circuits.studies.known_answers.size import fit_grid

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        table = fit_grid(planted_runner(planted), "mean", 40, "path_patching")
    finally:
        torch.set_num_threads(before)
    chosen = apply_rules(table)
    return dict(zip(chosen.rule, chosen.n_edges, strict=True))


def test_planted_circuit_size_at_one_and_two_threads(planted):
    """Grown by exact path patching (the planted study's ranking at AUC 1), every rule returns
    the planted circuit's 6 edges, the same at 1 and 2 torch threads."""
    one = planted_choices(planted, 1)
    assert one == dict.fromkeys(RULES, 6)
    assert planted_choices(planted, 2) == one


def test_grid_edges_are_the_grid_circuits(planted):
    """`grid_edges` gives back each grid circuit's pruned edges (pruning keeps more as the
    circuit grows)."""
    from attn_sink_circuits.studies.known_answers.planted import planted_runner

    runner = planted_runner(planted)
    space = runner.space
    order = torch.randperm(space.n_edges, generator=torch.Generator().manual_seed(0))
    sizes = grid_sizes(space.n_edges, 24)
    masks = grid_masks(space, order, sizes)
    edges = edges_frame(space, order, sizes, masks)
    names = space.edge_names()
    for n, mask in zip(sizes, masks, strict=True):
        assert circuit_at(edges, n) == {names[i] for i in mask.nonzero().flatten().tolist()}


@pytest.mark.parametrize(
    ("program", "ablation"),
    [("reverse", "zero"), ("frac_prevs", "resample"), ("hist", "zero"), ("sort", "resample")],
)
def test_tracr_true_size_within_one_and_a_half(program, ablation):
    """Each rule's size on a Tracr program, circuits grown by the known-answers study's best
    ranking for the ablation, is within 1.5x of the used truth's size."""
    from attn_sink_circuits.models.compiled import load_compiled
    from attn_sink_circuits.studies.known_answers.size import program_sizes

    torch.set_num_threads(1)
    result = program_sizes(load_compiled(program), ablation)
    true = result["true_edges"]
    for rule, n in result["chosen"].items():
        assert true / 1.5 <= n <= true * 1.5, (rule, n, true)
