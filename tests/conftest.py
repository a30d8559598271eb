"""Shared fixtures: one tiny random model and the real models, each loaded once per test session.

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
    "attn_sink_circuits", "beartype.beartype(conf=beartype.BeartypeConf(is_pep484_tower=True))"
)


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    """A seeded random 4-layer Llama (d_model 64, 4 heads / 2 KV) with a byte tokenizer."""
    from attn_sink_circuits.models.tiny import tiny_model

    return tiny_model(folder=tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="session")
def smollm2():
    """The real default model, SmolLM2-135M-Instruct (dequantised Q4_1), from the shared cache."""
    from attn_sink_circuits.models import load_model

    return load_model("smollm2-135m")


@pytest.fixture(scope="session")
def qwen():
    """Qwen2.5-Coder-0.5B-Instruct (no BOS token), from the shared cache; loaded once for every
    file that reads it (test_models, test_sinks, test_secondary)."""
    from attn_sink_circuits.models import load_model

    return load_model("qwen2.5-0.5b")


@pytest.fixture(scope="session")
def planted_p0(tmp_path_factory):
    """The planted P0-sink model (`planted_p0_model()`: seed 0, amplify 1)."""
    from attn_sink_circuits.models.planted import planted_p0_model

    return planted_p0_model(folder=tmp_path_factory.mktemp("planted-p0"))


@pytest.fixture(scope="session")
def planted_p0_trace(planted_p0):
    """`trace_p0` of the planted model on its texts with tests/test_p0.py's small settings (4 + 4
    texts of 20 tokens), traced once for test_p0, test_report and test_report_browser (no test
    changes it)."""
    from test_p0 import SMALL

    from attn_sink_circuits.models.planted import P0_TEXTS
    from attn_sink_circuits.studies.p0 import trace_p0

    return trace_p0(planted_p0.model, P0_TEXTS, SMALL, progress=False)


@pytest.fixture
def chromium_dom(tmp_path):
    """`render(path)`: the DOM of an HTML file after headless Debian chromium ran its scripts
    (no network, a fresh profile, 10 s of virtual time)."""
    import subprocess

    def render(path) -> str:
        out = subprocess.run(
            [
                "chromium",
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                f"--user-data-dir={tmp_path / 'chromium-profile'}",
                "--virtual-time-budget=10000",
                "--dump-dom",
                path.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert out.returncode == 0, out.stderr[-2000:]
        return out.stdout

    return render
