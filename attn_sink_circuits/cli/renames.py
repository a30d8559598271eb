"""Every flag renamed since the command line was first released: the old spelling keeps working
as a hidden alias that prints one note naming the new flag (`CommandParser.rename`).
CHANGELOG.md's "Renamed flags" table lists the same rows (a test keeps them equal)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rename:
    """`old` became `new` in `commands` at commit `since`."""

    old: str
    new: str
    commands: tuple[str, ...]
    since: str


EDGE_FIT = (
    "method", "ig-steps", "target", "target-band", "ablation", "grow", "rank-by", "n-curve",
    "n-random", "n-boot", "n-stability", "n-exact-texts", "max-exact", "batch-size",
    "grad-batch", "mask-lambdas", "mask-steps", "mask-lr", "mask-batch", "mask-init",
    "mask-warm-start", "no-mask-warm-start",
)  # fmt: skip
"""The discovery settings that took the `--edge-` prefix in p0 and secondary."""
DISCOVER_ONLY = ("gradient-at", "ig-grid", "kv-inputs", "size-rule", "seed")
"""Discovery settings that `discover` spelled bare and the tracers never did."""
JUDGING = ("n-random", "n-boot", "seed")
"""The judging settings `faithfulness` spelled bare and p0 and discover spell `--edge-`."""
TRACERS = ("p0", "secondary")
SPLIT = "fcc9641"
"""The commit that gave the tracers' edge-circuit settings the `--edge-` prefix."""
ONE_SPELLING = "0b950cb"
"""The commit that made `discover` spell them as p0 does (the `attn_sink_circuits/cli/` package)."""
JUDGED_UNDER = "0412e7c"
"""The commit that spelled `faithfulness`'s and `sinks`'s flags as the other commands do."""


def _edge(name: str) -> str:
    """`--edge-` + name (`--no-edge-` + name for a negated switch)."""
    return f"--no-edge-{name[3:]}" if name.startswith("no-") else f"--edge-{name}"


def _edge_renames(commands: tuple[str, ...], since: str, names: tuple[str, ...]) -> list:
    return [Rename(f"--{n}", _edge(n), commands, since) for n in names]


RENAMED: tuple[Rename, ...] = (
    Rename("--tokens", "--n-tokens", ("p0",), "852dbe3"),
    Rename("--file", "--texts", ("p0",), "8b560b1"),
    Rename("--swap-events", "--n-swap-events", ("secondary",), "852dbe3"),
    Rename("--edge-tokens", "--edge-n-tokens", TRACERS, SPLIT),
    *_edge_renames(TRACERS, SPLIT, ("n-fit", "n-heldout", *EDGE_FIT)),
    *_edge_renames(("discover",), ONE_SPELLING, ("n-fit", "n-heldout", *EDGE_FIT, *DISCOVER_ONLY)),
    *_edge_renames(("faithfulness",), JUDGED_UNDER, JUDGING),
    Rename("--file", "--texts", ("sinks",), JUDGED_UNDER),
)


def renamed_in(command: str) -> dict[str, str]:
    """old -> new flag of `command`."""
    return {r.old: r.new for r in RENAMED if command in r.commands}


__all__ = ["EDGE_FIT", "ONE_SPELLING", "RENAMED", "SPLIT", "Rename", "renamed_in"]
