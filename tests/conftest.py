"""Shared fixtures: one tiny random model and one real default model per test session.

Every jaxtyping annotation in `circuits` (dtype and shape, e.g. `Float[Tensor, "batch pos"]`)
is checked at run time in the tests: the import hook below wraps each function with beartype
before any test imports the package.
"""

from __future__ import annotations

import pytest
from jaxtyping import install_import_hook

# Stays installed for the whole session: every `circuits` module imported from here on is checked
# (the PEP 484 numeric tower: an int is a valid float, as everywhere in Python).
install_import_hook(
    "circuits", "beartype.beartype(conf=beartype.BeartypeConf(is_pep484_tower=True))"
)


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
