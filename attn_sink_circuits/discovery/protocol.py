"""Named protocols for circuits of counterfactual pairs: one name for the settings of the pairs
(partner, padding, how many) and of discovery (`DiscoveryConfig`), and the file a protocol's
benchmark takes.

`mib` is the circuit-localisation track of MIB (Mueller et al. 2025) as its code runs it
(`hannamw/MIB-circuit-track` on `hannamw/EAP-IG`):

- IOI pairs with the `s2_io_flip` partner (the second S replaced by IO; every token before it
  identical), prompts of several lengths right-padded and read at their last real token, the
  tokenizer's BOS token first (`bos=True`: MIB's tokenize_plus prepends it for every model, Qwen
  included, where this library's default does not);
- MIB's graph: q, k and v inputs per query head (`kv_inputs="ungrouped"`; Qwen2.5-0.5B 179,749
  edges, SmolLM2-135M 123,211, GPT-2 small 32,491);
- EAP-IG-inputs with 5 steps on the left points alpha = k / 5, k = 0..4 (`ig_grid="left"`);
- circuits at MIB's ten sizes (`areas.MIB_FRACTIONS`, the top int(k x edges) edges, then
  pruned), CPR = area under f with edges ranked by signed score, CMD = area under |1 - f| ranked
  by |score|, judged on held-out pairs (`discover` saves f and the pruned edge count at every
  size on fit and held-out pairs: `EdgeCircuit.mib`, the summary's "mib");
- 100 fit pairs (MIB's default; its replicate.sh takes 1,000 for IOI) and at least 200 held-out.

What cannot be the same here is said in docs/mib/README.md (weights, MIB's own IOI data set on
the hub, bf16). `write_mib` writes what MIB's evaluator reads: every edge of MIB's graph with its
importance in MIB's sign (positive supports) and the circuit's edges marked in the graph.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from attn_sink_circuits.discovery.config import DiscoveryConfig
from attn_sink_circuits.runs.io import atomic_write


@dataclass(frozen=True)
class Protocol:
    """A named bundle of settings: `settings` (DiscoveryConfig fields), the IOI `partner`,
    whether pairs of several lengths are padded (`pad`), whether the tokenizer's BOS token
    comes first whatever the model's default (`bos`: True; None keeps the default), and the
    default numbers of fit and held-out pairs."""

    name: str
    about: str
    settings: dict = field(default_factory=dict)
    partner: str = "abc"
    pad: bool = False
    bos: bool | None = None
    n_fit: int = 32
    n_heldout: int = 32

    def config(self, **overrides) -> DiscoveryConfig:
        """The protocol's DiscoveryConfig, with `overrides` (field names) on top."""
        return DiscoveryConfig().with_options(**{**self.settings, **overrides})


MIB_SETTINGS = {
    "method": "eap_ig_inputs",
    "ig_steps": 5,
    "ig_grid": "left",
    "kv_inputs": "ungrouped",
    "ablation": "resample",
    "grow": "top",
}
"""The DiscoveryConfig fields MIB's protocol sets (the rest keep the library's defaults; MIB's
sizes, CPR and CMD are computed by every discover run)."""

PROTOCOLS = {
    "library": Protocol(
        "library", "this library's defaults: ABC partner, one token length, grouped k / v inputs, "
        "midpoint EAP-IG", {"ablation": "resample"},
    ),
    "mib": Protocol(
        "mib", "MIB's circuit track (Mueller et al. 2025): s2_io_flip partner, padded prompts, "
        "k / v per query head, EAP-IG-inputs with 5 left points, 100 fit / 200 held-out pairs",
        MIB_SETTINGS, partner="s2_io_flip", pad=True, bos=True, n_fit=100, n_heldout=200,
    ),
}  # fmt: skip
"""Protocol name -> its settings."""


MIB_PUBLISHED = {
    "gpt2": {"random": (0.25, 0.75), "eap": (1.20, 0.03), "eap_ig_inputs": (1.85, 0.03),
             "eap_ig_activations": (1.82, 0.03), "ugs": (0.97, 0.03)},
    "qwen2.5-0.5b": {"random": (0.28, 0.72), "eap": (0.26, 0.15), "eap_ig_inputs": (1.63, 0.02),
                     "eap_ig_activations": (1.63, 0.01), "ugs": (0.98, 0.03)},
}  # fmt: skip
"""MIB's published IOI circuit-localisation results (Mueller et al. 2025, held-out, its ten
sizes): model -> method -> (CPR, CMD). EAP there is the counterfactual EAP (`eap` here);
UGS is its learned mask (the nearest here is `mask`, not the same objective)."""

