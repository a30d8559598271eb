"""What MIB's circuit-track submission takes (Mueller et al. 2025; `hannamw/MIB-circuit-track`,
"Submitting to the MIB Leaderboard"): per task and model either one importance file (every
edge of MIB's graph scored, MIB's sign: positive supports) or binary circuits at its sizes
(one with at most k of the edges for each k in `areas.MIB_FRACTIONS`).

Both are EAP-IG graph JSON (`attn_sink_circuits.graph.eap_ig`). The importance file of a discover run is
its `importances.mib.json` (`protocol.write_mib`); a circuit graph or a circuit's EAP-IG file
holds scores on its own edges only, so from it only its binary circuit can be written.
`mib_sizes` makes the circuits at MIB's sizes from an importance file as MIB's evaluator does
(`Graph.apply_topn(n, absolute)` then `Graph.prune()`, hannamw/EAP-IG at 7af394a): the top
int(k x edges) edges by score (signed: the most supporting first, as CPR's circuits; or by
|score|, as CMD's), then, until nothing changes, nodes without an in-graph incoming or outgoing
edge dropped (the input counts as fed, the logits as read) and the edges of dropped nodes with
them. Every file keeps the scores (MIB's `Graph.from_json` needs one on every edge).
"""

from __future__ import annotations

import re
from pathlib import Path

IMPORTANCES = "importances.mib.json"
"""The importance file a `circuits discover` run writes beside its other files."""
RUN_FILES = (IMPORTANCES, "circuit.eap-ig.json", "circuit.json")
"""What a run folder is read from, first found first: scores of every edge, else its circuit."""


def importance_file(run: str | Path, root: str | Path | None = None) -> Path:
    """A run folder's importance file: ROOT/<run's name>/`IMPORTANCES` when `root` is given (the
    files are too large to commit beside the docs' copies of the runs), else RUN/`IMPORTANCES`;
    a FileNotFoundError naming the path when it is not there."""
    run = Path(run)
    path = (Path(root) / run.name if root else run) / IMPORTANCES
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no importance file")
    return path


def source_file(path: str | Path) -> Path:
    """The file to read: `path` itself, or in a run folder its importance file, else its
    circuit (`RUN_FILES`)."""
    path = Path(path)
    if not path.is_dir():
        return path
    from attn_sink_circuits.runs.io import stored

    for name in RUN_FILES:
        if stored(path / name).is_file():  # circuit.json gzip'd (circuit.json.gz) when large
            return stored(path / name)
    raise FileNotFoundError(
        f"{path} is a folder without {', '.join(RUN_FILES)}; give a `circuits discover` run "
        "folder or a graph file"
    )


def mib_dict(path: str | Path) -> dict:
    """The EAP-IG graph dict of `path` (an EAP-IG / MIB JSON, or a circuit graph of a registry
    model) in MIB's sign; a file this library wrote with the old sign (`old_sign`) is turned."""
    from attn_sink_circuits.graph.eap_ig import (
        SCORE_CONVENTION,
        old_sign,
        read_json_if_eap_ig,
        to_eap_ig,
    )

    data = read_json_if_eap_ig(path)
    if data is None:
        from attn_sink_circuits.graph.eap_ig import shape_of_graph
        from attn_sink_circuits.graph.io import read

        g = read(path)
        return to_eap_ig(g, shape_of_graph(g))
    if old_sign(data):
        edges = {k: {**e, "score": -float(e.get("score") or 0.0)} for k, e in data["edges"].items()}
        cfg = {**data["cfg"], "score_convention": SCORE_CONVENTION}
        data = {**data, "cfg": cfg, "edges": edges}
    return data


def scores_every_edge(data: dict) -> bool:
    """True when edges outside the circuit carry scores too (an importance file), False when
    only the circuit's edges do (a circuit: binary membership is all it says)."""
    return any(e.get("score") for e in data["edges"].values() if not e.get("in_graph"))


def _node(end: str) -> str:
    return re.sub(r"<[qkv]>$", "", end)


def with_circuit(data: dict, kept: set[str]) -> dict:
    """`data` with `kept` as its circuit: those edges in the graph, the nodes they touch too."""
    edges = {k: {**e, "in_graph": k in kept} for k, e in data["edges"].items()}
    touched = {_node(end) for name in kept for end in name.split("->")}
    nodes = {k: {"in_graph": k in touched} for k in data["nodes"]}
    return {**data, "nodes": nodes, "edges": edges}


def mib_prune(kept: set[str]) -> set[str]:
    """MIB's prune (see the module docstring) of the edge names `kept`."""
    while True:
        heads = [name.split("->") for name in kept]
        fed = {_node(child) for _, child in heads} | {"input"}
        live = ({parent for parent, _ in heads} & fed) | {"logits"}
        pruned = {f"{p}->{c}" for p, c in heads if p in live and _node(c) in live}
        if pruned == kept:
            return kept
        kept = pruned


def _ranked(data: dict, absolute: bool) -> list[str]:
    """The edge names by score, highest first (by |score| with `absolute`)."""
    if not scores_every_edge(data):
        raise ValueError(
            "the graph scores only its own circuit's edges, so circuits at MIB's sizes cannot be "
            f"ranked from it; give a `circuits discover` run folder or its {IMPORTANCES}"
        )
    edges = data["edges"]
    key = (lambda k: abs(edges[k]["score"])) if absolute else (lambda k: edges[k]["score"])
    return sorted(edges, key=key, reverse=True)


def _at_size(data: dict, order: list[str], k: float) -> dict:
    return with_circuit(data, mib_prune(set(order[: int(k * len(order))])))


def mib_sizes(data: dict, absolute: bool = False) -> dict[float, dict]:
    """Share of edges k -> the circuit of the top int(k x edges) edges by score (signed, or by
    |score| with `absolute`), pruned, for each of MIB's ten sizes."""
    from attn_sink_circuits.discovery.areas import MIB_FRACTIONS

    order = _ranked(data, absolute)
    return {k: _at_size(data, order, k) for k in MIB_FRACTIONS}


def write_sizes(
    data: dict, folder: str | Path, absolute: bool = False, progress: bool = False
) -> list[Path]:
    """The ten circuits of `mib_sizes` written into `folder` (a new or earlier-run folder,
    replaced as a whole), one `circuit_<k>.json` each; with `progress`, a bar on stderr names
    the size being written ("k=0.001" ...)."""
    from attn_sink_circuits.discovery.areas import MIB_FRACTIONS
    from attn_sink_circuits.runs.io import atomic_folder, write_json
    from attn_sink_circuits.runs.steps import Steps

    order = _ranked(data, absolute)

    def one(k: float, tmp: Path) -> Path:
        return write_json(tmp / f"circuit_{k:g}.json", _at_size(data, order, k))

    with atomic_folder(folder) as tmp, Steps(len(MIB_FRACTIONS), "MIB sizes", progress) as steps:
        for k in MIB_FRACTIONS:
            steps.run(f"k={k:g}", one, k, tmp)
    return [Path(folder) / f"circuit_{k:g}.json" for k in MIB_FRACTIONS]


__all__ = [
    "IMPORTANCES",
    "RUN_FILES",
    "importance_file",
    "mib_dict",
    "mib_sizes",
    "mib_prune",
    "scores_every_edge",
    "source_file",
    "with_circuit",
    "write_sizes",
]
