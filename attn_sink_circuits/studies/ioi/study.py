"""`run(model, data, config) -> IOIResult`: the IOI edge circuit under a named protocol (MIB's
circuit track by default), fitted on some pairs and judged on the others, with MIB's CPR / CMD
at its ten sizes. The one IOI path: `circuits discover --task ioi` and the IOI scripts call it."""

from __future__ import annotations

import json
import resource
import time
from pathlib import Path

from attn_sink_circuits.discovery import circuit_graph, discover
from attn_sink_circuits.discovery.recorded import record_pairs
from attn_sink_circuits.runs.provenance import provenance
from attn_sink_circuits.studies.ioi.config import IOIConfig, as_config
from attn_sink_circuits.studies.ioi.data import Data, ioi_inputs
from attn_sink_circuits.studies.ioi.heads import behaviour, head_table
from attn_sink_circuits.studies.ioi.result import IOIResult


def run(
    model,
    data: Data = None,
    config: IOIConfig | object = None,
    *,
    progress: bool = False,
    checkpoint: str | Path | None = None,
) -> IOIResult:
    """The IOI circuit of `model` on `data` under `config`.

    `data`: None or "ioi" (IOI pairs generated as the protocol says: its partner, padding and
    BOS, `config.pair_seed`), a JSONL pairs file or rows {clean, corrupt, answer, wrong} (drawn
    in an order seeded by `config.pair_seed`), `Pairs` (in order) or (fit, held-out) `Pairs`.
    `config`: an `IOIConfig`, a `DiscoveryConfig` (under MIB's protocol's pairs), a protocol or
    its name, or None (MIB's protocol, as `circuits discover --task ioi --protocol mib`).
    With `config.heads`, also the model's own logit difference on the pairs and every head's
    name-mover table on the held-out pairs (`attn_sink_circuits.studies.ioi.heads`).
    `checkpoint`: a folder keeping what a stopped run did (`discover`'s). A bad input is a
    ValueError in one line, before any model work."""
    config = as_config(config)
    pairs = ioi_inputs(model, data, config)
    started = time.perf_counter()
    circuit = discover(model, pairs.fit, pairs.held, None, positions=None,
                       config=config.discovery, progress=progress, checkpoint=checkpoint)  # fmt: skip
    seconds = time.perf_counter() - started
    graph = circuit_graph(circuit, model, data=pairs.source, metric_spec={"metric": "pairs"})
    graph.graph["protocol"] = json.dumps(
        {"name": config.protocol, "overrides": config.overrides()}, sort_keys=True
    )
    record_pairs(graph, pairs.task, pairs.partner, config.named())
    n_fit = len(pairs.fit)
    record = provenance(model, pairs.rows(), split=(range(n_fit), range(n_fit, n_fit + len(pairs.held))),
                        settings=config.discovery.to_dict(), source=pairs.file)  # fmt: skip
    result = IOIResult(model, config, pairs, circuit, graph, record, seconds)
    if config.heads:
        result.behaviour = behaviour(model, pairs.fit, pairs.held)
        result.heads = head_table(model, graph, pairs.held)
    result.peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return result


__all__ = ["run"]
