"""`DiscoveryConfig`: every setting of edge discovery, with its default and what it means. Light
(no torch), so the CLI can build its options for `--help` at once."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from attn_sink_circuits.config import Config, option
from attn_sink_circuits.discovery.methods import METHODS


class Ablation(StrEnum):
    """The value an ablated sender takes at the ablated positions."""

    MEAN = "mean"
    """its mean output over the reference positions (outside the ablated ones, never position
    0) of the same text"""
    RESAMPLE = "resample"
    """its output at the same position in another text (a seeded derangement of the texts)"""
    ZERO = "zero"
    """0"""

    @classmethod
    def parse(cls, value: str) -> Ablation:
        """`value` as an Ablation, or a one-line error naming the choices."""
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"unknown ablation {value!r}; use one of {', '.join(cls)}") from None


class Grow(StrEnum):
    """How a circuit grows from edge scores (`evaluation.grow_order`)."""

    GREEDY = "greedy"
    """from the targets backwards, always the best edge into the circuit so far (EAP-IG's
    apply_greedy)"""
    TOP = "top"
    """the top-n edges anywhere (MIB's apply_topn)"""


class RankBy(StrEnum):
    """Which score orders the edges."""

    ABS = "abs"
    """|score| (EAP; MIB's CMD circuits)"""
    SIGNED = "signed"
    """the signed score, in the direction that supports the metric (MIB's CPR circuits)"""


class KvInputs(StrEnum):
    """How the key and value inputs of a grouped-query model's heads are counted in the DAG."""

    GROUPED = "grouped"
    """one k and one v input per key/value head, shared by the query heads of its group (the
    model's own computation; fewer edges)"""
    UNGROUPED = "ungrouped"
    """one k and one v input per query head, each head reading its own copy of the stream (MIB's
    graph, TransformerLens's ungroup_grouped_query_attention); the same model, more edges"""


class IgGrid(StrEnum):
    """Where EAP-IG evaluates the gradient along its path, alpha in [0, 1] (0: ablated, 1: clean)."""

    MIDPOINT = "midpoint"
    """alpha = (k + 0.5) / steps, k = 0..steps-1 (the midpoint rule; this library's default)"""
    LEFT = "left"
    """alpha = k / steps, k = 0..steps-1 (EAP-IG's and MIB's code: the ablated end included, the
    clean end not)"""


class IgInputRun(StrEnum):
    """What EAP-IG-activations' runs of the input group give block 0's q / k / v inputs
    (`attribution.eap_ig_activations`). The two differ only on the edges input -> block 0's
    q / k / v, by about one run in 1 + 2 n_layers."""

    FULL = "full"
    """their gradient at the interpolated input: the definition, and how `eap_ig_inputs` and
    EAP-IG's own EAP-IG-inputs take it (this library's default)"""
    MIB_CODE = "mib_code"
    """none, as EAP-IG's `get_scores_ig_activations` (the code MIB ran): its interpolated
    embedding is a constant outside autograd, so TransformerLens never calls the backward hooks
    of block 0's q / k / v inputs in those runs; every other receiver has its gradient"""


ABLATIONS = tuple(Ablation)
GROW = tuple(Grow)
RANK_BY = tuple(RankBy)
KV_INPUTS = tuple(KvInputs)
IG_GRIDS = tuple(IgGrid)
INPUT_RUNS = tuple(IgInputRun)
BUDGET_OPTIONS = ("batch_size", "grad_batch", "fit_judged")
"""Options that bound a run's memory and time, not what it measures (up to float rounding;
fit_judged judges the curve on fewer fit pairs, which tables say beside the pair counts)."""


@dataclass(frozen=True)
class DiscoveryConfig(Config):
    """Settings of `discover`; the anchors' defaults where they give one (target 0.8 from the
    issue, EAP-IG and greedy growth from Hanna et al. 2024), the library's otherwise."""

    method: str = option(
        "eap_ig",
        f"edge scores: {', '.join(METHODS)} (attn_sink_circuits.discovery.methods)",
        choices=METHODS,
    )
    ig_steps: int = option(
        8, "integration steps of eap_ig, eap_ig_inputs and eap_ig_activations", low=1
    )
    ig_grid: str = option(
        "midpoint",
        "points of the EAP-IG path: midpoint ((k + 0.5) / steps) or left (k / steps, EAP-IG's "
        "and MIB's code); eap_ig_activations always takes MIB's right points (k / steps, k >= 1)",
        choices=IG_GRIDS,
    )
    ig_input_run: str = option(
        "full",
        "eap_ig_activations: what the input's runs give block 0's q / k / v inputs: full (their "
        "gradient, the definition) or mib_code (none, as EAP-IG's code, whose interpolated "
        "embedding is outside autograd; changes only the edges input -> block 0's q / k / v)",
        choices=INPUT_RUNS,
    )
    kv_inputs: str = option(
        "grouped",
        "grouped-query models: grouped (one k / v input per key/value head) or ungrouped (one "
        "per query head, MIB's graph: more edges, same model)",
        choices=KV_INPUTS,
    )
    gradient_at: str = option(
        "clean",
        "eap: run whose gradient scores the edges: clean (Syed et al.'s EAP, EAP-IG's code) or "
        "corrupted (counterfactual pairs only; TransformerLens 4.3's attribution_patch)",
        choices=("clean", "corrupted"),
    )
    target: float = option(
        0.8, "faithfulness the circuit must reach on the fit texts", low=0, high=1, low_open=True
    )
    target_band: tuple[float, ...] = option(
        (0.9, 1.1),
        "faithfulness band [low, high] (f near 1, neither short of nor beyond the model): "
        "size_rule band_by_kind takes the smallest circuit whose f on the fit texts lies in it; "
        "the smallest curve circuit whose held-out f lies in it is reported beside (band_*)",
        low=0,
    )
    size_rule: str = option(
        "band_by_kind",
        "which grown circuit is the circuit: band_by_kind (the smallest whose fit f lies in "
        "target_band for every kind of fit text and overall; none: the nearest to the band) or "
        "target (the smallest whose fit f reaches target; none: the largest)",
        choices=("band_by_kind", "target"),
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
    text_grid: int = option(
        0,
        "sizes of the per-text grid: the grown circuit at this many sizes (half around the "
        "chosen one) on every fit and held-out text, saved for trying size rules later "
        "(attn_sink_circuits.discovery.grid_rules); 0: none (costs as many circuits again as "
        "the curve)",
        low=0,
    )
    n_random: int = option(10, "random circuits of the circuit's size for the baseline", low=0)
    n_boot: int = option(1000, "bootstrap resamples of texts for the interval", low=0)
    n_stability: int = option(50, "bootstrap resamples of the fit texts for edge stability", low=0)
    mib_areas: bool = option(
        True,
        "measure MIB's faithfulness at fixed shares of edges (CPR, CMD; 40 more circuits on the "
        "fit and held-out texts); off saves their time and changes nothing else",
    )
    n_exact_texts: int = option(
        2, "fit texts on which circuit edges get exact direct effects", low=0
    )
    max_exact: int = option(
        100, "circuit edges (largest scores first) given exact direct effects", low=0
    )
    batch_size: int = option(64, "sequences in one forward", low=1)
    grad_batch: int = option(
        16, "fit texts in one gradient pass of edge scoring (memory grows with it)", low=1
    )
    fit_judged: int = option(
        0,
        "counterfactual pairs: fit pairs the growth curve, the size rule and the fit areas are "
        "judged on (the first ones; 0: all). The rest are only scored, this many at a time, "
        "each chunk's runner built and dropped: memory bounded by it, e.g. MIB's 1,000 "
        "attribution pairs with the curve on 100",
        low=0,
    )
    mask_lambdas: tuple[float, ...] = option(
        (0.25, 0.5, 1.0, 2.0, 4.0),
        "mask: sparsity weights of the sweep, each trained from the last (one circuit each); "
        "loss = mean |circuit - model metric| / |model - empty| + weight x the "
        "expected share of edges kept",
        low=0,
        low_open=True,
    )
    mask_target_share: float = option(
        0.0,
        "mask: after the weights of mask_lambdas, train at twice the last weight while the last "
        "circuit keeps more than this share of the edges (e.g. 0.001, MIB's smallest size), so "
        "the sweep's range is set on the fit pairs for the model at hand; 0: the listed weights "
        "only",
        low=0,
    )
    mask_max_weights: int = option(
        16, "mask: at most this many weights in all when mask_target_share extends the sweep",
        low=1,
    )  # fmt: skip
    mask_steps: int = option(48, "mask: optimiser (Adam) steps per sparsity weight", low=1)
    mask_lr: float = option(
        0.1, "mask: learning rate of the edges' log-alphas", low=0, low_open=True
    )
    mask_batch: int = option(8, "mask: fit texts per optimiser step (seeded draw)", low=1)
    mask_init: float = option(
        3.0, "mask: initial log-alpha of every edge (3: each kept with probability ~0.95)", low=0
    )
    mask_warm_start: bool = option(
        False,
        "mask: start from EAP-IG instead (log-alpha = mask_init x (2 q - 1), q the edge's "
        "quantile of |EAP-IG score|); costs one EAP-IG run",
    )
    seed: int = option(0, "seed for random circuits and resampling", low=0)

    def __post_init__(self) -> None:
        super().__post_init__()
        band = self.target_band
        if len(band) != 2 or band[0] >= band[1]:
            raise ValueError(f"target_band must be two numbers low < high, got {list(band)}")
        if not self.mask_target_share < 1:
            raise ValueError(
                f"mask_target_share is a share of the edges below 1, got {self.mask_target_share}; "
                "e.g. 0.001 (MIB's smallest circuit), or 0 for the listed weights only"
            )
        if self.mask_target_share and self.mask_max_weights < len(self.mask_lambdas):
            raise ValueError(
                f"mask_max_weights ({self.mask_max_weights}) is below the {len(self.mask_lambdas)} "
                "weights of mask_lambdas: give at least as many, or fewer weights"
            )


__all__ = [
    "ABLATIONS",
    "BUDGET_OPTIONS",
    "GROW",
    "IG_GRIDS",
    "KV_INPUTS",
    "METHODS",
    "RANK_BY",
    "Ablation",
    "DiscoveryConfig",
    "Grow",
    "IgGrid",
    "KvInputs",
    "RankBy",
]
