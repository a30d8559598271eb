"""Shared fixtures: one tiny random model and one real default model per test session."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    """A seeded random 4-layer Llama (d_model 64, 4 heads / 2 KV) with a byte tokenizer."""
    from circuits.models.tiny import tiny_model

    return tiny_model(folder=tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="session")
def smollm2():
    """The real default model, SmolLM2-135M-Instruct (dequantised Q4_1), from the shared cache."""
    from circuits.models import load_model

    return load_model("smollm2-135m")
