"""Controls for two of Wong et al.'s secondary-sink claims, measured on the model and the corpus
of a saved secondary trace (its traces, its events, its sink tokens):

    valley_control   does the primary sink dip because of the secondary sinks? The same layers,
                     the same queries, with and without them: each text's sink tokens lose their
                     forming MLP's output (replaced by the mean over the text's other positions,
                     which keeps them from becoming sinks) and the P0 attention mass of the
                     queries after the first sink is read in the sinks' active layers, clean and
                     ablated. Comparing layers with and without secondaries instead confounds
                     them with depth.
    matched_rank     are the future sinks' MLP inputs low-rank because they become sinks, or
                     because they are few token strings? Controls are the same token strings at
                     positions where they do not become sinks, as many per string as sinks."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from jaxtyping import Float
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from attn_sink_circuits.core.sites import hook_name
from attn_sink_circuits.runs.io import stored
from attn_sink_circuits.runs.record_paths import recorded_file
from attn_sink_circuits.stats import variance_spectrum
from attn_sink_circuits.studies.claims.config import ClaimsConfig
from attn_sink_circuits.studies.claims.secondary import premise
from attn_sink_circuits.studies.claims.secondary_tables import SecondaryTables
from attn_sink_circuits.studies.claims.verdict import bootstrap
from attn_sink_circuits.studies.secondary.corpus import (
    make_corpus,
    project_traces,
    unique_positions,
)


def trace_rows(model: TransformerBridge, folder: str | Path) -> list[list[int]]:
    """The token rows a saved `circuits secondary` run traced: the traces file its provenance
    names (`recorded_file`), else (none named, or not found here) the project's traces of this
    model (`data/traces/KEY.jsonl`), as many as it traced; checked against its events (each
    event's token must sit at its position)."""
    from attn_sink_circuits.core.traces import read_traces

    folder = Path(folder)
    doc = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    source = ((doc.get("provenance") or {}).get("texts") or {}).get("source")
    n = doc.get("settings", {}).get("n_texts")
    info = getattr(model, "circuits_info", None)
    key = info.key if info else model.cfg.model_name
    found = recorded_file(source)  # a relative path from the repository; <outside>: not here
    traces = read_traces(found)[:n] if found else project_traces(key, n)
    rows = make_corpus(model, traces).rows
    events = pd.read_csv(stored(folder / "events.csv"), keep_default_na=False, dtype={"token": str})
    for e in events.itertuples():
        row = rows[e.text] if e.text < len(rows) else []
        found = model.to_string([row[e.position]]) if e.position < len(row) else None
        if found != e.token:
            raise ValueError(
                f"{folder}: event {e.text}:{e.position} is {e.token!r}, the traces found hold "
                f"{found!r} there; the run used other traces: re-run `circuits secondary`"
            )
    return rows


def _mean_elsewhere(positions: list[int]):
    """Hook: the output at `positions` becomes its mean over the other positions >= 1."""

    def hook(x: Tensor, hook) -> Tensor:
        keep = torch.ones(x.shape[1], dtype=torch.bool)
        keep[[0, *positions]] = False
        x = x.clone()
        x[:, positions] = x[:, keep].mean(1, keepdim=True)
        return x

    return hook


@torch.no_grad()
def valley_control(
    model: TransformerBridge, rows: list[list[int]], sinks: pd.DataFrame
) -> pd.DataFrame:
    """Per text with sink tokens: the sinks' active layers, the queries after its first sink,
    their P0 attention mass (mean over those layers, heads and queries) clean and with the sinks'
    forming MLP output replaced (`_mean_elsewhere` at each sink's l_start), `dip` = 1 - clean /
    ablated, and the sinks' mean cosine with P0's state at their l_start, clean and ablated."""
    out = []
    sinks = sinks.astype({"layer": int, "lifetime": int, "position": int})
    for text, g in sinks.groupby("text"):
        tokens = torch.tensor([rows[text]]).to(model.cfg.device)
        active = sorted({a for r in g.itertuples() for a in range(r.layer, r.layer + r.lifetime)})
        first = int(g.position.min())
        starts = sorted(g.layer.unique().tolist())
        names = [hook_name("pattern", a) for a in active]
        names += [hook_name("resid_post", s) for s in starts]
        hooks = [(hook_name("mlp_out", s), _mean_elsewhere(g[g.layer == s].position.tolist()))
                 for s in starts]  # fmt: skip
        seen = {}
        for label, fwd in (("clean", []), ("ablated", hooks)):
            with model.hooks(fwd_hooks=fwd):
                _, cache = model.run_with_cache(tokens, names_filter=names)
            mass = torch.stack([cache[hook_name("pattern", a)][0, :, first + 1 :, 0]
                                for a in active])  # fmt: skip
            seen[f"{label}_mass"] = float(mass.mean())
            seen[f"{label}_cos"] = _sink_cos(cache, g)
        out.append(
            {"text": int(text), "n_sinks": len(g), "layers": f"{active[0]}-{active[-1]}",
             "n_queries": tokens.shape[1] - first - 1, **seen,
             "dip": 1 - seen["clean_mass"] / seen["ablated_mass"]}
        )  # fmt: skip
    return pd.DataFrame(out)


def _sink_cos(cache, g: pd.DataFrame) -> float:
    """Mean cosine of the sink tokens' states with P0's, after their l_start block."""
    cos = []
    for r in g.itertuples():
        state = cache[hook_name("resid_post", r.layer)][0]
        cos.append(float(torch.nn.functional.cosine_similarity(state[r.position], state[0], 0)))
    return float(np.mean(cos))


def matched_pairs(
    rows: list[list[int]], sinks: pd.DataFrame, events: pd.DataFrame, seed: int
) -> pd.DataFrame:
    """The sink tokens of the most common l_start, each paired with a control: the same token
    id at a position (with a new prefix) that is never an event, drawn without replacement per
    token id (seeded); a sink whose token has no control left stays unpaired and is dropped.
    Columns: pair, group (sink / control), text, position, token_id, layer."""
    layer = int(sinks.layer.mode().iloc[0])
    mine = sinks[sinks.layer == layer]
    taken = set(zip(events.text, events.position, strict=True))
    unique = unique_positions(rows)
    ids = {rows[r.text][r.position] for r in mine.itertuples()}
    pool: dict[int, list[tuple[int, int]]] = {i: [] for i in ids}
    for t, row in enumerate(rows):
        for p in range(1, len(row)):
            if row[p] in pool and unique[t][p] and (t, p) not in taken:
                pool[row[p]].append((t, p))
    rng = np.random.default_rng(seed)
    out = []
    for r in mine.itertuples():
        options = pool[rows[r.text][r.position]]
        if not options:
            continue
        t, p = options.pop(int(rng.integers(len(options))))
        k = len(out) // 2
        tid = rows[r.text][r.position]
        out += [{"pair": k, "group": "sink", "text": r.text, "position": r.position,
                 "token_id": tid, "layer": layer},
                {"pair": k, "group": "control", "text": t, "position": p, "token_id": tid,
                 "layer": layer}]  # fmt: skip
    return pd.DataFrame(out)


@torch.no_grad()
def mlp_inputs(
    model: TransformerBridge, rows: list[list[int]], where: pd.DataFrame
) -> Float[Tensor, "row d_model"]:
    """The MLP input (after its norm) at each (text, position, layer) of `where`, in order."""
    found = {}
    for (text, layer), g in where.groupby(["text", "layer"]):
        name = hook_name("mlp_in", int(layer))
        _, cache = model.run_with_cache(torch.tensor([rows[text]]).to(model.cfg.device),
                                        names_filter=[name], stop_at_layer=int(layer) + 1)  # fmt: skip
        for i, p in zip(g.index, g.position, strict=True):
            found[i] = cache[name][0, p].float().cpu()
    return torch.stack([found[i] for i in where.index])


def matched_rank(
    model: TransformerBridge,
    rows: list[list[int]],
    tables: Mapping[str, pd.DataFrame],
    config: ClaimsConfig,
) -> pd.DataFrame:
    """One row: the participation ratio of the sinks' MLP inputs over their token-matched
    controls' (`matched_pairs`), with its bootstrap interval over pairs; n pairs, the layer, the
    two ratios, and the token strings with their counts."""
    sinks = tables["forming"][tables["forming"].group == "sink"]
    pairs = matched_pairs(rows, sinks, tables["events"], config.seed)
    if pairs.empty:
        return pd.DataFrame()
    x = mlp_inputs(model, rows, pairs.reset_index(drop=True))
    sink, control = x[pairs.group.to_numpy() == "sink"], x[pairs.group.to_numpy() == "control"]

    def ratio(idx: np.ndarray) -> float:
        return _pr(sink[idx]) / _pr(control[idx])

    iv = bootstrap(ratio, len(sink), level=config.level, n_boot=config.n_boot, seed=config.seed)
    tokens = pd.Series([model.to_string([i]) for i in pairs[pairs.group == "sink"].token_id])
    return pd.DataFrame(
        [{"layer": int(pairs.layer.iloc[0]), "n": iv.n, "ratio": iv.value, "low": iv.low,
          "high": iv.high, "sink_pr": _pr(sink), "control_pr": _pr(control),
          "unpaired": len(sinks[sinks.layer == pairs.layer.iloc[0]]) - iv.n,
          "tokens": ", ".join(f"{t!r} x{c}" for t, c in tokens.value_counts().items())}]
    )  # fmt: skip


def secondary_controls(
    model: TransformerBridge, tables: SecondaryTables, config: ClaimsConfig
) -> dict[str, pd.DataFrame]:
    """`valley_control` and `matched_rank` for the secondary run whose tables (read with their
    folder and events) are given; none when its folder or events are unknown or a premise of
    the claims is absent (nothing to control)."""
    if getattr(tables, "folder", None) is None or "events" not in tables or premise(tables):
        return {}
    rows = trace_rows(model, tables.folder)
    sinks = tables["forming"][tables["forming"].group == "sink"]
    return {
        "valley_control": valley_control(model, rows, sinks),
        "matched_rank": matched_rank(model, rows, tables, config),
    }


def _pr(x: Tensor) -> float:
    return variance_spectrum(x, 1)[1]["participation_ratio"]