MIB_BEST_QWEN_IOI = (1.92, 0.01)
"""The best published IOI numbers for Qwen2.5-0.5B (CPR at least, CMD at most): CPR 1.92 from a
retention-calibrated threshold (as quoted in secondary write-ups of that paper), CMD 0.01 from
MIB's EAP-IG-activations row."""


def protocol(name: str) -> Protocol:
    """The protocol named `name` (one of PROTOCOLS), or a one-line error naming them."""
    if name not in PROTOCOLS:
        raise ValueError(f"unknown protocol {name!r}; use one of {', '.join(PROTOCOLS)}")
    return PROTOCOLS[name]


def protocol_name(value) -> str | None:
    """A protocol's name as a run records it: a name, or {"name": ..., "overrides": ...} (None
    when neither)."""
    if isinstance(value, dict):
        value = value.get("name")
    return value if isinstance(value, str) and value else None


def mib_importances(circuit, shape: dict) -> dict:
    """MIB's graph dict of a discovered circuit (`EdgeCircuit`) on a model of `shape`
    (`attn_sink_circuits.graph.eap_ig.shape_of`): every edge scored with its mean score over the fit
    texts (this library's scores already have MIB's sign: positive supports), the circuit's
    edges in the graph. On the grouped graph of a grouped-query model a shared k / v input's
    score goes to each query head of its group (MIB then counts it once per head: run with
    kv_inputs="ungrouped" for MIB's own ranking)."""
    from attn_sink_circuits.graph.eap_ig import eap_ig_dict

    sp = circuit.runner.space
    mean = circuit.scores.mean(0).tolist()
    kept = circuit.mask.tolist()
    edges = {name: (mean[e], kept[e]) for e, name in enumerate(sp.edge_names())}
    return eap_ig_dict(edges, shape, sp.n_heads // sp.n_kv)


def variant_name(summary: dict) -> str:
    """A saved run's method as tables and figures name it: the method, and in brackets each
    setting of its record that differs from its protocol's for that method, those that only
    bound memory and time left out (`BUDGET_OPTIONS`), e.g. "mask (mask_target_share=0.001)"."""
    from attn_sink_circuits.discovery.config import BUDGET_OPTIONS

    method, settings = summary["method"], summary.get("provenance", {}).get("settings", {})
    name = protocol_name(summary.get("protocol")) or "mib"
    default = protocol(name).config(method=method).to_dict()
    changed = [f"{k}={settings[k]}" for k in default
               if k in settings and k not in BUDGET_OPTIONS and settings[k] != default[k]]  # fmt: skip
    return f"{method} ({', '.join(changed)})" if changed else method


def read_mib_scores(path: str | Path, space):
    """Every edge's score in an importance file (`write_mib`'s: MIB's graph, MIB's sign) as a
    tensor in the order of `space`, the ungrouped `EdgeSpace` of the model it was written for
    (the file's edges must be exactly that graph's)."""
    import torch

    from attn_sink_circuits.graph.eap_ig import mib_edge_names

    saved = json.loads(Path(path).read_text(encoding="utf-8"))["edges"]
    names = [mib_edge_names(name)[0] for name in space.edge_names()]
    if set(saved) != set(names):
        raise ValueError(f"{path}: its {len(saved):,} edges are not the {len(names):,} of this "
                         "model's ungrouped graph; give the model the file was written for")  # fmt: skip
    return torch.tensor([float(saved[name]["score"]) for name in names])


def read_run(folder: str | Path) -> dict:
    """The summary.json of an IOI run folder (`IOIResult.save`: `circuits discover`,
    scripts/mib_ioi.py; what its record, curves and circuit are read from), a ValueError naming
    the folder when it holds none or it is not JSON."""
    path = Path(folder) / "summary.json"
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ValueError(f"{folder}: not an IOI run folder ({err})") from None
    if not isinstance(summary, dict) or "provenance" not in summary:
        raise ValueError(f"{path}: not an IOI run's summary (no provenance record)")
    return summary


def write_mib(circuit, shape: dict, path: str | Path) -> Path:
    """`mib_importances` written to `path` as JSON (atomically): the file MIB's
    `Graph.from_json` and `run_evaluation.py --circuit-files` read."""
    text = json.dumps(mib_importances(circuit, shape))
    with atomic_write(path) as fh:
        fh.write(text)
    return Path(path)


__all__ = [
    "MIB_BEST_QWEN_IOI",
    "MIB_PUBLISHED",
    "MIB_SETTINGS",
    "PROTOCOLS",
    "Protocol",
    "mib_importances",
    "protocol",
    "protocol_name",
    "read_mib_scores",
    "read_run",
    "variant_name",
    "write_mib",
]
