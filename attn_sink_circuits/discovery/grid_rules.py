"""Size rules on a saved per-text grid (`attn_sink_circuits.discovery.text_grid`): which grid
circuit is the circuit, chosen on the fit texts only (the held-out rows of a grid file are
read only to judge the choice, never to make it), without running the model.

Rules (`RULES`), `band` = [low, high] (`RuleConfig.band`, the discovery's `target_band`):

- "band_by_kind": the smallest grid circuit whose fit faithfulness lies in the band for every
  kind of fit text and for all together (the discovery's default rule, on the grid); none:
  the nearest to the band (`size_rule.fallback`).
- "band_stays": the smallest grid circuit from which every larger one meets band_by_kind (a
  dip back out of the band after a first crossing moves the choice past the dip).
- "lower_bound": the smallest grid circuit from which the lower end of the bootstrap interval
  (`RuleConfig.level`, fit texts resampled within each kind) of the fit faithfulness of all
  texts is at least `low` at every larger size.
- "lower_bound_by_kind": the same with the lower end of each kind's interval (a kind's texts
  resampled among themselves) and of all texts.
- "crossval": `RuleConfig.folds` random halvings of the fit texts (each kind halved); on each,
  band_stays on one half, then the smallest size from there on at which the other half meets
  band_by_kind; the circuit is the median of the folds' sizes (an odd number of folds: one of
  them).

The whole model is the largest grid size (faithfulness 1 on every text), so every rule but
band_by_kind always finds a circuit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from attn_sink_circuits.discovery.evaluation import bootstrap_interval, faithfulness
from attn_sink_circuits.discovery.size_rule import ALL, faithfulness_by_kind, fallback, meets


@dataclass(frozen=True)
class RuleConfig:
    """Settings of the grid rules (see the module docstring)."""

    band: tuple[float, float] = (0.9, 1.1)
    level: float = 0.95
    n_boot: int = 1000
    folds: int = 11
    seed: int = 0

    def __post_init__(self) -> None:
        if len(self.band) != 2 or self.band[0] >= self.band[1]:
            raise ValueError(f"band must be two numbers low < high, got {list(self.band)}")
        if not 0 < self.level < 1:
            raise ValueError(f"level is a probability in (0, 1), got {self.level}")
        if self.folds < 1 or self.folds % 2 == 0:
            raise ValueError(f"folds must be odd (the median is one fold's), got {self.folds}")


@dataclass(frozen=True)
class Grid:
    """One split of a grid file: `values` [size, text], sizes ascending."""

    top_n: np.ndarray
    n_edges: np.ndarray
    values: np.ndarray
    model: np.ndarray
    empty: np.ndarray
    kinds: list[str]

    def subset(self, texts: Sequence[int] | np.ndarray) -> Grid:
        idx = np.asarray(texts)
        kinds = [self.kinds[i] for i in idx]
        return Grid(self.top_n, self.n_edges, self.values[:, idx], self.model[idx],
                    self.empty[idx], kinds)  # fmt: skip

    def by_kind(self) -> pd.DataFrame:
        """Faithfulness per size (row) and kind (column, `ALL` last)."""
        return faithfulness_by_kind(self.values, self.model, self.empty, self.kinds)


GRID_COLUMNS = ("split", "top_n", "n_edges", "text", "kind", "value", "model", "empty")


def read_grid(path: str | Path) -> pd.DataFrame:
    """A saved grid table (`.csv` or `.csv.gz`), checked for its columns."""
    path = Path(path)
    if not path.is_file() and Path(f"{path}.gz").is_file():
        path = Path(f"{path}.gz")
    if not path.is_file():
        raise ValueError(f"{path}: no such grid file (a run with --edge-text-grid writes one)")
    frame = pd.read_csv(path)
    missing = [c for c in GRID_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"{path}: not a per-text grid (no column {', '.join(missing)})")
    return frame


def split_grid(frame: pd.DataFrame, split: str) -> Grid:
    """The rows of `split` ("fit" / "heldout") as a `Grid`."""
    rows = frame[frame.split == split]
    if rows.empty:
        raise ValueError(f"the grid has no {split} texts")
    wide = rows.pivot(index="top_n", columns="text", values="value").sort_index()
    texts = rows.drop_duplicates("text").set_index("text").loc[wide.columns]
    sizes = rows.drop_duplicates("top_n").set_index("top_n").loc[wide.index]
    return Grid(wide.index.to_numpy(), sizes["n_edges"].to_numpy(), wide.to_numpy(),
                texts["model"].to_numpy(), texts["empty"].to_numpy(), texts["kind"].astype(str).tolist())  # fmt: skip


def stays_from(ok: np.ndarray) -> int:
    """The first index from which `ok` holds to the end (len(ok) when the last fails)."""
    bad = np.flatnonzero(~np.asarray(ok, dtype=bool))
    return int(bad[-1]) + 1 if len(bad) else 0


def in_band(grid: Grid, band) -> np.ndarray:
    """Per size, whether the faithfulness of every kind and all lies in `band`."""
    return meets(grid.by_kind(), "band_by_kind", 0.0, band).to_numpy()


def kind_groups(kinds: Sequence[str]) -> dict[str, np.ndarray]:
    labels = np.asarray(kinds)
    return {k: np.flatnonzero(labels == k) for k in dict.fromkeys(kinds)}


def boot_lower(grid: Grid, cfg: RuleConfig, seed: int) -> np.ndarray:
    """Per size, the lower end of the `cfg.level` bootstrap interval of the faithfulness of
    all texts, texts resampled within each kind (the same resamples at every size)."""
    rng = np.random.default_rng(seed)
    groups = kind_groups(grid.kinds).values()
    idx = np.concatenate([g[rng.integers(0, len(g), (cfg.n_boot, len(g)))] for g in groups], 1)
    model, empty = grid.model[idx].mean(1), grid.empty[idx].mean(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        f = (grid.values[:, idx].mean(-1) - empty) / (model - empty)
    f = np.where(np.isfinite(f), f, np.nan)
    return np.nanquantile(f, (1 - cfg.level) / 2, axis=1)


def band_by_kind(grid: Grid, cfg: RuleConfig) -> int:
    ok = in_band(grid, cfg.band)
    return int(ok.argmax()) if ok.any() else fallback(grid.by_kind(), "band_by_kind", cfg.band)


def band_stays(grid: Grid, cfg: RuleConfig) -> int:
    return min(stays_from(in_band(grid, cfg.band)), len(grid.top_n) - 1)


def lower_bound(grid: Grid, cfg: RuleConfig) -> int:
    ok = boot_lower(grid, cfg, cfg.seed) >= cfg.band[0]
    return min(stays_from(ok), len(grid.top_n) - 1)


def lower_bound_by_kind(grid: Grid, cfg: RuleConfig) -> int:
    """As lower_bound, with every kind's interval (a kind whose f is undefined is skipped)."""
    ok = boot_lower(grid, cfg, cfg.seed) >= cfg.band[0]
    for i, texts in enumerate(kind_groups(grid.kinds).values()):
        low = boot_lower(grid.subset(texts), cfg, cfg.seed + 1 + i)
        ok &= np.isnan(low) | (low >= cfg.band[0])
    return min(stays_from(ok), len(grid.top_n) - 1)


