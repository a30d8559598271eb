"""What to change: sites, value sources, interventions, and labelled grids of them.

Everything here is data; `attn_sink_circuits.patching.engine` runs it. A `Site` names an activation
(kind, layer, head or neuron, positions), a `Value` says what to write there, an
`Intervention` pairs them, and a list of interventions applied together is one patched run.
A `Grid` is a labelled sweep: one cell (a tuple of interventions) per grid point.

Positions are counted from 0 over the whole sequence (BOS included when the model prepends one);
negative positions count from the end and are resolved against the patched run's length.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from torch import Tensor

from attn_sink_circuits.core.sites import PATCH_KINDS, hook_name

SITE_KINDS: tuple[str, ...] = PATCH_KINDS
"""The kinds a `Site` names: `attn_sink_circuits.core.sites.PATCH_KINDS`."""
RESID_KINDS = ("resid_pre", "resid_mid", "resid_post", "attn_out", "mlp_out")
HEAD_KINDS = ("head", "q", "k", "v", "pattern")
HEAD_OUTPUTS = ("z", "result")


def _positions(pos: int | Sequence[int] | None, what: str) -> tuple[int, ...] | None:
    if pos is None:
        return None
    if isinstance(pos, Tensor):
        pos = pos.tolist()
    items = [pos] if isinstance(pos, int) else list(pos)
    if not items or not all(isinstance(p, int) and not isinstance(p, bool) for p in items):
        raise ValueError(
            f"{what} must be an int, a non-empty sequence of ints, or None; got {pos!r}"
        )
    return tuple(items)


@dataclass(frozen=True)
class Site:
    """One activation: `kind` at block `layer`, optionally one head / neuron and some positions.

    kind: resid_pre | resid_mid | resid_post | attn_out | mlp_out (d_model at each position);
    head (one head's output: `output="z"`, attn.hook_z [pos, head, d_head], or `"result"`, its
    contribution in d_model, attn.hook_result); q | k | v (attn.hook_q/k/v; for k and v `head` is
    the key/value-head index, which differs from the query-head index in grouped-query models);
    pattern (attn.hook_pattern; `pos` selects query rows); neuron (mlp.hook_post).
    head / neuron None means all heads / neurons; pos None means all positions.
    """

    kind: str  # one of SITE_KINDS; checked in __post_init__ (with the list of kinds)
    layer: int
    head: int | None = None
    neuron: int | None = None
    pos: int | Sequence[int] | None = None  # stored as a tuple of ints (or None)
    output: Literal["z", "result"] = "z"

    def __post_init__(self) -> None:
        if self.kind not in SITE_KINDS:
            raise ValueError(f"unknown site kind {self.kind!r}; use one of {', '.join(SITE_KINDS)}")
        if not isinstance(self.layer, int) or isinstance(self.layer, bool):
            raise ValueError(f"site layer must be an int, got {self.layer!r}")
        if self.head is not None and self.kind not in HEAD_KINDS:
            raise ValueError(
                f"site kind {self.kind!r} has no heads; drop head={self.head} or use one of "
                f"{', '.join(HEAD_KINDS)}"
            )
        if self.neuron is not None and self.kind != "neuron":
            raise ValueError(f"neuron={self.neuron} needs kind='neuron', not {self.kind!r}")
        if self.output not in HEAD_OUTPUTS:
            raise ValueError(f"head output must be 'z' or 'result', got {self.output!r}")
        if self.output == "result" and self.kind != "head":
            raise ValueError("output='result' applies to kind='head' only")
        object.__setattr__(self, "pos", _positions(self.pos, "site pos"))

    @property
    def hook(self) -> str:
        """The hook point this site lives on."""
        return hook_name("result" if self.output == "result" else self.kind, self.layer)

    def __str__(self) -> str:
        parts = [f"{self.kind}{'/' + self.output if self.output == 'result' else ''} L{self.layer}"]
        if self.head is not None:
            parts.append(f"H{self.head}")
        if self.neuron is not None:
            parts.append(f"N{self.neuron}")
        parts.append("pos=all" if self.pos is None else f"pos={list(self.pos)}")
        return " ".join(parts)


ValueKind = Literal["copy", "zero", "mean", "resample", "scale"]


@runtime_checkable
class Cache(Protocol):
    """Activations by hook name: a dict, or TransformerLens's ActivationCache."""

    def __getitem__(self, name: str) -> Tensor: ...

    def keys(self): ...


