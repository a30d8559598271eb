"""The graph JSON of EAP-IG (Hanna et al. 2024) and the MIB circuit track: write this library's
edge circuits in it and read it back.

The format (as EAP-IG's `eap/graph.py` writes and reads it):

    {"cfg": {"n_layers": L, "n_heads": H, "parallel_attn_mlp": false, "d_model": D},
     "nodes": {"input": {"in_graph": true}, "a0.h0": {...}, "m0": {...}, ..., "logits": {...}},
     "edges": {"input->a0.h0<q>": {"score": 0.12, "in_graph": true}, "a0.h0->m0": {...}, ...}}

Nodes: `input` (the embedding), `a{l}.h{h}` (attention head), `m{l}` (MLP), `logits` (the final
residual, read by the unembedding). Edges `parent->child`, with `<q>`, `<k>` or `<v>` when the
child is a head. Every edge of the model's DAG is listed (score and in_graph). Some versions of
EAP-IG write a node as a bare bool instead of {"in_graph": bool}; the reader takes both.

Names map one to one (`embed` = input, `L3.H2` = a3.h2, `L3.MLP` = m3, the final residual
target = logits) except for grouped-query models: EAP-IG numbers every input per query head,
while here a key/value input is one per key/value head, shared by the query heads of its group
(heads g*G .. g*G+G-1 for key/value head g, G = n_heads / n_kv_heads). Writing, the edge
`s -> L3.H1.k` becomes the G edges `s->a3.h{G+0}<k>` ... `s->a3.h{2G-1}<k>`, each with the
shared input's score; reading, those G edges become one, in the circuit when any of them is,
scored by their mean. A circuit found on the ungrouped graph (`kv_inputs` "ungrouped" in its
settings: one k and one v input per query head, as MIB's graph) maps one to one. Circuits whose
metric reads anything but the logits have no EAP-IG form.

Signs. EAP-IG and MIB attribute the loss, minus the logit difference, so an edge that supports
the behaviour scores positive there (MIB's CPR circuits take the largest signed scores first).
This library's graphs carry the opposite quantity, the metric change when the edge alone is
ablated (`estimated_effect`, else the exact `effect`; negative = supports), so a written `score`
is minus that, and reading turns a file's scores back into estimated effects (`from_eap_ig`).
Files written here say so in their cfg (`"score_convention": "mib"`). Before that mark existed
this library wrote the estimated effect itself as the score; such a file is recognised by the
missing mark together with scores only on circuit edges (every edge outside the circuit scores
exactly 0 and some circuit edge does not; EAP-IG and MIB score every edge), and its scores are
read as the estimated effects they are.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import networkx as nx

from attn_sink_circuits.core.nodes import node_id, parse_node_id
from attn_sink_circuits.core.sites import FINAL_RESID
from attn_sink_circuits.runs.io import atomic_write

INPUT, LOGITS = "input", "logits"
"""EAP-IG's (MIB's) own names of the embedding and of the final residual the unembedding reads."""
_EDGE = re.compile(r"^(input|a(\d+)\.h(\d+)|m(\d+))->(logits|m(\d+)|a(\d+)\.h(\d+)<([qkv])>)$")
SCORE_CONVENTION = "mib"
"""The cfg mark of files written with MIB's sign (score = attribution of the loss: positive
supports); files without it and with scores on circuit edges only are this library's old ones."""


def shape_of(model) -> dict:
    """The `cfg` block of a model: layers, query heads, key/value heads, d_model."""
    cfg = model.cfg
    n_kv = getattr(cfg, "n_key_value_heads", None) or cfg.n_heads
    return {"n_layers": cfg.n_layers, "n_heads": cfg.n_heads, "n_kv_heads": n_kv,
            "d_model": cfg.d_model}  # fmt: skip


