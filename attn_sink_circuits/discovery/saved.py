"""Judge a saved circuit graph on new texts: rebuild its metric, ablation and edge set from the
graph's attributes and measure its faithfulness there, with the same baselines as `discover`."""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Sequence
from pathlib import Path

import networkx as nx
import torch

from attn_sink_circuits.core.identity import model_hash, model_key, same_model
from attn_sink_circuits.core.tokens import token_rows
from attn_sink_circuits.discovery.chunk_runner import judging_runner
from attn_sink_circuits.discovery.evaluation import N_BOOT, N_RANDOM
from attn_sink_circuits.discovery.forward import EdgeRunner
from attn_sink_circuits.discovery.judge import judge
from attn_sink_circuits.discovery.pairs import Pairs
from attn_sink_circuits.graph.eap_ig import from_eap_ig, shape_of
from attn_sink_circuits.patching.metrics import PAIRS_SPEC, build_metric
from attn_sink_circuits.runs.steps import Steps


def check_model(graph: nx.DiGraph, model) -> None:
    """Refuse `model` unless the circuit in `graph` was found on it (`same_model`)."""
    key, have_hash = model_key(model), model_hash(model)
    want_hash = graph.graph.get("model_hash", "")
    if not same_model(graph.graph.get("model"), want_hash, model):
        replaced = ": the same name with other weights" if graph.graph.get("model") == key else ""
        raise ValueError(
            f"this circuit was found on model {graph.graph.get('model')!r} "
            f"(hash {want_hash[:12] or '-'}), not on {key!r} (hash {have_hash[:12] or '-'})"
            f"{replaced}; evaluate it with --model set to the model it was found on"
        )


def _edge_mask(graph: nx.DiGraph, runner: EdgeRunner) -> torch.Tensor:
    sp = runner.space
    pairs = runner.corrupt is not None
    index = {name: i for i, name in enumerate(sp.edge_names())}
    target = f"target:{runner.metric.name}"
    targets = [r.node for r in sp.receivers if r.kind == "target"]
    mask = torch.zeros(sp.n_edges, dtype=torch.bool)
    missing = []
    for u, v, data in graph.edges(data=True):
        if data.get("edge_kind") != "direct":
            continue
        # A graph has one target; its name follows the metric's (pairs name their count).
        at_target = v == target or (pairs and v.startswith("target:"))
        receiver = targets[0] if at_target and len(targets) == 1 else v
        name = f"{u}->{receiver}"
        if name not in index:
            missing.append(name)
            continue
        mask[index[name]] = True
    if missing:
        raise ValueError(
            f"{len(missing)} edges of the graph are not edges of this model's residual DAG "
            f"(e.g. {missing[0]}); the graph was made for another model or metric"
        )
    if not mask.any():
        raise ValueError(
            "the graph has no circuit edges (edge_kind 'direct'); give a graph written by "
            "`circuits p0` or `attn_sink_circuits.discovery.circuit_graph`"
        )
    return mask


JUDGE_STEPS = ("tokens", "clean run", "circuits")
"""The steps of `judge_saved`, as its progress bar names them: the texts cut to tokens (not for
pairs), the clean run (with the ablation's activations), and the circuits: the circuit, the
empty one, its complement and the random ones, with the bootstrap interval."""


TASK_PAIRS = 32
"""Pairs `judge_saved` makes when it is given a task's name (`circuits faithfulness --n-pairs`)."""


