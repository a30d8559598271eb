"""Export and import circuit graphs: GraphML, GEXF, node-link JSON, DOT (read and write) and
Mermaid (write only, for Markdown).

Every writer validates the graph first and writes atomically (a temp file in the target folder,
then `os.replace`), so an interrupted export never leaves a partial file under the final name.
Every reader returns a graph equal to the one written, with each attribute's Python type
(int stays int, float float, bool bool) and every string as it was ("\r" included):
- GraphML: networkx's typed keys (`attr.type` long/double/boolean/string); carriage returns
  are written as `&#13;`, which XML parsers do not turn into newlines.
- GEXF: typed attributes for nodes and edges; graph attributes as JSON in `<meta><description>`.
- JSON: networkx node-link data (`edges` key); JSON keeps the types itself.
- DOT: written here (no pygraphviz), laid out for Graphviz `dot`: one rank per layer, edges
  labelled with their effect. Circuit data rides in `data_<name>` attributes, which Graphviz
  ignores; the only Graphviz attributes written are those in `DOT_ATTRS` (so no data value
  becomes a link, an image or a file Graphviz opens). The graph attribute `circuits_meta` holds
  JSON with the graph attributes and the node/edge attribute types. The reader also takes what
  Graphviz writes back (`dot -Tcanon`: backslash-newline continuations, subgraphs, bare ids) and
  drops every presentation attribute.
"""

from __future__ import annotations

import io
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import IO

import networkx as nx

from circuits._io import atomic_write
from circuits.graph.circuit import KIND_COLORS, SIGN_COLORS, sort_key, validate

FORMATS: dict[str, tuple[str, ...]] = {
    "graphml": (".graphml",),
    "gexf": (".gexf",),
    "json": (".json",),
    "dot": (".dot", ".gv"),
    "mermaid": (".mmd", ".md"),
}
READABLE = ("graphml", "gexf", "json", "dot")
# The Graphviz attributes a DOT file written here sets, per statement: an allow-list. Node and
# edge data go into `data_<name>` attributes instead, which mean nothing to Graphviz.
DOT_ATTRS: dict[str, frozenset[str]] = {
    "graph": frozenset({"circuits_meta", "rankdir", "label", "labelloc", "ranksep", "rank"}),
    "node": frozenset({"shape", "style", "fillcolor", "label"}),
    "edge": frozenset({"color", "penwidth", "label", "fontsize", "fontcolor", "style"}),
}
DOT_DATA = "data_"
_DOT_ANCHOR = "rank:"  # invisible layout nodes; not a circuit node id


def format_of(path: str | Path, format: str | None = None) -> str:
    """The format named by `format`, or else by the file suffix."""
    if format is not None:
        if format not in FORMATS:
            raise ValueError(f"unknown graph format {format!r}; known: {', '.join(FORMATS)}")
        return format
    suffix = Path(path).suffix.lower()
    for name, suffixes in FORMATS.items():
        if suffix in suffixes:
            return name
    known = ", ".join(f"{n} ({'/'.join(s)})" for n, s in FORMATS.items())
    raise ValueError(f"cannot tell the graph format of {path}; pass format=... or use: {known}")


# -- writers ------------------------------------------------------------------------------


def _plain(g: nx.DiGraph) -> nx.DiGraph:
    # Nodes and edges only: the GEXF writer reads `mode` / `name` from graph attributes.
    h = nx.DiGraph()
    h.add_nodes_from(g.nodes(data=True))
    h.add_edges_from(g.edges(data=True))
    return h


def _write_graphml(g: nx.DiGraph, fh: IO[bytes]) -> None:
    buf = io.BytesIO()
    nx.write_graphml(g, buf)
    # A raw CR in XML text reads back as LF; the character reference keeps it. XML markup holds
    # no CR of its own, so every CR byte here is data.
    fh.write(buf.getvalue().replace(b"\r", b"&#13;"))