def mib_node(layer: int, head: int | None = None) -> str:
    """EAP-IG's (MIB's) name of head `head` of block `layer` ("a3.h2"), or of the block's MLP
    ("m3") when `head` is None: their format's names, not this library's node ids."""
    return f"m{layer}" if head is None else f"a{layer}.h{head}"


def all_edges(n_layers: int, n_heads: int) -> list[str]:
    """Every edge name of the EAP-IG graph of a sequential (not parallel) model, in its order."""
    out, stream = [], [INPUT]
    for layer in range(n_layers):
        heads = [mib_node(layer, h) for h in range(n_heads)]
        out += [f"{s}->{a}<{x}>" for s in stream for a in heads for x in "qkv"]
        stream += heads
        out += [f"{s}->{mib_node(layer)}" for s in stream]
        stream.append(mib_node(layer))
    return out + [f"{s}->{LOGITS}" for s in stream]


def _component(node: str, kinds: tuple[str, ...], parts: tuple[str, ...]):
    """The component of node id `node` when its kind is one of `kinds` and its part one of
    `parts`, else None."""
    try:
        c = parse_node_id(node)
    except ValueError:
        return None
    return c if c.kind in kinds and c.part in parts else None


def _sender_name(node: str) -> str:
    c = _component(node, ("embed", "head", "mlp"), ("",))
    if c is None:
        raise ValueError(f"{node!r} is not a sender of the residual DAG (embed, L3.H2, L3.MLP)")
    if c.kind == "embed":
        return INPUT
    return mib_node(c.layer, c.head if c.kind == "head" else None)


def _receiver_names(node: str, group: int) -> list[str]:
    if node.startswith("target:"):
        if node != node_id("target", name=FINAL_RESID) and "logit" not in node:
            raise ValueError(
                f"the circuit ends at {node!r}, not at the logits: EAP-IG graphs end at the "
                "logits, so only circuits of logit metrics can be written in their format"
            )
        return [LOGITS]
    c = _component(node, ("head", "mlp"), ("q", "k", "v", ""))
    if c is None or (c.kind == "head") != bool(c.part):
        raise ValueError(f"{node!r} is not an input of the residual DAG (L3.H2.k, L3.MLP)")
    if c.kind == "mlp":
        return [mib_node(c.layer)]
    first = c.head * (group if c.part in "kv" else 1)
    heads = range(first, first + (group if c.part in "kv" else 1))
    return [f"{mib_node(c.layer, h)}<{c.part}>" for h in heads]


def mib_edge_names(edge: str, group: int = 1) -> list[str]:
    """The EAP-IG / MIB names of this library's edge `sender->receiver input` (e.g.
    `L0.H3->L2.MLP` -> [`a0.h3->m2`]); a k / v input shared by `group` query heads names one
    edge per head."""
    u, v = edge.split("->", 1)
    return [f"{_sender_name(u)}->{child}" for child in _receiver_names(v, group)]


def _kv_group(g: nx.DiGraph, shape: dict) -> int:
    """Query heads per k/v input of the circuit's graph: 1 when it was found on the ungrouped
    graph (its settings say kv_inputs "ungrouped"), else n_heads / n_kv_heads."""
    try:
        settings = json.loads(g.graph.get("config") or "{}")
    except (TypeError, json.JSONDecodeError):
        settings = {}
    if isinstance(settings, dict) and settings.get("kv_inputs") == "ungrouped":
        return 1
    return int(shape["n_heads"]) // int(shape.get("n_kv_heads") or shape["n_heads"])


