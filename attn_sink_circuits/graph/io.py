"""Export and import circuit graphs: GraphML, GEXF, node-link JSON, DOT (read and write) and
Mermaid (write only, for Markdown).

Every writer validates the graph first and writes atomically (a temp file in the target folder,
then `os.replace`), so an interrupted export never leaves a partial file under the final name.
Every reader returns a graph equal to the one written, with each attribute's Python type
(int stays int, float float, bool bool) and every string as it was, carriage returns included:
- GraphML: networkx's typed keys (`attr.type` long/double/boolean/string); carriage returns
  are written as `&#13;`, which XML parsers do not turn into newlines, and the characters XML
  cannot hold at all (other control characters) as an escape the reader undoes.
- GEXF: typed attributes for nodes and edges; graph attributes as JSON in `<meta><description>`.
- JSON: networkx node-link data (`edges` key); JSON keeps the types itself.
- DOT: laid out for Graphviz `dot` (one rank per layer, edges labelled with their effect), data
  kept apart from Graphviz's own attributes; see `attn_sink_circuits.graph.dot`.

A name ending in .gz (`circuit.json.gz`) is the same file gzip'd; `write(..., lean=True)`, as the
run writers call it, stores a large graph so (`attn_sink_circuits.runs.io.LEAN_OVER`), and `read` takes the
plain name of a graph stored gzip'd (`attn_sink_circuits.runs.io.stored`).
"""

from __future__ import annotations

import io
import json
import math
import re
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import IO

import networkx as nx

from attn_sink_circuits.graph.dot import read_dot, write_dot
from attn_sink_circuits.graph.mermaid import write_mermaid
from attn_sink_circuits.graph.schema import upgrade
from attn_sink_circuits.graph.validate import validate
from attn_sink_circuits.runs.io import (
    NON_FINITE_KEY,
    plain_name,
    read_stored,
    stored,
    strict_json,
    write_bytes,
)

FORMATS: dict[str, tuple[str, ...]] = {
    "graphml": (".graphml",),
    "gexf": (".gexf",),
    "json": (".json",),
    "dot": (".dot", ".gv"),
    "mermaid": (".mmd", ".md"),
}
READABLE = ("graphml", "gexf", "json", "dot")


def format_of(path: str | Path, format: str | None = None) -> str:
    """The format named by `format`, or else by the file suffix (the one before .gz, if any)."""
    if format is not None:
        if format not in FORMATS:
            raise ValueError(f"unknown graph format {format!r}; known: {', '.join(FORMATS)}")
        return format
    suffix = plain_name(path).suffix.lower()
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


_XML_ESCAPE = "\ue000"
"""Starts an escape in GraphML / GEXF strings: XML 1.0 cannot hold most control characters
(U+0000-U+001F but tab, LF, CR) or U+FFFE/U+FFFF, even as character references, so each is
written as this private-use character, 4 hex digits and ";" (the escape character itself too)."""
_XML_UNHOLDABLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ue000]")
_XML_ESCAPED = re.compile("\ue000([0-9a-f]{4});")


def _map_strings(g: nx.DiGraph, fn: Callable[[str], str]) -> nx.DiGraph:
    """A copy of `g` with `fn` applied to every string: node ids and attribute values."""

    def attrs(d: dict) -> dict:
        return {k: fn(v) if isinstance(v, str) else v for k, v in d.items()}

    def node(n):
        return fn(n) if isinstance(n, str) else n

    h = nx.DiGraph()
    h.graph.update(attrs(g.graph))
    h.add_nodes_from((node(n), attrs(d)) for n, d in g.nodes(data=True))
    h.add_edges_from((node(u), node(v), attrs(d)) for u, v, d in g.edges(data=True))
    return h


def _xml_escape(g: nx.DiGraph) -> nx.DiGraph:
    return _map_strings(g, lambda s: _XML_UNHOLDABLE.sub(lambda m: f"\ue000{ord(m[0]):04x};", s))


def _xml_unescape(g: nx.DiGraph) -> nx.DiGraph:
    return _map_strings(g, lambda s: _XML_ESCAPED.sub(lambda m: chr(int(m[1], 16)), s))


def _write_graphml(g: nx.DiGraph, fh: IO[bytes]) -> None:
    buf = io.BytesIO()
    nx.write_graphml(_xml_escape(g), buf)
    # A raw CR in XML text reads back as LF; the character reference keeps it. XML markup holds
    # no CR of its own, so every CR byte here is data.
    fh.write(buf.getvalue().replace(b"\r", b"&#13;"))


def _write_gexf(g: nx.DiGraph, fh: IO[bytes]) -> None:
    writer = nx.readwrite.gexf.GEXFWriter(encoding="utf-8", prettyprint=True)
    g = _xml_escape(g)
    writer.add_graph(_plain(g))
    ET.SubElement(writer.xml.find("meta"), "description").text = json.dumps(g.graph)
    writer.write(fh)


def _write_json(g: nx.DiGraph, fh: IO[bytes]) -> None:
    # JSON has no NaN: a value that was not measured (e.g. the mean stability of a method
    # without per-text scores) is written as null and listed under "non_finite".
    data = nx.node_link_data(g, edges="edges")
    fh.write(strict_json(data, indent=1).encode("utf-8"))