def judge_saved(
    model,
    graph: nx.DiGraph | str | Path,
    texts: Sequence[str] | Pairs | str | Path,
    *,
    n_random: int = N_RANDOM,
    n_boot: int = N_BOOT,
    seed: int = 0,
    batch_size: int = 64,
    progress: bool = False,
) -> dict:
    """Faithfulness of the circuit in `graph` (a graph, or the path of a saved one) on `texts`
    (cut to the graph's `n_tokens`, with its first token at position 0 when it has one), with a
    bootstrap interval over texts, the mean and spread of `n_random` random circuits of the
    same number of edges and the complement's faithfulness. `texts`: a list, the path of a
    texts file, `Pairs`, or a task's name ("ioi"): `TASK_PAIRS` pairs of it (seed `seed`) made
    as the circuit's own were (its partner, protocol, padding and BOS:
    `attn_sink_circuits.discovery.recorded.judging_pairs`). A circuit found on counterfactual pairs
    (metric_spec {"metric": "pairs"}, e.g. IOI, or read from an EAP-IG file) is judged on pairs.
    With `progress`, a bar on stderr names each step (`JUDGE_STEPS`)."""
    graph, texts, judged = _inputs(model, graph, texts, seed)
    pairs = graph.graph.get("metric_spec") == PAIRS_SPEC or isinstance(texts, Pairs)
    if not pairs:
        _check_text_graph(graph)
    with Steps(len(JUDGE_STEPS) - pairs, "faithfulness", progress) as steps:
        if pairs:
            runner, mask = steps.run("clean run", _judge_pairs, model, graph, texts, batch_size)
        else:
            runner, mask = _text_runner(steps, model, graph, texts, seed)
        result = steps.run("circuits", _summary, runner, mask, n_random, n_boot, seed, batch_size)
    return {**judged, **result}


def _inputs(model, graph, texts, seed: int) -> tuple:
    """(graph, texts or pairs, what the pairs were made under) from `judge_saved`'s arguments: a
    graph's path read, a task's name made into pairs as the circuit's were (each setting that
    differs from the record a UserWarning), a texts file read."""
    from attn_sink_circuits.core.texts import read_texts
    from attn_sink_circuits.discovery.recorded import judging_pairs
    from attn_sink_circuits.graph.io import read
    from attn_sink_circuits.runs.io import stored
    from attn_sink_circuits.studies.ioi import TASKS

    path = None
    if isinstance(graph, str | Path):
        path = stored(graph)
        if not path.is_file():
            raise FileNotFoundError(f"{graph}: no such circuit graph file")
        graph = read(path)
    if isinstance(texts, str) and texts in TASKS:
        texts, how = judging_pairs(model, graph, texts, TASK_PAIRS, seed, path=path)
        for note in how.notes:
            warnings.warn(note, UserWarning, stacklevel=3)
        return graph, texts, {"protocol": how.protocol.name, "partner": how.partner}
    if isinstance(texts, str | Path):
        texts = read_texts(texts)
    return graph, texts, {}


def _check_text_graph(graph: nx.DiGraph) -> None:
    """Refuse a graph that cannot be judged on new texts, before any work."""
    need = ("metric_spec", "positions", "n_tokens", "first_token")
    absent = [k for k in need if k not in graph.graph]
    if absent:
        raise ValueError(
            f"the graph lacks {', '.join(absent)}: it was not written by edge discovery "
            "(`circuits p0` or `attn_sink_circuits.discovery.circuit_graph`)"
        )
    positions = json.loads(graph.graph["positions"])
    if positions and isinstance(positions[0], list):
        raise ValueError(
            "this circuit was found with positions chosen per text (secondary sinks); they do "
            "not carry over to new texts, so it cannot be judged here"
        )


def _text_runner(steps: Steps, model, graph: nx.DiGraph, texts, seed: int):
    """(runner, circuit mask) on `texts` cut as the graph's fit texts were (steps "tokens" and
    "clean run")."""
    check_model(graph, model)
    metric = build_metric(json.loads(graph.graph["metric_spec"]))
    first = int(graph.graph["first_token"])
    tokens = steps.run(
        "tokens", token_rows, model, list(texts), int(graph.graph["n_tokens"]),
        None if first < 0 else first,
    )  # fmt: skip
    config = json.loads(graph.graph.get("config", "{}"))
    runner = steps.run(
        "clean run", EdgeRunner, model, tokens, metric,
        positions=json.loads(graph.graph["positions"]), ablation=config.get("ablation", "mean"),
        seed=seed, kv_inputs=config.get("kv_inputs", "grouped"),
    )  # fmt: skip
    return runner, _edge_mask(graph, runner)


