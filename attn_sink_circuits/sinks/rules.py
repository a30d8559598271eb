"""Secondary-sink detection rules (Wong et al. 2025).

The paper's text, the authors' public code and this library detect secondary sinks in
different ways; each way is a `Rule` (every option a field) and the three presets are `RULES`
(`get_rule(name)`): `paper`, `authors_code` and `library`. `detect(states, rule)` applies one
rule to one text's hidden states; `compare_rules` counts each rule's events over a corpus. The
cosine runs, lifetime labels and sink levels they build on are in `attn_sink_circuits.sinks.secondary`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace

import pandas as pd
import torch
from jaxtyping import Float
from torch import Tensor

from attn_sink_circuits.sinks.constants import (
    AUTHORS_TAU,
    DEFAULT_RULE,
    LABELS,
    NOISE_FRACTION,
    PRIMARY_FRACTION,
    RULE_NAMES,
    TAU,
)
from attn_sink_circuits.sinks.secondary import (
    check_fractions,
    check_tau,
    lifetime_bounds,
    lifetime_label,
    sink_cosine,
    true_runs,
)

CHAT_SINK_CANDIDATES = (0, 1, 2)
PLAIN_SINK_CANDIDATES = (0, 1)
"""Positions the authors' code picks its reference sink from, with and without a chat
template."""


@dataclass(frozen=True)
class Rule:
    """How secondary sinks are detected in one text's hidden states.

    Input convention: `states` are the block outputs, layer l = block l (`blocks.{l}.
    hook_resid_post`, no final norm); with `final_norm` the last layer is replaced by the state
    after the model's final norm, as in Hugging Face's `hidden_states[1:]`, which the authors'
    code uses. (Their runs are in bf16; a rule does not change the model's dtype: the presets
    here see whatever precision the states were computed in, fp32 in this library.)
    """

    name: str = "custom"
    tau: float = TAU
    """A position passes at a layer when its cosine with the reference sink exceeds this."""
    absolute_cos: bool = False
    """Test |cos| > tau (the authors' code) instead of cos > tau: anti-aligned states pass too."""
    sink_candidates: tuple[int, ...] | None = None
    """Positions the reference sink is chosen from, by the largest L2 norm averaged over layers;
    None: every position (the primary sink found by norm, `find_primary_sink`)."""
    after_sink_only: bool = False
    """Only positions after the reference sink are tested (else every position but the sink)."""
    consecutive: bool = True
    """One event per maximal run of consecutive passing layers (l_start = its first layer,
    lifetime = its length). False: one event per position over all its passing layers, not
    necessarily consecutive (l_start = the first, lifetime = how many), as the authors' code."""
    clipper: bool = False
    """Search only the authors' "sink clipper" window (`clipper_window`) of layers."""
    scale_labels: bool = True
    """Lifetime label bounds scaled to the model's depth, or the authors' fixed layer counts
    (`lifetime_bounds`)."""
    noise_fraction: float = NOISE_FRACTION
    primary_fraction: float = PRIMARY_FRACTION
    final_norm: bool = False
    """The last layer's state is taken after the final norm (see the input convention)."""

    def __post_init__(self) -> None:
        check_tau(self.tau)
        check_fractions(self.noise_fraction, self.primary_fraction)
        for f in ("absolute_cos", "after_sink_only", "consecutive", "clipper", "scale_labels",
                  "final_norm"):  # fmt: skip
            if not isinstance(getattr(self, f), bool):
                raise TypeError(f"{f} must be True or False, got {getattr(self, f)!r}")
        cands = self.sink_candidates
        if cands is not None:
            cands = tuple(cands)
            if (
                not cands
                or len(set(cands)) != len(cands)
                or any(not isinstance(p, int) or p < 0 for p in cands)
            ):
                raise ValueError(
                    "sink_candidates must be None or distinct non-negative positions, "
                    f"got {self.sink_candidates!r}"
                )
            object.__setattr__(self, "sink_candidates", cands)

    @classmethod
    def paper(cls) -> Rule:
        """The paper's text: cos > 0.95 with the primary sink (found by norm anywhere), every
        other position, maximal runs of consecutive layers, all layers searched. The text gives
        no label bounds; the authors' code's fixed ones (4 < n < L - 15) are the only
        published ones, so they are used unscaled."""
        return cls(name="paper", scale_labels=False)

    @classmethod
    def authors_code(cls, chat_template: bool = True) -> Rule:
        """The authors' public code (`hidden_state_norm_detection`, `sink_labeling_machine`):
        the sink clipper window, |cos| > 0.9, the reference sink among positions (0, 1, 2)
        with a chat template or (0, 1) without, only positions after it, lifetime = number of
        passing layers (not necessarily consecutive), labels `4 < n < L - 15` secondary,
        `n >= L - 15` bos_sink (= primary-like), else noise; the last layer after the final
        norm. Their map also holds the reference sink itself (its window's layers); it is the
        primary sink, not an event, and is left out here."""
        return cls(
            name="authors_code",
            tau=AUTHORS_TAU,
            absolute_cos=True,
            sink_candidates=CHAT_SINK_CANDIDATES if chat_template else PLAIN_SINK_CANDIDATES,
            after_sink_only=True,
            consecutive=False,
            clipper=True,
            scale_labels=False,
            final_norm=True,
        )

    @classmethod
    def library(cls) -> Rule:
        """This library's default: the paper's rule with the lifetime labels scaled to the
        model's depth (`lifetime_bounds`), since the authors' bounds were tuned on 36-48-layer
        models and call every run of L - 15 layers or more primary-like."""
        return cls(name="library")

    def label(self, lifetime: int, n_layers: int) -> str:
        return lifetime_label(
            lifetime, n_layers, self.noise_fraction, self.primary_fraction, self.scale_labels
        )

    def to_dict(self) -> dict:
        return asdict(self)

    def describe(self, n_layers: int | None = None) -> str:
        """The rule in words (with the label bounds at `n_layers` when given)."""
        test = "|cos|" if self.absolute_cos else "cos"
        sink = "the sink (largest mean norm " + (
            "anywhere)"
            if self.sink_candidates is None
            else f"among positions {', '.join(map(str, self.sink_candidates))})"
        )
        parts = [
            f"{test} > {self.tau:g} with {sink}",
            "positions after it" if self.after_sink_only else "every other position",
            "runs of consecutive layers" if self.consecutive else "passing layers counted",
            "layers of the sink-clipper window" if self.clipper else "all layers",
        ]
        if n_layers is not None:
            lower, upper = lifetime_bounds(
                n_layers, self.noise_fraction, self.primary_fraction, self.scale_labels
            )
            none = " (none at this depth)" if upper <= lower + 1 else ""
            parts.append(f"secondary if {lower:g} < lifetime < {upper:g}{none}")
        else:
            parts.append("labels scaled to depth" if self.scale_labels else "fixed label bounds")
        if self.final_norm:
            parts.append("last layer after the final norm")
        return f"{self.name}: " + ", ".join(parts)


RULES: dict[str, Rule] = {
    "paper": Rule.paper(),
    "authors_code": Rule.authors_code(),
    "library": Rule.library(),
}
"""The presets by name (`authors_code` with a chat template; `Rule.authors_code(False)` without)."""
assert tuple(RULES) == RULE_NAMES, (
    "attn_sink_circuits.sinks.constants.RULE_NAMES must list the presets"
)
RULE_OPTIONS = tuple(f.name for f in fields(Rule) if f.name != "name")
"""Every option of a rule, each settable alone (`get_rule(preset, **options)`)."""


def get_rule(rule: str | Rule, **options) -> Rule:
    """A preset by name (or a `Rule`), with any field changed by `options`, e.g.
    `get_rule("authors_code", clipper=False)`. The name records the options that change a
    value (`authors_code+clipper=False`) unless `name` is given; options that change nothing
    give the rule back as it is."""
    if isinstance(rule, str):
        if rule not in RULES:
            raise ValueError(f"unknown rule {rule!r}; known rules: {', '.join(RULES)}")
        rule = RULES[rule]
    elif not isinstance(rule, Rule):
        raise TypeError(f"rule must be a preset name or a Rule, got {type(rule).__name__}")
    known = {f.name for f in fields(Rule)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ValueError(f"unknown rule options {unknown}; options: {', '.join(sorted(known))}")
    name = options.pop("name", None)
    if "sink_candidates" in options and options["sink_candidates"] is not None:
        options["sink_candidates"] = tuple(options["sink_candidates"])
    changed = {k: v for k, v in options.items() if getattr(rule, k) != v}
    if not changed and name in (None, rule.name):
        return rule
    if name is None:
        name = f"{rule.name}+" + ",".join(f"{k}={v}" for k, v in changed.items())
    return replace(rule, name=name, **changed)


def reference_sink(
    norms: Float[Tensor, "layer pos"], candidates: Sequence[int] | None = None
) -> int:
    """The position with the largest L2 norm averaged over layers, among `candidates` (all
    positions if None; candidates past the end of the text are ignored)."""
    mean = norms.mean(0)
    if candidates is None:
        return int(mean.argmax())
    inside = [p for p in candidates if p < len(mean)]
    if not inside:
        raise ValueError(
            f"no sink candidate {tuple(candidates)} is inside a {len(mean)}-token text"
        )
    return inside[int(mean[inside].argmax())]


def clipper_window(sink_norm: Float[Tensor, " layer"]) -> tuple[int, int]:
    """The authors' "sink clipper": with d = the sink's layer-to-layer norm differences
    (d[i] = norm[i + 1] - norm[i]), start = argmax(d) + 1 (the layer after the largest jump) and
    end = argmin(d[start:]) + start + 1; layers start..end - 1 are searched, returned as
    (start, end). When the largest jump is into the last layer no difference follows it: the
    window is empty, (L - 1, L - 1) (the authors' code fails there)."""
    if len(sink_norm) < 2:
        raise ValueError("the clipper needs at least 2 layers of sink norms")
    diff = sink_norm[1:] - sink_norm[:-1]
    start = int(diff.argmax()) + 1
    rest = diff[start:]
    if not len(rest):
        return start, start
    return start, int(rest.argmin()) + start + 1


@dataclass(frozen=True)
class RuleEvent:
    """One event found by a rule: a position and its passing layers."""

    position: int
    l_start: int
    lifetime: int
    label: str
    layers: tuple[int, ...]
    """The passing layers counted (consecutive for rules with `consecutive`)."""


@dataclass(frozen=True)
class Detection:
    """One rule applied to one text: the reference sink, the layers searched and the events."""

    rule: Rule
    sink: int
    window: tuple[int, int]
    """Layers searched: start..end - 1."""
    events: tuple[RuleEvent, ...]


def detect(
    states: Float[Tensor, "layer pos d_model"],
    rule: str | Rule = DEFAULT_RULE,
    final_state: Float[Tensor, "pos d_model"] | None = None,
) -> Detection:
    """Apply `rule` to one text: `states` are the block outputs (see `Rule`), `final_state` the
    last block's output after the final norm (needed when `rule.final_norm`). Events are
    ordered by position, then l_start."""
    rule = get_rule(rule)
    if states.ndim != 3:
        raise ValueError(f"states must be [layer, pos, d_model], got {tuple(states.shape)}")
    if rule.final_norm:
        if final_state is None or final_state.shape != states.shape[1:]:
            raise ValueError(
                f"rule {rule.name!r} takes the last layer after the final norm: give final_state "
                f"[pos, d_model] = {tuple(states.shape[1:])}, got "
                f"{None if final_state is None else tuple(final_state.shape)}"
            )
        states = torch.cat([states[:-1], final_state[None].to(states)])
    n_layers, n_pos, _ = states.shape
    norms = states.norm(dim=-1)
    sink = reference_sink(norms, rule.sink_candidates)
    start, end = clipper_window(norms[:, sink]) if rule.clipper else (0, n_layers)
    cosine = sink_cosine(states, sink)
    passing = (cosine.abs() if rule.absolute_cos else cosine) > rule.tau
    in_window = torch.zeros(n_layers, dtype=torch.bool, device=passing.device)
    in_window[start:end] = True
    position = torch.arange(n_pos, device=passing.device)
    tested = position > sink if rule.after_sink_only else position != sink
    passing = passing & in_window[:, None] & tested[None]
    if rule.consecutive:
        spans = [(p, tuple(range(s, s + n))) for p, s, n in true_runs(passing)]
    else:
        spans = [
            (p, tuple(passing[:, p].nonzero()[:, 0].tolist()))
            for p in passing.any(0).nonzero()[:, 0].tolist()
        ]
    events = tuple(
        RuleEvent(p, layers[0], len(layers), rule.label(len(layers), n_layers), layers)
        for p, layers in spans
    )
    return Detection(rule, sink, (start, end), events)


def compare_rules(
    states: Iterable[Tensor],
    final_states: Iterable[Tensor] | None = None,
    prompt_lens: Sequence[int] | None = None,
    rules: Mapping[str, Rule] | Sequence[str] = RULE_NAMES,
    natural_ends: Sequence[int | None] | None = None,
) -> pd.DataFrame:
    """Every rule on the same hidden states, one text at a time (so `states` may be a generator
    for bounded memory); the table is `comparison_frame`'s."""
    if not isinstance(rules, Mapping):
        rules = {name: get_rule(name) for name in rules}
    if not rules:
        raise ValueError(f"give at least one rule; known rules: {', '.join(RULES)}")
    needs_final = [name for name, r in rules.items() if r.final_norm]
    if needs_final and final_states is None:
        raise ValueError(
            f"rules {needs_final} need final_states (the last layer after the final norm)"
        )
    finals = iter(final_states) if final_states is not None else None
    found: dict[str, list[Detection]] = {name: [] for name in rules}
    for states_i in states:
        final = next(finals) if finals is not None else None
        for name, r in rules.items():
            found[name].append(detect(states_i, r, final))
    return comparison_frame(found, prompt_lens, natural_ends)


def comparison_frame(
    found: Mapping[str, Sequence[Detection]],
    prompt_lens: Sequence[int] | None = None,
    natural_ends: Sequence[int | None] | None = None,
    unique: Sequence[Sequence[bool]] | None = None,
) -> pd.DataFrame:
    """One row per rule (its detections on the same texts): `tau`, `n_texts`, `events` and the
    events per label; the secondary events on prompt and on generated positions (position >=
    the text's prompt length; columns only with `prompt_lens`) and, of the generated ones, those
    at or after the text's natural end (`natural_ends`: the position where the model would have
    stopped, None where unknown); `secondary_unique` (only positions whose prefix is new, with
    `unique`); `texts_with_secondary`; and the reference sink positions and windows seen
    (layers start-end, inclusive)."""
    sizes = {len(dets) for dets in found.values()}
    if len(sizes) != 1:
        raise ValueError(f"every rule needs one detection per text, got {sorted(sizes)}")
    n_texts = sizes.pop()
    for what, per_text in (("prompt lengths", prompt_lens), ("natural ends", natural_ends),
                           ("unique flags", unique)):  # fmt: skip
        if per_text is not None and len(per_text) != n_texts:
            raise ValueError(f"{len(per_text)} {what} for {n_texts} texts")
    rows = []
    for name, dets in found.items():
        secondary = [(i, e) for i, d in enumerate(dets) for e in d.events if e.label == "secondary"]
        row = {
            "rule": name,
            "tau": dets[0].rule.tau if dets else math.nan,
            "n_texts": n_texts,
            "events": sum(len(d.events) for d in dets),
        }
        for label in LABELS:
            row[label] = sum(e.label == label for d in dets for e in d.events)
        if prompt_lens is not None:
            generated = [(i, e) for i, e in secondary if e.position >= prompt_lens[i]]
            row["secondary_prompt"] = len(secondary) - len(generated)
            row["secondary_generated"] = len(generated)
            if natural_ends is not None:
                row["secondary_after_end"] = sum(
                    natural_ends[i] is not None and e.position >= natural_ends[i]
                    for i, e in generated
                )
        if unique is not None:
            row["secondary_unique"] = sum(bool(unique[i][e.position]) for i, e in secondary)
        row["texts_with_secondary"] = len({i for i, _ in secondary})
        row["sinks"] = ", ".join(map(str, sorted({d.sink for d in dets})))
        row["windows"] = ", ".join(
            f"{s}-{e - 1}" if e > s else "empty" for s, e in sorted({d.window for d in dets})
        )
        rows.append(row)
    return pd.DataFrame(rows)


def layer_ranges(layers: Sequence[int]) -> str:
    """Layers written as ranges: (2, 3, 4, 7) -> '2-4,7'."""
    runs: list[list[int]] = []
    for layer in sorted(layers):
        if runs and layer == runs[-1][1] + 1:
            runs[-1][1] = layer
        else:
            runs.append([layer, layer])
    parts = [str(a) if a == b else f"{a}-{b}" for a, b in runs]
    return ",".join(parts)
