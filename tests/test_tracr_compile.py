"""Recompiling a program with Tracr gives the committed fixture (skipped without the `[tracr]`
extra). Imports no torch: runs where only Tracr, jax and numpy are installed."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("tracr")

from attn_sink_circuits.studies.known_answers.compile import FIXTURES, write_fixture  # noqa: E402


def test_recompiled_reverse_equals_the_fixture(tmp_path):
    npz, meta = write_fixture("reverse", tmp_path)
    assert json.loads(meta.read_text()) == json.loads((FIXTURES / "reverse.json").read_text())
    with np.load(npz) as new, np.load(FIXTURES / "reverse.npz") as old:
        assert sorted(new.files) == sorted(old.files)
        for key in old.files:
            np.testing.assert_allclose(new[key], old[key], atol=1e-6, rtol=0, err_msg=key)
