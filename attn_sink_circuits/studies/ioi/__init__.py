"""Indirect object identification (IOI) under MIB's protocol, in three calls:

    from attn_sink_circuits.studies import ioi
    result = ioi.run(model)                 # data and config default to MIB's IOI protocol
    result.summary(); result.graph; result.draw(); result.judge("ioi")

`run(model, data, config) -> IOIResult` (`run`): the IOI pairs (generated here with the
protocol's partner, padding and BOS, or a pairs file, rows or `Pairs` given), the edge circuit
fitted on some and judged on the others, MIB's CPR / CMD at its ten sizes. The prompts and their
partners are `prompts`; the settings `IOIConfig` (`config`); the name-mover heads `name_movers`
and `heads`. Names resolve lazily: importing this package loads no model code."""

from attn_sink_circuits._lazy import lazy_exports

TASKS = ("ioi",)
"""Task names the CLI accepts (`circuits discover --task`)."""
PARTNER_NAMES = ("abc", "s2_io_flip", "abc_before_s2")
"""The IOI partners (the keys of `attn_sink_circuits.studies.ioi.prompts.PARTNERS`, which imports
torch; a test keeps them equal)."""

_EXPORTS = {
    "IOIConfig": "config",
    "IOIResult": "result",
    "run": "study",
    "ioi_pairs": "prompts",
}

__getattr__ = lazy_exports(__name__, _EXPORTS)

__all__ = ["PARTNER_NAMES", "TASKS", *_EXPORTS]
