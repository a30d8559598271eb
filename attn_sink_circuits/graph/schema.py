"""The version of the circuit-graph schema, and the upgrade of graphs saved before it.

The numbers are those of every saved result (`attn_sink_circuits.runs.provenance.SCHEMA_VERSION`): a graph
without `schema_version` is version 1 (saved before versions, e.g. the older graphs under
docs/); version 2 types what an edge means (`attn_sink_circuits.graph.roles`): `edge_kind` on every edge,
`support_sign` and `schema_version` on the graph. `upgrade` derives those attributes of a
version-1 graph once, at read time, from its prose fields (`effect_meaning`, each edge's
`intervention`). A graph of a newer version than this code knows is refused in one line.
"""

from __future__ import annotations

import re

import networkx as nx

from attn_sink_circuits.graph.roles import REMOVAL_SIGN
from attn_sink_circuits.runs.provenance import SCHEMA_VERSION

# SCHEMA_VERSION (every saved result's, graphs included): 2 is the first with typed edge roles.
LEGACY_VERSION = 1
"""A graph saved before versions (no `schema_version`): no typed edge roles."""

_SUPPORT_WORDS = r"(?:support|help|promot|increas|strengthen|raise)"


def legacy_support_sign(meaning: str) -> int:
    """The `support_sign` a version-1 graph's `effect_meaning` states: -1 for changes under
    removal (ablation, token swap; also when it says nothing), +1 for contributions or
    attributions ("attribution: positive = supports")."""
    meaning = meaning.lower()
    for pattern, sign in (
        (rf"(?:negative|<\s*0|\bneg\b)[^.;]{{0,40}}{_SUPPORT_WORDS}", -1),
        (rf"(?:positive|>\s*0|\bpos\b)[^.;]{{0,40}}{_SUPPORT_WORDS}", +1),
        (rf"{_SUPPORT_WORDS}\w*[^.;]{{0,30}}(?:negative|<\s*0)", -1),
        (rf"{_SUPPORT_WORDS}\w*[^.;]{{0,30}}(?:positive|>\s*0)", +1),
    ):
        if re.search(pattern, meaning):
            return sign
    if re.search(r"ablat|remov|knock|swap|zero|mean-over|resample|relative change", meaning):
        return REMOVAL_SIGN
    if re.search(r"attribut|contribut|direct effect|restor|logit|gradient", meaning):
        return +1
    return REMOVAL_SIGN


def legacy_edge_kind(intervention: str, target_kind: str) -> str:
    """The `edge_kind` of a version-1 edge without one, from its `intervention`: "structure
    ..." wiring ("read" into a target, else "input"), "none ..." / "observed" an observed
    value, anything else a direct effect."""
    text = intervention.strip().lower()
    if text.startswith("structure"):
        return "read" if target_kind == "target" else "input"
    if text == "" or text.startswith("none") or "observed" in text:
        return "observed"
    return "direct"


def upgrade(g: nx.DiGraph, source: str = "the graph") -> nx.DiGraph:
    """`g` at `SCHEMA_VERSION` (in place; returned): a version-1 graph gets `support_sign`,
    each edge its `edge_kind` (`legacy_support_sign`, `legacy_edge_kind`); a newer version is
    refused. `source` names the graph in the message (e.g. its path)."""
    version = g.graph.get("schema_version", LEGACY_VERSION)
    if type(version) is not int or version < LEGACY_VERSION:
        raise ValueError(
            f"{source} has schema_version {version!r}, not a version number; it was not "
            "written by circuits (or was edited): write it again with attn_sink_circuits.graph.write"
        )
    if version > SCHEMA_VERSION:
        raise ValueError(
            f"{source} uses graph schema {version}, newer than this circuits reads "
            f"({SCHEMA_VERSION}); upgrade circuits to read it"
        )
    if version > LEGACY_VERSION:
        return g
    g.graph.setdefault("support_sign", legacy_support_sign(str(g.graph.get("effect_meaning", ""))))
    for _, v, data in g.edges(data=True):
        if "edge_kind" not in data:
            kind = str(g.nodes[v].get("kind", ""))
            data["edge_kind"] = legacy_edge_kind(str(data.get("intervention", "")), kind)
    g.graph["schema_version"] = SCHEMA_VERSION
    return g


__all__ = ["LEGACY_VERSION", "SCHEMA_VERSION", "legacy_edge_kind", "legacy_support_sign", "upgrade"]
