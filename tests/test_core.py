"""The vocabulary floor (`attn_sink_circuits.core`): node ids and hook names, built and read back in one
place each."""

from __future__ import annotations

import pytest

from attn_sink_circuits.core.nodes import KINDS, Component, node_id, parse_node_id
from attn_sink_circuits.core.sites import PATCH_KINDS, SITES, hook_name


@pytest.mark.parametrize(
    ("args", "nid"),
    [
        (("embed",), "embed"),
        (("head", 3, 5), "L3.H5"),
        (("head", 3, 5, -1, "k"), "L3.H5.k"),
        (("attn", 2), "L2.ATTN"),
        (("mlp", 3), "L3.MLP"),
        (("neuron", 1, -1, 17), "L1.MLP.N17"),
        (("resid", 4, -1, -1, "resid_mid"), "L4.resid_mid"),
    ],
)
def test_a_node_id_is_built_and_read_back(args, nid):
    assert node_id(*args) == nid
    assert node_id(*parse_node_id(nid)[:5]) == nid
    assert parse_node_id(nid).kind in KINDS


def test_a_bad_component_is_refused_in_one_line():
    assert parse_node_id("target:p0_mass") == Component("target", name="p0_mass")
    with pytest.raises(ValueError, match="needs a layer >= 0, got -2"):
        node_id("mlp", -2)
    with pytest.raises(ValueError, match="needs a head index >= 0, got -1"):
        node_id("head", 3)
    with pytest.raises(ValueError, match="is not a component id"):
        parse_node_id("L3.X")


def test_patchable_kinds_are_the_site_table_in_its_order():
    assert PATCH_KINDS == tuple(k for k, s in SITES.items() if s.patch)
    assert {"attn_raw", "mlp_in", "result", "scores"}.isdisjoint(PATCH_KINDS)
    assert hook_name("k_in", 0) == "blocks.0.attn.k.hook_in"
    with pytest.raises(ValueError, match="unknown site kind 'nope'"):
        hook_name("nope", 0)


def test_a_model_is_known_by_its_record_else_by_its_config():
    from dataclasses import replace
    from types import SimpleNamespace

    from attn_sink_circuits.core.identity import (
        model_hash,
        model_info,
        model_key,
        prepends_bos,
        record_info,
        recorded_info,
        same_model,
    )

    class Model:
        cfg = SimpleNamespace(model_name="hub/name", default_prepend_bos=False)

    bare, loaded = Model(), Model()
    assert recorded_info(bare) is None and recorded_info(SimpleNamespace()) is None
    assert (model_key(bare), model_hash(bare), prepends_bos(bare)) == ("hub/name", "", False)
    with pytest.raises(ValueError, match="not loaded with circuits.load_model"):
        model_info(bare)
    info = record_info(loaded, _info(key="tiny", weights_sha256="ab" * 32))
    assert model_info(loaded) is info and model_key(loaded) == "tiny" and prepends_bos(loaded)
    assert same_model("other-name", "ab" * 32, loaded)  # the hashes decide when both have one
    assert not same_model("tiny", "cd" * 32, loaded)
    assert same_model("tiny", "", loaded) and not same_model("tiny", "", bare)
    record_info(loaded, replace(info, gguf_sha256="ef" * 32))
    assert model_hash(loaded) == "ef" * 32


def _info(**fields):
    from attn_sink_circuits.core.identity import ModelInfo

    shape = dict(n_layers=1, n_heads=1, n_kv_heads=1, d_model=4, d_mlp=4, dtype="float32")
    given = dict(source="folder:x", hub_name="x", gguf_sha256=None, cache_dir=None)
    given |= dict(from_cache=False, prepend_bos=True, load_seconds=0.0, quantised_source=False)
    return ModelInfo(**(shape | given | fields))


def test_position_0_holds_the_bos_only_where_the_model_prepends_one():
    from types import SimpleNamespace

    from attn_sink_circuits.core.tokens import p0_token

    def model(bos: bool):
        cfg = SimpleNamespace(model_name="m", default_prepend_bos=bos)
        return SimpleNamespace(cfg=cfg, tokenizer=SimpleNamespace(bos_token_id=7))

    assert p0_token(model(True)) == 7 and p0_token(model(False)) is None


def test_texts_are_split_by_kind_and_hashed_with_their_kinds():
    from attn_sink_circuits.core.texts import split_indices, texts_sha256

    kinds = ["prose", "code"] * 4
    fit, held = split_indices(kinds, 4, 4, seed=0)
    assert sorted(fit + held) == list(range(8))
    assert sorted(kinds[i] for i in fit) == ["code", "code", "prose", "prose"]
    assert texts_sha256(["a"]) != texts_sha256(["a"], ["prose"]) == texts_sha256(["a"], ["prose"])