def _judge_pairs(model, graph: nx.DiGraph, pairs, batch_size: int) -> tuple:
    if graph.graph.get("metric_spec") != PAIRS_SPEC:
        raise ValueError(
            "this circuit was not found on text pairs (its metric is "
            f"{graph.graph.get('metric', '?')!r}); judge it on a text file, not on pairs"
        )
    if not isinstance(pairs, Pairs):
        raise ValueError(
            "this circuit was found on counterfactual text pairs; judge it on pairs "
            "(--pairs FILE or --task ioi)"
        )
    check_model(graph, model)
    kv_inputs = json.loads(graph.graph.get("config") or "{}").get("kv_inputs", "grouped")
    runner = judging_runner(model, pairs, batch_size=batch_size, kv_inputs=kv_inputs)
    return runner, _edge_mask(graph, runner)


_KV_EDGE = re.compile(r"^(.+)->a(\d+)\.h(\d+)<([kv])>$")


def ungrouped_file(data: dict, n_heads: int, n_kv_heads: int) -> bool:
    """True when an EAP-IG / MIB file's circuit tells apart the query heads of one key/value
    head (their k or v edges from one sender not all in or all out of the graph): a circuit on
    MIB's ungrouped graph, which folding onto the shared k / v inputs would change."""
    group = n_heads // n_kv_heads
    seen: dict[tuple, bool] = {}
    for name, info in data["edges"].items():
        m = _KV_EDGE.match(name)
        if group == 1 or m is None or not isinstance(info, dict):
            continue
        kept = bool(info.get("in_graph"))
        if seen.setdefault((m[1], m[2], int(m[3]) // group, m[4]), kept) != kept:
            return True
    return False


def eap_ig_circuit(data: dict, model, source: str = "graph") -> nx.DiGraph:
    """An EAP-IG / MIB graph dict as a circuit graph `judge_saved` takes (on pairs): its
    in-graph edges, on `model` (the file names no model; its cfg must match the model's). A
    file whose circuit tells apart the query heads of a key/value head (`ungrouped_file`) is
    read on the ungrouped graph, edge for edge; any other onto the model's own k / v inputs."""
    shape = shape_of(model)
    cfg = data.get("cfg", {})
    if (cfg.get("n_layers"), cfg.get("n_heads")) != (shape["n_layers"], shape["n_heads"]):
        raise ValueError(
            f"{source}: its cfg has {cfg.get('n_layers')} layers x {cfg.get('n_heads')} heads; "
            f"this model has {shape['n_layers']} x {shape['n_heads']}; give the model it was "
            "found on"
        )
    ungrouped = ungrouped_file(data, shape["n_heads"], shape["n_kv_heads"])
    edges = from_eap_ig(data, shape["n_heads" if ungrouped else "n_kv_heads"], source)
    if not edges:
        raise ValueError(f"{source}: no edge has in_graph true; the circuit is empty")
    g = nx.DiGraph(model=model_key(model), metric_spec=PAIRS_SPEC,
                   metric="pairs", source=source)  # fmt: skip
    if ungrouped:
        g.graph["config"] = json.dumps({"kv_inputs": "ungrouped"})
    for name, score in edges.items():
        u, v = name.split("->")
        g.add_edge(u, v, edge_kind="direct", estimated_effect=score)
    return g


def _summary(runner: EdgeRunner, mask, n_random: int, n_boot: int, seed: int, batch_size: int):
    """Faithfulness of `mask` on the runner's texts with its interval and baselines (`judge`)."""
    held, _, _ = judge(
        runner, mask, n_random=n_random, n_boot=n_boot, seed=seed, batch_size=batch_size
    )
    return {
        "faithfulness": held.faithfulness,
        "faithfulness_ci": list(held.faithfulness_ci),
        "random_faithfulness": held.random_mean,
        "random_faithfulness_sd": held.random_sd,
        "complement_faithfulness": held.complement_faithfulness,
        "n_edges": int(mask.sum()),
        "n_texts": held.n_texts,
        "metric": runner.metric.name,
        "model_metric": held.model_metric,
        "empty_metric": held.empty_metric,
        "circuit_metric": held.circuit_metric,
    }


__all__ = ["JUDGE_STEPS", "TASK_PAIRS", "check_model", "eap_ig_circuit", "judge_saved"]
