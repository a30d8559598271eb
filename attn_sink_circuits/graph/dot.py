"""DOT for Graphviz, written and read here (no pygraphviz).

Written for `dot`: one rank per layer (an invisible anchor node per rank, chained by invisible
edges, keeps layers in columns), edges labelled with their effect, coloured by role
(`attn_sink_circuits.graph.roles`: blue supports the target, orange opposes it, greys for observed values
and structure). Circuit data rides in `data_<name>` attributes holding JSON (a string stays
quoted, so never empty), which Graphviz ignores; the only Graphviz attributes written are those
in `DOT_ATTRS`, so no data value becomes a link, an image or a file Graphviz opens. The graph attribute `circuits_meta` holds the
graph attributes as JSON. The reader takes back what Graphviz writes too (`dot -Tcanon`:
backslash-newline continuations, subgraphs, bare ids) and drops every presentation attribute
and every invisible (layout) item.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import IO

import networkx as nx

from attn_sink_circuits.graph.circuit import KIND_COLORS, sort_key
from attn_sink_circuits.graph.convention import ROLE_COLORS
from attn_sink_circuits.graph.roles import edge_roles
from attn_sink_circuits.models.registry import display_name

# The Graphviz attributes a DOT file written here sets, per statement: an allow-list. Node and
# edge data go into `data_<name>` attributes instead, which mean nothing to Graphviz.
DOT_ATTRS: dict[str, frozenset[str]] = {
    "graph": frozenset({"circuits_meta", "rankdir", "label", "labelloc", "ranksep", "rank"}),
    "node": frozenset({"shape", "style", "fillcolor", "label"}),
    "edge": frozenset({"color", "penwidth", "label", "fontsize", "fontcolor", "style"}),
}
DOT_DATA = "data_"
_DOT_ANCHOR = "rank:"  # invisible layout nodes; not a circuit node id


def _dot_str(value) -> str:
    if isinstance(value, bool):
        value = "true" if value else "false"
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return '"' + text.replace("\n", "\\n").replace("\r", "\\r") + '"'


def _dot_attrs(scope: str, look: dict, data: dict | None = None) -> str:
    """`look` (Graphviz attributes, each on the allow-list) and `data` as data_<name>=JSON (a
    string stays quoted, so never empty: Graphviz drops empty attributes when it rewrites)."""
    refused = sorted(set(look) - DOT_ATTRS[scope])
    if refused:
        raise ValueError(f"{scope} attributes {refused} are not on the DOT allow-list")
    coded = {DOT_DATA + k: json.dumps(v, ensure_ascii=False) for k, v in (data or {}).items()}
    return ", ".join(f"{k}={_dot_str(v)}" for k, v in {**look, **coded}.items())


def edge_width(g: nx.DiGraph) -> Callable[[float], float]:
    top = max((a for *_, a in g.edges(data="abs_effect")), default=0.0) or 1.0
    return lambda a: round(0.5 + 4.5 * a / top, 3)


def _ranks(g: nx.DiGraph) -> list[list[str]]:
    """Graphviz ranks, left to right: the embedding, one per layer, the targets."""
    ranks: dict[tuple[int, int], list[str]] = {}
    for n in sorted(g, key=sort_key):
        kind, layer = g.nodes[n]["kind"], g.nodes[n]["layer"]
        ranks.setdefault({"embed": (0, 0), "target": (2, 0)}.get(kind, (1, layer)), []).append(n)
    return [nodes for _, nodes in sorted(ranks.items())]


def write_dot(g: nx.DiGraph, fh: IO[bytes]) -> None:
    title = f"{display_name(str(g.graph['model']))} | {g.graph['metric']}"
    width = edge_width(g)
    graph = {"circuits_meta": json.dumps({"graph": g.graph}), "rankdir": "LR", "label": title}
    lines = [
        "// circuit graph written by circuits; read it back with attn_sink_circuits.graph.read",
        "strict digraph circuit {",
        f"  graph [{_dot_attrs('graph', {**graph, 'labelloc': 't', 'ranksep': '1.2'})}];",
        f"  node [{_dot_attrs('node', {'shape': 'box', 'style': 'rounded,filled'})}];",
        f"  edge [{_dot_attrs('edge', {'fontsize': '10'})}];",
    ]
    for n, data in g.nodes(data=True):
        look = {"fillcolor": KIND_COLORS[data["kind"]], "label": data["label"]}
        lines.append(f"  {_dot_str(n)} [{_dot_attrs('node', look, data)}];")
    roles = edge_roles(g)
    for u, v, data in g.edges(data=True):
        role = roles[u, v]
        look = {
            "color": ROLE_COLORS[role],
            "fontcolor": ROLE_COLORS[role],
            "penwidth": width(data["abs_effect"]),
            "label": "" if role == "structure" else f"{data['effect']:+.3g}",
        }
        lines.append(f"  {_dot_str(u)} -> {_dot_str(v)} [{_dot_attrs('edge', look, data)}];")
    # One column per rank: an invisible anchor node per rank, chained by invisible edges, keeps
    # layers apart even where no circuit edge joins them. The reader drops invisible items.
    anchors = [f"{_DOT_ANCHOR}{i}" for i in range(len(_ranks(g)))]
    for anchor, nodes in zip(anchors, _ranks(g), strict=True):
        members = " ".join(_dot_str(n) + ";" for n in [anchor, *nodes])
        lines.append(f"  {{rank=same; {members}}}")
    invisible = _dot_attrs("node", {"style": "invis", "shape": "point", "label": ""})
    lines += [f"  {_dot_str(a)} [{invisible}];" for a in anchors]
    lines += [
        f"  {_dot_str(a)} -> {_dot_str(b)} [{_dot_attrs('edge', {'style': 'invis'})}];"
        for a, b in zip(anchors, anchors[1:], strict=False)
    ]
    lines.append("}")
    fh.write(("\n".join(lines) + "\n").encode("utf-8"))


_DOT_TOKEN = re.compile(
    r'\s+|//[^\n]*|/\*.*?\*/|^#[^\n]*|(?P<str>"(?:[^"\\]|\\.)*")|(?P<op>->|--|[{}\[\]=;,])'
    r"|(?P<id>[A-Za-z_\x80-\U0010ffff][\w\x80-\U0010ffff]*|-?(?:\.\d+|\d+(?:\.\d*)?))",
    re.DOTALL | re.MULTILINE,
)


def _dot_tokens(text: str) -> list[tuple[str, str]]:
    tokens, pos = [], 0
    while pos < len(text):
        m = _DOT_TOKEN.match(text, pos)
        if m is None:
            raise ValueError(f"unexpected DOT text at character {pos}: {text[pos : pos + 20]!r}")
        pos = m.end()
        if m.group("str") is not None:
            tokens.append(("id", re.sub(r"\\(.)", _unescape, m.group("str")[1:-1], flags=re.S)))
        elif m.group("op") is not None:
            tokens.append(("op", m.group("op")))
        elif m.group("id") is not None:
            tokens.append(("id", m.group("id")))
    return tokens


def _unescape(m: re.Match) -> str:
    # A backslash before a line break continues the string (Graphviz splits long lines so).
    return {"n": "\n", "r": "\r", "\n": ""}.get(m.group(1), m.group(1))


def parse_dot(text: str) -> tuple[dict, dict, list]:
    """Graph attributes, nodes {id: attrs} and edges [(u, v, attrs)] of a DOT digraph. Nodes and
    edges inside subgraphs belong to the graph; subgraphs' own attributes (rank=...) are
    dropped."""
    return _DotParser(_dot_tokens(text)).digraph()


class _DotParser:
    """A recursive-descent reader of DOT's tokens (`_dot_tokens`) into graph attributes, nodes
    and edges."""

    def __init__(self, toks: list[tuple[str, str]]):
        self.toks, self.i = toks, 0
        self.graph: dict[str, str] = {}
        self.nodes: dict[str, dict] = {}
        self.edges: list = []

    def take(self, kind: str, value: str | None = None) -> str:
        toks, i = self.toks, self.i
        if i >= len(toks) or toks[i][0] != kind or value is not None and toks[i][1] != value:
            found = toks[i][1] if i < len(toks) else "end of file"
            raise ValueError(f"expected {value or kind!r} in DOT, found {found!r}")
        self.i += 1
        return toks[i][1]

    def peek(self, value: str) -> bool:
        return self.i < len(self.toks) and self.toks[self.i] == ("op", value)

    def keyword(self, word: str) -> bool:
        return (
            self.i < len(self.toks)
            and self.toks[self.i][0] == "id"
            and self.toks[self.i][1].lower() == word
        )

    def digraph(self) -> tuple[dict, dict, list]:
        """`[strict] digraph [id] { ... }` and nothing after it."""
        if self.keyword("strict"):
            self.i += 1
        if not self.keyword("digraph"):
            raise ValueError("it is not a DOT digraph")
        self.i += 1
        if self.i < len(self.toks) and self.toks[self.i][0] == "id":
            self.i += 1
        self.block(self.graph)
        if self.i < len(self.toks):
            raise ValueError(f"unexpected {self.toks[self.i][1]!r} after the end of the DOT graph")
        return self.graph, self.nodes, self.edges

    def attr_list(self) -> dict:
        """`[k=v, ...]`, any number of them, as one dict."""
        out: dict[str, str] = {}
        while self.peek("["):
            self.take("op", "[")
            while not self.peek("]"):
                key = self.take("id")
                self.take("op", "=")
                out[key] = self.take("id")
                if self.peek(",") or self.peek(";"):
                    self.i += 1
            self.take("op", "]")
        return out

    def block(self, attrs: dict) -> None:
        """`{ statements }`; graph attributes set inside go to `attrs`."""
        self.take("op", "{")
        while not self.peek("}"):
            self.statement(attrs)
            if self.peek(";"):
                self.take("op", ";")
        self.take("op", "}")

    def statement(self, attrs: dict) -> None:
        """A subgraph, `graph|node|edge [...]`, `k=v`, or a node or edge chain."""
        if self.peek("{") or self.keyword("subgraph"):
            self.subgraph()
            return
        head = self.take("id")
        if head.lower() in ("graph", "node", "edge") and self.peek("["):
            found = self.attr_list()
            if head.lower() == "graph":
                attrs.update(found)
        elif self.peek("="):
            self.take("op", "=")
            attrs[head] = self.take("id")
        else:
            self.chain(head)

    def subgraph(self) -> None:
        """`[subgraph [id]] { ... }`: its nodes and edges count, its attributes do not."""
        if self.keyword("subgraph"):
            self.take("id")
            if not self.peek("{"):
                self.take("id")
        self.block({})
        if self.peek("->"):
            raise ValueError("edges from subgraphs are not supported; list the edges")

    def chain(self, head: str) -> None:
        """`head [-> id ...] [attrs]`: a node, or edges each carrying the attributes."""
        chain = [head]
        while self.peek("->"):
            self.take("op", "->")
            if self.peek("{") or self.keyword("subgraph"):
                raise ValueError("edges into subgraphs are not supported; list the edges")
            chain.append(self.take("id"))
        found = self.attr_list()
        if len(chain) == 1:
            self.nodes.setdefault(head, {}).update(found)
        for u, v in zip(chain, chain[1:], strict=False):
            self.nodes.setdefault(u, {})
            self.nodes.setdefault(v, {})
            self.edges.append((u, v, found))


def read_dot(text: str) -> nx.DiGraph:
    """The circuit graph in DOT `text` written by `write_dot`."""
    graph, nodes, edges = parse_dot(text)
    if "circuits_meta" not in graph:
        raise ValueError("it has no circuits_meta graph attribute (not written by circuits)")

    def data(attrs: dict, what: str) -> dict:
        out = {}
        for key, value in attrs.items():
            if key.startswith(DOT_DATA):  # everything else is Graphviz presentation
                try:
                    out[key[len(DOT_DATA) :]] = json.loads(value)
                except json.JSONDecodeError:
                    raise ValueError(f"{what}: {key}={value!r} is not a JSON value") from None
        return out

    layout = {n for n, attrs in nodes.items() if attrs.get("style") == "invis"}
    g = nx.DiGraph()
    g.graph.update(json.loads(graph["circuits_meta"])["graph"])
    for n, attrs in nodes.items():
        if n not in layout:
            g.add_node(n, **data(attrs, f"node {n!r}"))
    for u, v, attrs in edges:
        if u not in layout and v not in layout:
            g.add_edge(u, v, **data(attrs, f"edge {u} -> {v}"))
    return g
