"""`DiscoveryConfig`: every setting of edge discovery, with its default and what it means. Light
(no torch), so the CLI can build its options for `--help` at once."""

from __future__ import annotations

from dataclasses import dataclass

from circuits.config import Config, option

METHODS = ("eap", "eap_ig")
ABLATIONS = ("mean", "resample", "zero")
"""mean: each sender's mean output over the reference positions (positions outside the ablated
ones, never position 0) of the same text; resample: its output at the same position in another
text (a seeded derangement of the texts); zero: 0."""
GROW = ("greedy", "top")
RANK_BY = ("abs", "signed")


@dataclass(frozen=True)
class DiscoveryConfig(Config):
    """Settings of `discover`; the anchors' defaults where they give one (target 0.8 from the
    issue, EAP-IG and greedy growth from Hanna et al. 2024), the library's otherwise."""

    method: str = option("eap_ig", "edge scores: eap or eap_ig", choices=METHODS)
    ig_steps: int = option(8, "integration steps of eap_ig (midpoint rule)", low=1)
    target: float = option(
        0.8, "faithfulness the circuit must reach on the fit texts", low=0, high=1, low_open=True
    )
    ablation: str = option(
        "mean",
        "value of an ablated sender: mean (its mean over the text's other positions, never "
        "position 0), resample (another text's) or zero",
        choices=ABLATIONS,
    )
    grow: str = option(
        "greedy",
        "greedy (from the targets backwards, always the best edge into the circuit so far, as "
        "EAP-IG's apply_greedy) or top (the top-n edges anywhere)",
        choices=GROW,
    )
    rank_by: str = option(
        "abs", "order edges by |score| (abs, as EAP) or by signed score", choices=RANK_BY
    )
    n_curve: int = option(12, "circuit sizes on the faithfulness curve", low=2)
    n_random: int = option(10, "random circuits of the circuit's size for the baseline", low=0)
    n_boot: int = option(1000, "bootstrap resamples of texts for the interval", low=0)
    n_stability: int = option(50, "bootstrap resamples of the fit texts for edge stability", low=0)
    n_exact_texts: int = option(
        2, "fit texts on which circuit edges get exact direct effects", low=0
    )
    max_exact: int = option(
        100, "circuit edges (largest scores first) given exact direct effects", low=0
    )
    batch_size: int = option(64, "sequences in one forward", low=1)
    seed: int = option(0, "seed for random circuits and resampling", low=0)


__all__ = ["ABLATIONS", "GROW", "METHODS", "RANK_BY", "DiscoveryConfig"]