Ref = Tensor | Mapping[str, Tensor] | Cache


@dataclass(frozen=True, eq=False)
class Value:
    """What an intervention writes at its site. Build with the classmethods.

    `ref` is another run: its tokens [batch, pos] (the engine runs it once) or a cache of it
    (a mapping hook name -> activation [batch, pos, ...], e.g. an ActivationCache).
    """

    kind: ValueKind
    ref: Ref | None = None
    src_pos: tuple[int, ...] | None = None
    over_positions: bool = False
    factor: float = 1.0
    seed: int = 0
    name: str = field(default="", compare=False)

    @classmethod
    def from_run(cls, ref: Ref) -> Value:
        """The other run's activation at the same site and positions (lengths must match).

        Denoising: patch the clean run into the corrupt one (tokens=corrupt, ref=clean);
        noising: the reverse. `ref` with one row serves every row of the patched batch; with as
        many rows as the patched batch, row i is patched from row i.
        """
        return cls("copy", ref=ref, name="from_run")

    @classmethod
    def token_swap(cls, src_pos: int | Sequence[int], ref: Ref | None = None) -> Value:
        """Another token's activation: at every site position write the activation at `src_pos`
        (the mean over them if several: the mean of a token set), from the same run when `ref`
        is None (live, after any earlier patch in that run) or from `ref`."""
        src = _positions(src_pos, "token_swap src_pos")
        where = "same run" if ref is None else "other run"
        return cls("copy", ref=ref, src_pos=src, name=f"token_swap(src={list(src)}, {where})")

    @classmethod
    def zero(cls) -> Value:
        """Zero ablation."""
        return cls("zero", name="zero")

    @classmethod
    def mean(cls, ref: Ref, over_positions: bool = False) -> Value:
        """Mean ablation: the mean activation over the rows of `ref` (a dataset), per position
        (lengths must match) or, with `over_positions`, over every row and position. For the
        mean over positions of the patched run itself use `token_swap(positions)`."""
        where = "rows and positions" if over_positions else "rows"
        return cls("mean", ref=ref, over_positions=over_positions, name=f"mean(over {where})")

    @classmethod
    def resample(cls, ref: Ref, seed: int = 0) -> Value:
        """Resample ablation: for each patched row, the activation of one row of `ref` drawn
        uniformly with `seed` (lengths must match)."""
        return cls("resample", ref=ref, seed=seed, name=f"resample(seed={seed})")

    @classmethod
    def scale(cls, factor: float) -> Value:
        """Multiply the run's own activation by `factor` (0 = zero ablation, 1 = no-op)."""
        if not math.isfinite(factor):
            raise ValueError(f"scale factor must be finite, got {factor}")
        return cls("scale", factor=float(factor), name=f"scale({factor:g})")

    def __str__(self) -> str:
        return self.name or self.kind


@dataclass(frozen=True, eq=False)
class Intervention:
    """Write `value` at `site`. A list of interventions applied together is one patched run."""

    site: Site
    value: Value

    def __str__(self) -> str:
        return f"{self.site} <- {self.value}"