def eap_ig_dict(edges: dict[str, tuple[float, bool]], shape: dict, group: int = 1) -> dict:
    """The EAP-IG graph dict of a model of `shape` from this library's edges
    {"sender->receiver input": (score, in circuit)}, scores already in MIB's sign (positive
    supports). A k/v input shared by `group` query heads fans out to each of them. Every edge
    of the model's EAP-IG graph is listed; edges not given score 0, outside the circuit."""
    n_layers, n_heads = int(shape["n_layers"]), int(shape["n_heads"])
    out = {name: {"score": 0.0, "in_graph": False} for name in all_edges(n_layers, n_heads)}
    for edge, (score, kept) in edges.items():
        for name in mib_edge_names(edge, group):
            if name not in out:
                raise ValueError(f"edge {edge} ({name}) is outside a {n_layers}-layer, "
                                 f"{n_heads}-head model; give the shape of the model it was "
                                 "found on")  # fmt: skip
            out[name] = {"score": float(score), "in_graph": bool(kept)}
    nodes = {INPUT: False, LOGITS: False}
    for layer in range(n_layers):
        nodes.update({mib_node(layer, h): False for h in range(n_heads)} | {mib_node(layer): False})
    for name, e in out.items():
        if e["in_graph"]:
            parent, child = name.split("->")
            nodes[parent] = nodes[re.sub(r"<[qkv]>$", "", child)] = True
    cfg = {"n_layers": n_layers, "n_heads": n_heads, "parallel_attn_mlp": False,
           "d_model": int(shape["d_model"]), "score_convention": SCORE_CONVENTION}  # fmt: skip
    return {"cfg": cfg, "nodes": {k: {"in_graph": v} for k, v in nodes.items()}, "edges": out}


def to_eap_ig(g: nx.DiGraph, shape: dict) -> dict:
    """The EAP-IG graph dict of circuit graph `g` (its `direct` edges are the circuit) for a
    model of `shape` (`shape_of`), each circuit edge scored minus its estimated (else exact)
    effect: MIB's sign, positive supports."""
    edges = {}
    for u, v, d in g.edges(data=True):
        if d.get("edge_kind") == "direct":
            edges[f"{u}->{v}"] = (-float(d.get("estimated_effect", d.get("effect", 0.0))), True)
    return eap_ig_dict(edges, shape, _kv_group(g, shape))


def write_eap_ig(g: nx.DiGraph, path: str | Path, shape: dict) -> Path:
    """Write `g` as EAP-IG graph JSON to `path` (atomically)."""
    text = json.dumps(to_eap_ig(g, shape))
    with atomic_write(path) as fh:
        fh.write(text)
    return Path(path)


def shape_of_graph(g: nx.DiGraph) -> dict:
    """The `cfg` block of the model a circuit graph names (a registry model)."""
    from attn_sink_circuits.models.registry import MODELS

    spec = MODELS.get(str(g.graph.get("model")))
    if spec is None:
        raise ValueError(
            f"the graph's model {g.graph.get('model')!r} is not a registry model, so its shape "
            "is unknown here; write it from Python with write_eap_ig(graph, path, shape_of(model))"
        )
    return {"n_layers": spec.n_layers, "n_heads": spec.n_heads, "n_kv_heads": spec.n_kv_heads,
            "d_model": spec.d_model}  # fmt: skip


def export_eap_ig(src: str | Path, out: str | Path | None = None, force: bool = False) -> Path:
    """Convert the circuit graph file `src` to EAP-IG graph JSON (`out`, default: SRC's stem +
    `.eap-ig.json`); an existing `out` is replaced only with `force`."""
    from attn_sink_circuits.graph.io import read

    g = read(src)
    out = Path(out) if out is not None else Path(src).with_suffix(".eap-ig.json")
    if out.exists() and not force:
        raise ValueError(f"{out} exists; pass --force to replace it, or give another --out")
    return write_eap_ig(g, out, shape_of_graph(g))


def read_json_if_eap_ig(path: str | Path) -> dict | None:
    """The file as an EAP-IG graph dict when it is JSON with cfg, nodes and edges, else None."""
    path = Path(path)
    if path.suffix != ".json" or not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return data if is_eap_ig(data) else None


def is_eap_ig(data) -> bool:
    return isinstance(data, dict) and {"cfg", "nodes", "edges"} <= set(data)


