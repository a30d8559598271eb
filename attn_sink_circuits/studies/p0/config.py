"""`P0Config`: every setting of the P0-sink tracer, with its default and what it means."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from attn_sink_circuits.config import Config, nested, option
from attn_sink_circuits.studies.edge_config import EdgeFitConfig

NODE_ABLATION = "mean-over-positions at P0"
"""How a component is removed at P0 in the node-level experiments (3-6): its activation there
is replaced by its mean over the other positions of the same text (keeps activations
on-distribution; zero ablation of an MLP at P0 would also erase the token's ordinary content).
The edge circuit's ablation is `edge.discovery.ablation` (`--edge-ablation`)."""


@dataclass(frozen=True)
class P0Config(Config):
    """Settings of `trace_p0` (Peng et al. 2026 give no numbers; these are the library's): the
    node-level experiments' own, and `edge`, the edge circuit's (`EdgeFitConfig`: split,
    tokens and every discovery setting; flat names `edge_...`, CLI `--edge-...`)."""

    n_texts: int = option(
        4, "fit texts used by the node-level experiments (variants, localisation)", low=1
    )
    n_tokens: int = option(
        24, "tokens per text (texts are cut to one length so patched runs batch)", low=4
    )
    seed: int = option(0, "seed for the random first tokens and the random control", low=0)
    keep_share: float = option(
        0.2,
        "a head or MLP joins the circuit when ablating it at P0 lowers the late P0 attention by "
        "at least this share of the strongest such effect of its kind",
        low=0,
        high=1,
        low_open=True,
    )
    jump_factor: float = option(
        2.0,
        "block l amplifies P0 when the P0 norm grows at least this many times across it (and "
        "the state is massive after it)",
        low=1,
        low_open=True,
    )
    massive_ratio: float = option(
        10.0,
        "the P0 state is massive when its norm exceeds this many times the median norm of the "
        "other positions (attn_sink_circuits.sinks.MASSIVE_RATIO)",
        low=0,
        low_open=True,
    )
    eps: float = option(
        0.3,
        "Gu et al.'s sink threshold on a head's attention to a position (sink rate)",
        low=0,
        high=1,
        low_open=True,
    )
    n_neurons: int = option(10, "neurons reported per circuit MLP (largest contributions)", low=1)
    n_sink_heads: int = option(
        4, "downstream sink heads (largest late P0 mass) drawn in the circuit graph", low=0
    )
    edge: EdgeFitConfig = nested(
        EdgeFitConfig, "edge circuit (experiment 7): split, tokens, discovery", prefix="edge_"
    )

    def rough(self) -> str:
        return rough_note(self)


QUICK = {
    "edge_n_fit": 6,
    "edge_n_heldout": 6,
    "edge_n_tokens": 32,
    "n_texts": 2,
    "edge_ig_steps": 3,
    "edge_n_curve": 6,
    "edge_n_random": 5,
    "edge_n_boot": 200,
    "edge_n_stability": 10,
    "edge_n_exact_texts": 1,
    "edge_max_exact": 20,
}
"""`circuits p0 --quick`: fewer and shorter texts, fewer integration steps, curve points,
baselines and resamples, for a first result in about two minutes on 2 cores (a rough circuit:
the defaults are the documented runs)."""


def quick(config: P0Config, keep: tuple[str, ...] = ()) -> P0Config:
    """`config` with the `QUICK` settings, except the fields named in `keep` (flat names)."""
    return config.with_options(**{k: v for k, v in QUICK.items() if k not in keep})


def rough_note(config: P0Config) -> str:
    """ "" for a run at the documented settings; else one sentence saying the result is rough and
    which `QUICK` settings are below their defaults (as `--quick` sets them)."""
    flat, default = config.to_flat(), P0Config().to_flat()
    low = [k for k in QUICK if flat[k] < default[k]]
    if not low:
        return ""
    parts = ", ".join(f"{k.replace('_', '-')} {flat[k]} (default {default[k]})" for k in low)
    return (
        f"Rough result: a quick run, with settings below the documented defaults ({parts}); "
        "read its numbers as a first look, not as the documented result."
    )


def check_texts(texts: str | Path | None, config: P0Config) -> None:
    """Refuse, in one line, a texts file (None: the default texts) that is malformed or holds
    fewer texts than the edge circuit's fit and held-out judgement need (`circuits p0` checks
    this before the model loads)."""
    from attn_sink_circuits.core.texts import DEFAULT_TEXTS, read_texts

    n_texts = len(read_texts(DEFAULT_TEXTS if texts is None else texts))
    edge = config.edge
    if n_texts < edge.n_fit + edge.n_heldout:
        raise ValueError(
            f"{texts or DEFAULT_TEXTS} holds {n_texts} texts; --edge-n-fit {edge.n_fit} + "
            f"--edge-n-heldout {edge.n_heldout} are needed (add texts or lower them)"
        )