@dataclass(eq=False)
class Grid:
    """A labelled sweep: `cells[i]` is the tuple of interventions of grid point i (row-major over
    `dims`, whose values are `coords[dim]`). `site` and `value` label the sweep."""

    dims: tuple[str, ...]
    coords: dict[str, list[int]]
    cells: list[tuple[Intervention, ...]]
    site: str
    value: str

    def __post_init__(self) -> None:
        if not self.cells:
            raise ValueError("a grid needs at least one cell")
        n = math.prod(len(self.coords[d]) for d in self.dims)
        if n != len(self.cells):
            raise ValueError(f"grid shape {self.shape} holds {n} cells, got {len(self.cells)}")

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(self.coords[d]) for d in self.dims)

    @classmethod
    def from_cells(cls, cells: Sequence[Sequence[Intervention]], label: str = "custom") -> Grid:
        """A flat grid (dim "cell") over arbitrary runs, each a list of interventions."""
        runs = [tuple(c) for c in cells]
        for i, run in enumerate(runs):
            if not run or not all(isinstance(iv, Intervention) for iv in run):
                raise ValueError(f"cell {i} must be a non-empty list of Interventions, got {run!r}")
        values = sorted({str(iv.value) for run in runs for iv in run})
        return cls(("cell",), {"cell": list(range(len(runs)))}, runs, label, "; ".join(values))


def _dims(model) -> dict[str, int]:
    cfg = model.cfg
    return {
        "layer": cfg.n_layers,
        "head": cfg.n_heads,
        "kv_head": getattr(cfg, "n_key_value_heads", None) or cfg.n_heads,
        "neuron": cfg.d_mlp,
    }


def _axis(name: str, given: Sequence[int] | None, size: int, what: str) -> list[int]:
    items = list(range(size)) if given is None else list(_positions(given, name))
    bad = [i for i in items if not 0 <= i < size]
    if bad:
        raise ValueError(f"{name} {bad} out of range for {what} (valid: 0..{size - 1})")
    return items


def _n_pos(tokens: Tensor) -> int:
    if not isinstance(tokens, Tensor) or tokens.ndim not in (1, 2) or tokens.shape[-1] == 0:
        raise ValueError("tokens must be a non-empty token tensor [pos] or [batch, pos]")
    return int(tokens.shape[-1])


def _grid(dims, coords, make, site: str, value: Value) -> Grid:
    cells = [
        (Intervention(make(dict(zip(dims, point, strict=True))), value),)
        for point in itertools.product(*(coords[d] for d in dims))
    ]
    return Grid(tuple(dims), coords, cells, site, str(value))


def head_grid(
    model,
    tokens: Tensor,
    value: Value,
    *,
    kind: Literal["head", "q", "k", "v", "pattern"] = "head",
    layers: Sequence[int] | None = None,
    heads: Sequence[int] | None = None,
    positions: Sequence[int] | None = None,
    per_position: bool = True,
    output: Literal["z", "result"] = "z",
) -> Grid:
    """Heads x positions: dims (layer, pos, head) as TransformerLens's `*_by_pos` sweeps, or
    (layer, head) with `per_position=False` (all `positions` patched at once). For k/v the head
    axis is the key/value-head index; for pattern, positions are query rows."""
    if kind not in HEAD_KINDS:
        raise ValueError(f"head_grid kind must be one of {HEAD_KINDS}, got {kind!r}")
    size = _dims(model)
    n_heads = size["kv_head"] if kind in ("k", "v") else size["head"]
    coords = {
        "layer": _axis("layers", layers, size["layer"], "this model's layers"),
        "pos": _axis("positions", positions, _n_pos(tokens), "this sequence"),
        "head": _axis("heads", heads, n_heads, f"{kind} heads"),
    }
    if per_position:
        dims = ("layer", "pos", "head")

        def make(c):
            return Site(kind, c["layer"], head=c["head"], pos=c["pos"], output=output)
    else:
        dims = ("layer", "head")
        pos = None if positions is None else tuple(coords["pos"])

        def make(c):
            return Site(kind, c["layer"], head=c["head"], pos=pos, output=output)

        del coords["pos"]
    return _grid(dims, coords, make, kind, value)


