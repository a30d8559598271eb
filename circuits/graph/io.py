"""Export and import circuit graphs: GraphML, GEXF, node-link JSON, DOT (read and write) and
Mermaid (write only, for Markdown).

Every writer validates the graph first and writes atomically (a temp file in the target folder,
then `os.replace`), so an interrupted export never leaves a partial file under the final name.
Every reader returns a graph equal to the one written, with each attribute's Python type
(int stays int, float float, bool bool):
- GraphML: networkx's typed keys (`attr.type` long/double/boolean/string).
- GEXF: typed attributes for nodes and edges; graph attributes as JSON in `<meta><description>`.
- JSON: networkx node-link data (`edges` key); JSON keeps the types itself.
- DOT: written here (no pygraphviz). All values are quoted strings; the graph attribute
  `circuits_meta` holds JSON with the graph attributes and the node/edge attribute types.
  Presentation attributes for Graphviz (colours, pen widths) are dropped on read.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import networkx as nx

from circuits.graph.circuit import KIND_COLORS, SIGN_COLORS, sort_key, validate

FORMATS: dict[str, tuple[str, ...]] = {
    "graphml": (".graphml",),
    "gexf": (".gexf",),
    "json": (".json",),
    "dot": (".dot", ".gv"),
    "mermaid": (".mmd", ".md"),
}
READABLE = ("graphml", "gexf", "json", "dot")


@contextlib.contextmanager
def atomic_write(path: str | Path, mode: str = "w") -> Iterator[IO]:
    """Open a temp file next to `path` for writing; on success it replaces `path` atomically,
    on an exception it is removed and `path` is left as it was."""
    path = Path(path)
    if not path.parent.is_dir():
        raise FileNotFoundError(f"folder {path.parent} does not exist; create it first")
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp makes the file private (0600); give it the mode a plain open() would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


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
    nx.write_graphml(g, fh)


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
    text = str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{text}"'


def _dot_attrs(data: dict, extra: dict) -> str:
    # Presentation attributes never overwrite data attributes of the same name.
    items = {**{k: v for k, v in extra.items() if k not in data}, **data}
    return ", ".join(f"{k}={_dot_str(v)}" for k, v in items.items())


def _types(items) -> dict[str, str]:
    return {k: type(v).__name__ for data in items for k, v in data.items()}


def _edge_width(g: nx.DiGraph) -> Callable[[float], float]:
    top = max((a for *_, a in g.edges(data="abs_effect")), default=0.0) or 1.0
    return lambda a: round(0.5 + 4.5 * a / top, 3)


def _write_dot(g: nx.DiGraph, fh: IO[bytes]) -> None:
    meta = {
        "graph": g.graph,
        "node_types": _types(d for _, d in g.nodes(data=True)),
        "edge_types": _types(d for *_, d in g.edges(data=True)),
    }
    title = f"{g.graph['model']} | {g.graph['metric']}"
    width = _edge_width(g)
    lines = [
        "// circuit graph written by circuits; read it back with circuits.graph.read",
        "strict digraph circuit {",
        f"  graph [circuits_meta={_dot_str(json.dumps(meta))}, rankdir=LR, "
        f"label={_dot_str(title)}, labelloc=t];",
        '  node [shape=box, style="rounded,filled", fontname=Helvetica];',
    ]
    for n, data in g.nodes(data=True):
        look = {"fillcolor": KIND_COLORS[data["kind"]]}
        lines.append(f"  {_dot_str(n)} [{_dot_attrs(data, look)}];")
    for u, v, data in g.edges(data=True):
        look = {"color": SIGN_COLORS[data["sign"]], "penwidth": width(data["abs_effect"])}
        lines.append(f"  {_dot_str(u)} -> {_dot_str(v)} [{_dot_attrs(data, look)}];")
    lines.append("}")
    fh.write(("\n".join(lines) + "\n").encode("utf-8"))


def _mermaid_text(text: str) -> str:
    return text.replace('"', "#quot;").replace("\n", " ")


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
    return nx.node_link_graph(data, directed=True, multigraph=False, edges="edges")


_DOT_TOKEN = re.compile(
    r'\s+|//[^\n]*|/\*.*?\*/|^#[^\n]*|(?P<str>"(?:[^"\\]|\\.)*")|(?P<op>->|--|[{}\[\]=;,])'
    r"|(?P<id>[A-Za-z_\x80-\U0010ffff][\w\x80-\U0010ffff]*|-?(?:\.\d+|\d+(?:\.\d*)?))",
    re.DOTALL | re.MULTILINE,
)


def _dot_tokens(text: str) -> list[str]:
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
    return {"n": "\n"}.get(m.group(1), m.group(1))


def _parse_dot(text: str) -> tuple[dict, dict, list]:
    """Graph attributes, nodes {id: attrs} and edges [(u, v, attrs)] of a flat DOT digraph."""
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

    if i < len(toks) and toks[i] == ("id", "strict"):
        i += 1
    if take("id") != "digraph":
        raise ValueError("it is not a DOT digraph")
    if i < len(toks) and toks[i][0] == "id":
        i += 1
    take("op", "{")
    graph: dict[str, str] = {}
    nodes: dict[str, dict] = {}
    edges: list = []
    while not peek("}"):
        head = take("id")
        if head in ("graph", "node", "edge") and peek("["):
            attrs = attr_list()
            if head == "graph":
                graph.update(attrs)
        elif head == "subgraph" or peek("{"):
            raise ValueError("DOT subgraphs are not supported: read files written by circuits")
        elif peek("="):
            take("op", "=")
            graph[head] = take("id")
        else:
            chain = [head]
            while peek("->"):
                take("op", "->")
                chain.append(take("id"))
            attrs = attr_list()
            if len(chain) == 1:
                nodes.setdefault(head, {}).update(attrs)
            for u, v in zip(chain, chain[1:], strict=False):
                nodes.setdefault(u, {})
                nodes.setdefault(v, {})
                edges.append((u, v, attrs))
        if peek(";"):
            take("op", ";")
    take("op", "}")
    return graph, nodes, edges


_CAST: dict[str, Callable[[str], object]] = {
    "str": str,
    "int": int,
    "float": float,
    "bool": lambda s: {"true": True, "false": False}[s],
}


def _read_dot(path: Path) -> nx.DiGraph:
    graph, nodes, edges = _parse_dot(path.read_text(encoding="utf-8"))
    if "circuits_meta" not in graph:
        raise ValueError("it has no circuits_meta graph attribute (not written by circuits)")
    meta = json.loads(graph["circuits_meta"])

    def typed(attrs: dict, types: dict) -> dict:
        return {k: _CAST[types[k]](v) for k, v in attrs.items() if k in types}

    g = nx.DiGraph()
    g.graph.update(meta["graph"])
    for n, attrs in nodes.items():
        g.add_node(n, **typed(attrs, meta["node_types"]))
    for u, v, attrs in edges:
        g.add_edge(u, v, **typed(attrs, meta["edge_types"]))
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