def halves(kinds: Sequence[str], rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A random halving of the texts, each kind halved (an odd one's extra text in the first)."""
    first, second = [], []
    for texts in kind_groups(kinds).values():
        shuffled = rng.permutation(texts)
        cut = (len(shuffled) + 1) // 2
        first += shuffled[:cut].tolist()
        second += shuffled[cut:].tolist()
    return np.sort(first), np.sort(second)


def crossval(grid: Grid, cfg: RuleConfig) -> int:
    rng = np.random.default_rng(cfg.seed)
    last = len(grid.top_n) - 1
    chosen = []
    for _ in range(cfg.folds):
        a, b = halves(grid.kinds, rng)
        start = band_stays(grid.subset(a), cfg)
        checked = in_band(grid.subset(b), cfg.band) if len(b) else np.ones(last + 1, bool)
        later = np.flatnonzero(checked[start:])
        chosen.append(start + int(later[0]) if len(later) else last)
    return int(np.sort(chosen)[len(chosen) // 2])


RULES: dict[str, Callable[[Grid, RuleConfig], int]] = {
    "band_by_kind": band_by_kind,
    "band_stays": band_stays,
    "lower_bound": lower_bound,
    "lower_bound_by_kind": lower_bound_by_kind,
    "crossval": crossval,
}
"""Rule name -> its function: the fit grid -> the index of the chosen size."""


def choose(frame: pd.DataFrame, rule: str, cfg: RuleConfig = RuleConfig()) -> dict:  # noqa: B008
    """Rule `rule` on the fit rows of a grid table: the chosen grid size (`top_n`, `n_edges`),
    its fit faithfulness and, when the table has held-out rows, its held-out faithfulness with
    the 95% bootstrap interval over held-out texts."""
    if rule not in RULES:
        raise ValueError(f"unknown size rule {rule!r}; use one of {', '.join(RULES)}")
    fit = split_grid(frame, "fit")
    i = RULES[rule](fit, cfg)
    out = {"rule": rule, "top_n": int(fit.top_n[i]), "n_edges": int(fit.n_edges[i]),
           "fit_faithfulness": float(fit.by_kind()[ALL].iloc[i])}  # fmt: skip
    if (frame.split == "heldout").any():
        held = split_grid(frame, "heldout")
        j = int(np.flatnonzero(held.top_n == fit.top_n[i])[0])
        v = held.values[j]
        low, high = bootstrap_interval(v, held.model, held.empty, n_boot=cfg.n_boot, seed=cfg.seed)
        out |= {"heldout_faithfulness": faithfulness(v, held.model, held.empty),
                "heldout_ci_low": low, "heldout_ci_high": high}  # fmt: skip
    return out


def apply_rules(
    frame: pd.DataFrame | str | Path,
    rules: Sequence[str] = tuple(RULES),
    cfg: RuleConfig = RuleConfig(),  # noqa: B008 (frozen)
) -> pd.DataFrame:
    """Every rule of `rules` on a grid table (or the path of a saved one): one row each."""
    if not isinstance(frame, pd.DataFrame):
        frame = read_grid(frame)
    return pd.DataFrame([choose(frame, rule, cfg) for rule in rules])


__all__ = [
    "GRID_COLUMNS",
    "RULES",
    "Grid",
    "RuleConfig",
    "apply_rules",
    "boot_lower",
    "choose",
    "crossval",
    "halves",
    "in_band",
    "read_grid",
    "split_grid",
    "stays_from",
]