def position_grid(
    model,
    tokens: Tensor,
    value: Value,
    *,
    kind: Literal["resid_pre", "resid_mid", "resid_post", "attn_out", "mlp_out"] = "resid_pre",
    layers: Sequence[int] | None = None,
    positions: Sequence[int] | None = None,
    per_position: bool = True,
) -> Grid:
    """Residual stream / attention output / MLP output x position: dims (layer, pos), or
    (layer,) with `per_position=False` (all `positions` patched at once)."""
    if kind not in RESID_KINDS:
        raise ValueError(f"position_grid kind must be one of {RESID_KINDS}, got {kind!r}")
    coords = {
        "layer": _axis("layers", layers, _dims(model)["layer"], "this model's layers"),
        "pos": _axis("positions", positions, _n_pos(tokens), "this sequence"),
    }
    if per_position:
        return _grid(
            ("layer", "pos"), coords, lambda c: Site(kind, c["layer"], pos=c["pos"]), kind, value
        )
    pos = None if positions is None else tuple(coords["pos"])
    del coords["pos"]
    return _grid(("layer",), coords, lambda c: Site(kind, c["layer"], pos=pos), kind, value)


def neuron_grid(
    model,
    tokens: Tensor,
    value: Value,
    *,
    layers: Sequence[int] | None = None,
    neurons: Sequence[int] | None = None,
    positions: Sequence[int] | None = None,
    per_position: bool = False,
) -> Grid:
    """MLP neurons (mlp.hook_post): dims (layer, neuron) with all `positions` patched at once,
    or (layer, pos, neuron) with `per_position=True`."""
    size = _dims(model)
    coords = {
        "layer": _axis("layers", layers, size["layer"], "this model's layers"),
        "pos": _axis("positions", positions, _n_pos(tokens), "this sequence"),
        "neuron": _axis("neurons", neurons, size["neuron"], "the MLP width"),
    }
    if per_position:
        return _grid(
            ("layer", "pos", "neuron"),
            coords,
            lambda c: Site("neuron", c["layer"], neuron=c["neuron"], pos=c["pos"]),
            "neuron",
            value,
        )
    pos = None if positions is None else tuple(coords["pos"])
    del coords["pos"]
    return _grid(
        ("layer", "neuron"),
        coords,
        lambda c: Site("neuron", c["layer"], neuron=c["neuron"], pos=pos),
        "neuron",
        value,
    )


def resolve_positions(pos: tuple[int, ...] | None, n_pos: int, what: str) -> list[int] | slice:
    """Positions as non-negative indices into a sequence of `n_pos` (slice for all); raises on
    positions beyond the sequence or repeated positions."""
    if pos is None:
        return slice(None)
    bad = [p for p in pos if not -n_pos <= p < n_pos]
    if bad:
        raise ValueError(
            f"{what} {bad} beyond the sequence of {n_pos} tokens (valid: 0..{n_pos - 1} or "
            f"-{n_pos}..-1); pass positions inside the sequence"
        )
    out = [p % n_pos for p in pos]
    if len(set(out)) != len(out):
        raise ValueError(f"{what} {list(pos)} repeats a position")
    return out


def check_site(model, site: Site) -> None:
    """Raise ValueError when `site`'s layer, head or neuron is out of range for `model`."""
    size = _dims(model)
    if not 0 <= site.layer < size["layer"]:
        raise ValueError(
            f"{site}: layer {site.layer} out of range (model has {size['layer']} layers: "
            f"0..{size['layer'] - 1})"
        )
    if site.head is not None:
        n = size["kv_head"] if site.kind in ("k", "v") else size["head"]
        if not 0 <= site.head < n:
            which = "key/value heads" if site.kind in ("k", "v") else "heads"
            raise ValueError(f"{site}: head {site.head} out of range (model has {n} {which})")
    if site.neuron is not None and not 0 <= site.neuron < size["neuron"]:
        raise ValueError(f"{site}: neuron {site.neuron} out of range (d_mlp = {size['neuron']})")