def _write_gexf(g: nx.DiGraph, fh: IO[bytes]) -> None:
    writer = nx.readwrite.gexf.GEXFWriter(encoding="utf-8", prettyprint=True)
    writer.add_graph(_plain(g))
    ET.SubElement(writer.xml.find("meta"), "description").text = json.dumps(g.graph)
    writer.write(fh)


def _write_json(g: nx.DiGraph, fh: IO[bytes]) -> None:
    data = nx.node_link_data(g, edges="edges")
    fh.write(json.dumps(data, indent=1, allow_nan=False).encode("utf-8"))


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


def _edge_width(g: nx.DiGraph) -> Callable[[float], float]:
    top = max((a for *_, a in g.edges(data="abs_effect")), default=0.0) or 1.0
    return lambda a: round(0.5 + 4.5 * a / top, 3)


def _ranks(g: nx.DiGraph) -> list[list[str]]:
    """Graphviz ranks, left to right: the embedding, one per layer, the targets."""
    ranks: dict[tuple[int, int], list[str]] = {}
    for n in sorted(g, key=sort_key):
        kind, layer = g.nodes[n]["kind"], g.nodes[n]["layer"]
        ranks.setdefault({"embed": (0, 0), "target": (2, 0)}.get(kind, (1, layer)), []).append(n)
    return [nodes for _, nodes in sorted(ranks.items())]