def write(
    g: nx.DiGraph, path: str | Path, format: str | None = None, *, lean: bool = False
) -> Path:
    """Write `g` to `path` in `format` (default: from the suffix) atomically, gzip'd when the
    name ends in .gz; returns the path written. With `lean` (run folders), a graph file larger
    than `attn_sink_circuits.runs.io.LEAN_OVER` goes gzip'd to `path.gz` instead (Mermaid, a text for
    Markdown, never).

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
        "dot": write_dot,
        "mermaid": lambda g, fh: write_mermaid(g, fh, fenced=plain_name(path).suffix == ".md"),
    }
    with tempfile.SpooledTemporaryFile() as buf:  # in memory; a file object, as writers take
        writers[fmt](g, buf)
        buf.seek(0)
        data = buf.read()
    return write_bytes(path, data, lean=lean and fmt in READABLE)


# -- readers ------------------------------------------------------------------------------


def _read_graphml(data: bytes) -> nx.DiGraph:
    g = nx.read_graphml(io.BytesIO(data), node_type=str)
    for key in ("node_default", "edge_default"):
        g.graph.pop(key, None)
    return _xml_unescape(g)


def _read_gexf(data: bytes) -> nx.DiGraph:
    desc = ET.fromstring(data).find("{*}meta/{*}description")
    if desc is None or not desc.text:
        raise ValueError("it has no circuit attributes in <meta><description> (not written here)")
    g = nx.read_gexf(io.BytesIO(data), relabel=False)
    out = nx.DiGraph()
    out.graph.update(json.loads(desc.text))
    out.add_nodes_from(g.nodes(data=True))
    # GEXF gives every edge an id; circuit edges have none (the name is reserved).
    out.add_edges_from(
        (u, v, {k: x for k, x in d.items() if k != "id"}) for u, v, d in g.edges(data=True)
    )
    return _xml_unescape(out)


def _read_json(raw: bytes) -> nx.DiGraph:
    data = json.loads(raw.decode("utf-8"))
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
                    f"{' and '.join(repr(k) for k in need)} (as attn_sink_circuits.graph.write writes them)"
                )
    if not isinstance(data.get("graph", {}), dict):
        raise ValueError("its 'graph' is not an object of graph attributes")
    for where in data.pop(NON_FINITE_KEY, []):
        _set_nan(data, where)
    return nx.node_link_graph(data, directed=True, multigraph=False, edges="edges")


def _set_nan(data: dict, where: str) -> None:
    """Put NaN back at `where` ("graph.x", "edges[3].stability"), a value `_write_json` wrote as
    null because JSON has none."""
    *parents, last = re.findall(r"[^.\[\]]+", where)
    node = data
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if isinstance(node, list):
        node[int(last)] = math.nan
    else:
        node[last] = math.nan


def read(path: str | Path, format: str | None = None) -> nx.DiGraph:
    """Read a circuit graph written by `write` (graphml, gexf, json or dot; gzip'd when the name
    ends in .gz, and under its plain name too when only the gzip'd file is there) and validate
    it. A graph saved before typed edge roles gets them (`attn_sink_circuits.graph.schema.upgrade`); one
    of a newer schema than this code reads is refused."""
    path = stored(path)
    fmt = format_of(path, format)
    if fmt not in READABLE:
        raise ValueError(f"{fmt} is write-only; read one of: {', '.join(READABLE)}")
    if not path.is_file():
        raise FileNotFoundError(f"no graph file at {path}")
    readers = {
        "graphml": _read_graphml,
        "gexf": _read_gexf,
        "json": _read_json,
        "dot": lambda data: read_dot(data.decode("utf-8")),
    }
    try:
        g = readers[fmt](read_stored(path))
    except (ValueError, KeyError, TypeError, ET.ParseError, nx.NetworkXError) as err:
        raise ValueError(f"{path} is not a circuit graph in {fmt} format: {err}") from err
    if not g.is_directed() or g.is_multigraph():
        raise ValueError(f"{path} holds an undirected or multi-graph; circuits are DiGraphs")
    g = upgrade(nx.DiGraph(g), str(path))  # a graph saved before typed edge roles gets them
    try:
        return validate(g)
    except ValueError as err:
        raise ValueError(f"{path} was read but is not a complete circuit graph: {err}") from err


def convert(
    src: str | Path, format: str, out: str | Path | None = None, *, force: bool = False
) -> Path:
    """Read the graph at `src` and write it in `format` to `out` (default: `src` with the
    format's suffix). An existing `out` is replaced only with `force`. Returns the path."""
    fmt = format_of(out or src, format)
    out = Path(out) if out is not None else plain_name(src).with_suffix(FORMATS[fmt][0])
    if out.resolve() == Path(src).resolve():
        raise ValueError(f"{out} is the input file; give --out a different path")
    if out.is_file() and not out.is_symlink() and not force:  # `write` refuses the rest
        raise ValueError(f"{out} exists; pass --force to replace it, or --out another file")
    return write(read(src), out, fmt)