def old_sign(data: dict) -> bool:
    """True for a file this library wrote before it used MIB's sign (see the module docstring):
    no score_convention mark, every edge outside the circuit scored exactly 0, some circuit
    edge not."""
    if data["cfg"].get("score_convention") == SCORE_CONVENTION:
        return False
    edges = [e for e in data["edges"].values() if isinstance(e, dict)]
    outside = all(not e.get("score") for e in edges if not e.get("in_graph"))
    return outside and any(e.get("score") for e in edges if e.get("in_graph"))


def from_eap_ig(data: dict, n_kv_heads: int | None = None, source: str = "graph") -> dict:
    """The circuit of an EAP-IG graph dict in this library's edge names and sign:
    {"sender->receiver": estimated effect} for every edge in the graph (in_graph), with the
    logits as `target:logits`; the estimated effect is minus the file's score (MIB's sign,
    positive supports), or the score itself in this library's old files (`old_sign`).
    `n_kv_heads` (default: n_heads) folds per-query-head k/v edges into the shared inputs of a
    grouped-query model."""
    if not is_eap_ig(data):
        raise ValueError(f"{source}: not an EAP-IG graph (needs 'cfg', 'nodes' and 'edges')")
    cfg = data["cfg"]
    try:
        n_layers, n_heads = int(cfg["n_layers"]), int(cfg["n_heads"])
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"{source}: cfg must give n_layers and n_heads") from None
    if cfg.get("parallel_attn_mlp"):
        raise ValueError(f"{source}: a parallel attention/MLP model; only sequential blocks "
                         "are supported")  # fmt: skip
    group = n_heads // (n_kv_heads or n_heads)
    sign = 1.0 if old_sign(data) else -1.0
    kept: dict[str, list[float]] = {}
    for name, info in data["edges"].items():
        m = _EDGE.match(name)
        if not m or not isinstance(info, dict):
            raise ValueError(f"{source}: edge {name!r} is not 'parent->child[<q|k|v>]' with "
                             "{'score', 'in_graph'}")  # fmt: skip
        if not info.get("in_graph"):
            continue
        _, sl, sh, sm, child, cm, cl, ch, kind = m.groups()
        layers = [int(x) for x in (sl, sm, cl, cm) if x is not None]
        if any(x >= n_layers for x in layers) or any(
            x is not None and int(x) >= n_heads for x in (sh, ch)
        ):
            raise ValueError(f"{source}: edge {name!r} is outside cfg ({n_layers} layers, "
                             f"{n_heads} heads)")  # fmt: skip
        if sl is not None:
            sender = node_id("head", int(sl), int(sh))
        else:
            sender = node_id("embed") if sm is None else node_id("mlp", int(sm))
        if child == LOGITS:
            receiver = node_id("target", name=LOGITS)
        elif cm is not None:
            receiver = node_id("mlp", int(cm))
        else:
            head = int(ch) // group if kind in "kv" else int(ch)
            receiver = node_id("head", int(cl), head, part=kind)
        score = info.get("score")
        kept.setdefault(f"{sender}->{receiver}", []).append(sign * float(score or 0.0))
    return {name: sum(v) / len(v) for name, v in kept.items()}


def read_eap_ig(path: str | Path) -> dict:
    """An EAP-IG graph JSON file as a dict (checked to have cfg, nodes and edges)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: cannot read it as JSON ({err})") from None
    if not is_eap_ig(data):
        raise ValueError(f"{path}: not an EAP-IG graph (needs 'cfg', 'nodes' and 'edges')")
    return data


__all__ = [
    "INPUT",
    "LOGITS",
    "SCORE_CONVENTION",
    "all_edges",
    "eap_ig_dict",
    "mib_edge_names",
    "old_sign",
    "export_eap_ig",
    "read_json_if_eap_ig",
    "shape_of_graph",
    "from_eap_ig",
    "is_eap_ig",
    "mib_node",
    "read_eap_ig",
    "shape_of",
    "to_eap_ig",
    "write_eap_ig",
]