def _write_dot(g: nx.DiGraph, fh: IO[bytes]) -> None:
    title = f"{g.graph['model']} | {g.graph['metric']}"
    width = _edge_width(g)
    graph = {"circuits_meta": json.dumps({"graph": g.graph}), "rankdir": "LR", "label": title}
    lines = [
        "// circuit graph written by circuits; read it back with circuits.graph.read",
        "strict digraph circuit {",
        f"  graph [{_dot_attrs('graph', {**graph, 'labelloc': 't', 'ranksep': '1.2'})}];",
        f"  node [{_dot_attrs('node', {'shape': 'box', 'style': 'rounded,filled'})}];",
        f"  edge [{_dot_attrs('edge', {'fontsize': '10'})}];",
    ]
    for n, data in g.nodes(data=True):
        look = {"fillcolor": KIND_COLORS[data["kind"]], "label": data["label"]}
        lines.append(f"  {_dot_str(n)} [{_dot_attrs('node', look, data)}];")
    for u, v, data in g.edges(data=True):
        look = {
            "color": SIGN_COLORS[data["sign"]],
            "fontcolor": SIGN_COLORS[data["sign"]],
            "penwidth": width(data["abs_effect"]),
            "label": f"{data['effect']:+.3g}",
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


def _mermaid_text(text: str) -> str:
    return text.replace('"', "#quot;").replace("\r", " ").replace("\n", " ")


def _write_mermaid(g: nx.DiGraph, fh: IO[bytes], fenced: bool) -> None:
    ids = {n: f"n{i}" for i, n in enumerate(sorted(g, key=sort_key))}
    lines = ["flowchart LR"]
    columns: dict[str, list[str]] = {}
    for n in ids:
        kind, layer = g.nodes[n]["kind"], g.nodes[n]["layer"]
        column = {"embed": "input", "target": "targets"}.get(kind, f"layer {layer}")
        columns.setdefault(column, []).append(n)
    for c, (column, nodes) in enumerate(columns.items()):
        lines += [f'  subgraph col{c} ["{column}"]', "    direction TB"]
        for n in nodes:
            label = _mermaid_text(g.nodes[n]["label"])
            shape = '(["{}"])' if g.nodes[n]["kind"] == "target" else '["{}"]'
            lines.append(f"    {ids[n]}{shape.format(label)}:::{g.nodes[n]['kind']}")
        lines.append("  end")
    width = _edge_width(g)
    styles = []
    for i, (u, v, data) in enumerate(g.edges(data=True)):
        lines.append(f'  {ids[u]} -->|"{data["effect"]:+.3g}"| {ids[v]}')
        styles.append(
            f"  linkStyle {i} stroke:{SIGN_COLORS[data['sign']]},"
            f"stroke-width:{width(data['abs_effect'])}px"
        )
    lines += styles
    lines += [f"  classDef {k} fill:{c},stroke:#555" for k, c in KIND_COLORS.items()]
    text = "\n".join(lines) + "\n"
    if fenced:
        text = f"```mermaid\n{text}```\n"
    fh.write(text.encode("utf-8"))


def write(g: nx.DiGraph, path: str | Path, format: str | None = None) -> Path:
    """Write `g` to `path` in `format` (default: from the suffix) atomically; returns the path.

    Formats: graphml, gexf, json (node-link), dot (Graphviz), mermaid (.mmd; a fenced
    ```mermaid block when the suffix is .md).
    """
    if Path(path).is_dir():
        raise ValueError(
            f"{path} is a folder; give the path of a file to write (e.g. {Path(path) / 'c.dot'})"
        )
    fmt = format_of(path, format)
    validate(g)
    path = Path(path)
    writers: dict[str, Callable[[nx.DiGraph, IO[bytes]], None]] = {
        "graphml": _write_graphml,
        "gexf": _write_gexf,
        "json": _write_json,
        "dot": _write_dot,
        "mermaid": lambda g, fh: _write_mermaid(g, fh, fenced=path.suffix.lower() == ".md"),
    }
    with atomic_write(path, "wb") as fh:
        writers[fmt](g, fh)
    return path


# -- readers ------------------------------------------------------------------------------


def _read_graphml(path: Path) -> nx.DiGraph:
    g = nx.read_graphml(path, node_type=str)
    for key in ("node_default", "edge_default"):
        g.graph.pop(key, None)
    return g


def _read_gexf(path: Path) -> nx.DiGraph:
    desc = ET.parse(path).getroot().find("{*}meta/{*}description")
    if desc is None or not desc.text:
        raise ValueError("it has no circuit attributes in <meta><description> (not written here)")
    g = nx.read_gexf(path, relabel=False)
    out = nx.DiGraph()
    out.graph.update(json.loads(desc.text))
    out.add_nodes_from(g.nodes(data=True))
    # GEXF gives every edge an id; circuit edges have none (the name is reserved).
    out.add_edges_from(
        (u, v, {k: x for k, x in d.items() if k != "id"}) for u, v, d in g.edges(data=True)
    )
    return out


def _read_json(path: Path) -> nx.DiGraph:
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or "nodes" not in data or "edges" not in data:
        raise ValueError("it is not networkx node-link data (needs 'nodes' and 'edges')")
    for key, need in (("nodes", ("id",)), ("edges", ("source", "target"))):
        items = data[key]
        if not isinstance(items, list):
            raise ValueError(f"its {key!r} is a {type(items).__name__}, not a list")
        for i, item in enumerate(items):
            if not isinstance(item, dict) or any(k not in item for k in need):
                raise ValueError(
                    f"{key} entry {i} is {item!r}; node-link data lists {key} as objects with "
                    f"{' and '.join(repr(k) for k in need)} (as circuits.graph.write writes them)"
                )
    if not isinstance(data.get("graph", {}), dict):
        raise ValueError("its 'graph' is not an object of graph attributes")
    return nx.node_link_graph(data, directed=True, multigraph=False, edges="edges")


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


def _parse_dot(text: str) -> tuple[dict, dict, list]:
    """Graph attributes, nodes {id: attrs} and edges [(u, v, attrs)] of a DOT digraph. Nodes and
    edges inside subgraphs belong to the graph; subgraphs' own attributes (rank=...) are
    dropped."""
    toks = _dot_tokens(text)
    i = 0

    def take(kind: str, value: str | None = None) -> str:
        nonlocal i
        if i >= len(toks) or toks[i][0] != kind or value is not None and toks[i][1] != value:
            found = toks[i][1] if i < len(toks) else "end of file"
            raise ValueError(f"expected {value or kind!r} in DOT, found {found!r}")
        i += 1
        return toks[i - 1][1]

    def peek(value: str) -> bool:
        return i < len(toks) and toks[i] == ("op", value)

    def keyword(word: str) -> bool:
        return i < len(toks) and toks[i][0] == "id" and toks[i][1].lower() == word

    def attr_list() -> dict:
        nonlocal i
        out: dict[str, str] = {}
        while peek("["):
            take("op", "[")
            while not peek("]"):
                key = take("id")
                take("op", "=")
                out[key] = take("id")
                if peek(",") or peek(";"):
                    i += 1
            take("op", "]")
        return out

    graph: dict[str, str] = {}
    nodes: dict[str, dict] = {}
    edges: list = []

    def block(attrs: dict) -> None:
        """`{ statements }`; graph attributes set inside go to `attrs`."""
        take("op", "{")
        while not peek("}"):
            statement(attrs)
            if peek(";"):
                take("op", ";")
        take("op", "}")

    def statement(attrs: dict) -> None:
        if peek("{") or keyword("subgraph"):
            if keyword("subgraph"):
                take("id")
                if not peek("{"):
                    take("id")
            block({})
            if peek("->"):
                raise ValueError("edges from subgraphs are not supported; list the edges")
            return
        head = take("id")
        if head.lower() in ("graph", "node", "edge") and peek("["):
            found = attr_list()
            if head.lower() == "graph":
                attrs.update(found)
        elif peek("="):
            take("op", "=")
            attrs[head] = take("id")
        else:
            chain = [head]
            while peek("->"):
                take("op", "->")
                if peek("{") or keyword("subgraph"):
                    raise ValueError("edges into subgraphs are not supported; list the edges")
                chain.append(take("id"))
            found = attr_list()
            if len(chain) == 1:
                nodes.setdefault(head, {}).update(found)
            for u, v in zip(chain, chain[1:], strict=False):
                nodes.setdefault(u, {})
                nodes.setdefault(v, {})
                edges.append((u, v, found))

    if keyword("strict"):
        i += 1
    if not keyword("digraph"):
        raise ValueError("it is not a DOT digraph")
    i += 1
    if i < len(toks) and toks[i][0] == "id":
        i += 1
    block(graph)
    if i < len(toks):
        raise ValueError(f"unexpected {toks[i][1]!r} after the end of the DOT graph")
    return graph, nodes, edges


def _read_dot(path: Path) -> nx.DiGraph:
    graph, nodes, edges = _parse_dot(path.read_text(encoding="utf-8"))
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


def read(path: str | Path, format: str | None = None) -> nx.DiGraph:
    """Read a circuit graph written by `write` (graphml, gexf, json or dot) and validate it."""
    fmt = format_of(path, format)
    if fmt not in READABLE:
        raise ValueError(f"{fmt} is write-only; read one of: {', '.join(READABLE)}")
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no graph file at {path}")
    readers = {"graphml": _read_graphml, "gexf": _read_gexf, "json": _read_json, "dot": _read_dot}
    try:
        g = readers[fmt](path)
    except (ValueError, KeyError, TypeError, ET.ParseError, nx.NetworkXError) as err:
        raise ValueError(f"{path} is not a circuit graph in {fmt} format: {err}") from err
    if not g.is_directed() or g.is_multigraph():
        raise ValueError(f"{path} holds an undirected or multi-graph; circuits are DiGraphs")
    try:
        return validate(nx.DiGraph(g))
    except ValueError as err:
        raise ValueError(f"{path} was read but is not a complete circuit graph: {err}") from err


def convert(src: str | Path, format: str, out: str | Path | None = None) -> Path:
    """Read the graph at `src` and write it in `format` to `out` (default: `src` with the
    format's suffix). Returns the written path."""
    fmt = format_of(out or src, format)
    out = Path(out) if out is not None else Path(src).with_suffix(FORMATS[fmt][0])
    if out.resolve() == Path(src).resolve():
        raise ValueError(f"{out} is the input file; give --out a different path")
    return write(read(src), out, fmt)
