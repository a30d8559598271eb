"""Wong et al.'s published thresholds, the lifetime label names and the detection rules' preset
names: plain Python, importable without torch, so the tracers' light configs (and the CLI's
`--help`) take their defaults from here. The one home of these values; `attn_sink_circuits.sinks.secondary`
and `attn_sink_circuits.sinks.rules` re-export them."""

from __future__ import annotations

TAU = 0.95
"""Wong et al.'s cosine threshold as stated in the paper; their public code uses 0.9."""
AUTHORS_TAU = 0.9
"""The cosine threshold in Wong et al.'s public code (their test is |cos| > 0.9)."""
NOISE_FRACTION = 4 / 40
"""Runs of at most this fraction of the depth are noise. The authors' rule for L layers is
`4 < n < L - 15` secondary, `n >= L - 15` primary-like, else noise, tuned for 36-48-layer
models; written as fractions of a 40-layer model (4/40, 15/40) it scales to any depth and
gives the authors' numbers at L = 40."""
PRIMARY_FRACTION = 15 / 40
"""Runs longer than (1 - this) of the depth are primary-like (see NOISE_FRACTION)."""
LABELS = ("secondary", "primary-like", "noise")
"""Lifetime labels; the authors' code calls primary-like events `bos_sink`."""
RULE_NAMES = ("paper", "authors_code", "library")
"""The detection rule presets (`attn_sink_circuits.sinks.rules.RULES`); `library` is the default."""
DEFAULT_RULE = "library"
