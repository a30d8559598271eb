"""The fit texts' edge scores (`discover`'s step 1): the method on the fit runner's texts and,
with `DiscoveryConfig.fit_judged` (counterfactual pairs), on the fit pairs after them, that
many at a time: each chunk's runner built, scored and dropped, so memory is bounded by the
chunk (MIB's 1,000 attribution pairs), each chunk (or all the pairs, scored at once)
checkpointed and read back on a rerun."""

from __future__ import annotations

from pathlib import Path

import torch

from attn_sink_circuits.discovery.config import DiscoveryConfig
from attn_sink_circuits.discovery.forward import EdgeRunner
from attn_sink_circuits.discovery.methods import scorer
from attn_sink_circuits.discovery.methods.base import EdgeScores
from attn_sink_circuits.discovery.pairs import Pairs
from attn_sink_circuits.runs.io import atomic_write


def judged_count(fit_tokens, positions, cfg: DiscoveryConfig) -> int:
    """How many fit texts the fit runner holds (`cfg.fit_judged`, 0: all); scoring the rest a
    chunk at a time needs counterfactual pairs (each text's ablated values its own partner's;
    a mean or a resample drawn within a chunk would depend on the chunk)."""
    n = len(fit_tokens)
    if not cfg.fit_judged or cfg.fit_judged >= n:
        return n
    if not isinstance(fit_tokens, Pairs) or positions is not None:
        raise ValueError(
            f"fit_judged={cfg.fit_judged} (judge the curve on the first fit texts, score the rest "
            "in chunks) needs counterfactual Pairs with positions None; set fit_judged=0 to "
            "judge on every fit text"
        )
    return cfg.fit_judged


def fit_scores(model, fit_tokens, fit: EdgeRunner, cfg, log, checkpoint) -> EdgeScores:
    """The method's scores on the fit runner's texts, then (`cfg.fit_judged`) on the fit pairs
    it does not hold, `cfg.fit_judged` pairs at a time: each chunk's runner is built, scored
    and dropped. With `checkpoint` (a folder, made if missing) the scores of counterfactual
    pairs, each chunk's and the fit runner's, are saved there and read back on a rerun of the
    same pairs and settings (a method scoring the texts as a whole keeps its own checkpoint
    there). Scores in chunks are per pair, so signed (attribution)."""
    if checkpoint is not None:
        Path(checkpoint).mkdir(parents=True, exist_ok=True)
    n = fit.tokens.shape[0]
    if n == len(fit_tokens):
        if checkpoint is None or not isinstance(fit_tokens, Pairs):
            return scorer(cfg.method)(fit, cfg, progress=log, checkpoint=checkpoint)
        return _chunk_scores(model, fit_tokens, cfg, checkpoint, 0, fit, log, whole=True)
    rows = []
    for a in range(0, len(fit_tokens), n):
        chunk = fit_tokens[a : a + n]
        held = (fit, log) if a == 0 else (None, None)  # the fit runner holds the first chunk
        rows.append(_chunk_scores(model, chunk, cfg, checkpoint, a, *held, whole=False).values)
        if log:
            log(f"scored fit pairs {a}-{a + len(chunk) - 1} of {len(fit_tokens)}")
    return EdgeScores(torch.cat(rows), per_text=True, signed=True)


def _chunk_scores(model, chunk: Pairs, cfg, checkpoint, start: int, runner, log, whole: bool):
    """One chunk's per-pair scores (see `fit_scores`), from `checkpoint` when saved there, else
    on `runner` (None: the chunk's own, built here). `whole`: the chunk is every fit pair, so
    a method scoring them as a whole (the mask) is asked for its scores as they are."""
    path = None if checkpoint is None else Path(checkpoint) / f"scores_from_{start}.pt"
    key = {"rows": chunk.rows(), "settings": cfg.to_dict()}
    if path is not None and path.exists():
        saved = torch.load(path, weights_only=True)
        if saved["key"] != key:
            raise ValueError(
                f"{path} holds scores of other pairs or settings; give another checkpoint "
                "folder or delete it"
            )
        return EdgeScores(saved["values"], per_text=True, signed=True)
    if runner is None:
        runner = EdgeRunner(model, chunk, None, positions=None, ablation=cfg.ablation,
                            seed=cfg.seed, kv_inputs=cfg.kv_inputs)  # fmt: skip
    own = checkpoint if start == 0 else None  # a method's own checkpoint (the mask's sweep)
    scores = scorer(cfg.method)(runner, cfg, progress=log, checkpoint=own)
    if not scores.per_text and whole:
        return scores  # the mask's sweep: its own checkpoint keeps it
    if not scores.per_text:
        raise ValueError(
            f"method {cfg.method} scores the fit texts as a whole, so they cannot be scored in "
            "chunks; give fit_judged=0 or a per-text method (eap, eap_ig, eap_ig_inputs, "
            "eap_ig_activations)"
        )
    if path is not None:
        with atomic_write(path, "wb") as fh:
            torch.save({"key": key, "values": scores.values}, fh)
    return scores


__all__ = ["fit_scores", "judged_count"]
