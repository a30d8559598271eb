"""What a circuit of counterfactual pairs was found under, and judging it under the same.

A circuit found on pairs is only comparable on pairs made the same way: the task, the corrupted
partner (IOI's ABC or MIB's `s2_io_flip` give very different circuits), and the protocol's
padding and BOS. New graphs carry these as attributes (`record_pairs`: `task`, `partner`,
`protocol`, `pad`, `bos`); graphs saved before are read the same way from what they hold (the
partner from the prose attribute `data`, "task ioi, partner s2_io_flip (seed 0)"; the protocol
from the run folder's summary.json). `judging_under` turns the record and the flags a user gave
into the protocol and partner to judge under, with one note for each setting that differs from
the record, and refuses what cannot be compared (another task, an unknown partner)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from attn_sink_circuits.discovery.protocol import PROTOCOLS, Protocol, protocol, protocol_name

if TYPE_CHECKING:  # networkx is imported only where graphs are read
    import networkx as nx

PAIRS_FILE = "pairs"
"""The `task` of a circuit found on a `--pairs` file (each pair gives its own corrupt text)."""
_DATA = re.compile(r"task (?P<task>\w+), partner (?P<partner>\w+)")
"""The prose `data` attribute an IOI run (`attn_sink_circuits.studies.ioi.run`) writes for a task."""


@dataclass(frozen=True)
class Recorded:
    """How a circuit's pairs were made: `task` ("ioi", or `PAIRS_FILE`), `partner` (None for a
    pairs file or when unknown), `protocol` name, `pad` and `bos` (None where not recorded)."""

    task: str | None = None
    partner: str | None = None
    protocol: str | None = None
    pad: bool | None = None
    bos: bool | None = None


def record_pairs(graph: nx.DiGraph, task: str | None, partner: str | None, proto: Protocol) -> None:
    """Store on `graph` how its pairs were made: `task` (None: a pairs file), the IOI `partner`
    (None for a pairs file), the protocol's name (kept when `graph` already records it with its
    overrides), padding and BOS (JSON values: true / false / null)."""
    graph.graph["task"] = task or PAIRS_FILE
    graph.graph["partner"] = partner or ""
    graph.graph.setdefault("protocol", json.dumps({"name": proto.name}))
    graph.graph["pad"] = json.dumps(proto.pad)
    graph.graph["bos"] = json.dumps(proto.bos)


def _json_attr(graph: nx.DiGraph, key: str):
    value = graph.graph.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def _summary_protocol(path: str | Path | None) -> str | None:
    """The protocol the summary.json beside a saved circuit names (None when there is none)."""
    if path is None:
        return None
    summary = Path(path).parent / "summary.json"
    try:
        doc = json.loads(summary.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return protocol_name(doc.get("protocol")) if isinstance(doc, dict) else None


def found_under(graph: nx.DiGraph, path: str | Path | None = None) -> Recorded:
    """How the pairs of the circuit in `graph` (read from `path`) were made: its attributes,
    else what its `data` attribute names and the protocol of the summary.json beside `path`."""
    task, partner = graph.graph.get("task") or None, graph.graph.get("partner") or None
    named = _DATA.search(str(graph.graph.get("data", "")))
    if task is None and named is not None:
        task, partner = named["task"], partner or named["partner"]
    if task is None and str(graph.graph.get("data", "")).startswith("IOI pairs"):
        task = "ioi"
    name = protocol_name(_json_attr(graph, "protocol")) or _summary_protocol(path)
    pad, bos = _json_attr(graph, "pad"), _json_attr(graph, "bos")
    if name in PROTOCOLS and "pad" not in graph.graph:  # an older graph: its protocol's
        pad, bos = PROTOCOLS[name].pad, PROTOCOLS[name].bos
    return Recorded(task, partner, name, pad, bos)


@dataclass(frozen=True)
class Judging:
    """What a circuit is judged under: the protocol (its padding and BOS), the IOI partner, and
    one note a line for each setting that differs from what the circuit was found under."""

    protocol: Protocol
    partner: str
    notes: tuple[str, ...] = ()


def judging_under(
    rec: Recorded, task: str | None, given_protocol: str | None, given_partner: str | None
) -> Judging:
    """The protocol and partner to judge a circuit found under `rec` on `task`'s pairs (None: a
    pairs file): the recorded ones unless given (`given_protocol`, `given_partner`). A ValueError
    for another task, or a task circuit whose partner is neither recorded nor given."""
    if rec.task not in (None, PAIRS_FILE) and task not in (None, rec.task):
        raise ValueError(
            f"the circuit was found on task {rec.task}, not {task}: give --task {rec.task}"
        )
    if rec.task == PAIRS_FILE and task is not None:
        raise ValueError(
            f"the circuit was found on a --pairs file, not on task {task}: judge it on --pairs"
        )
    name = given_protocol or rec.protocol or "library"
    proto = protocol(name)
    partner = given_partner or rec.partner
    if task is not None and partner is None:
        if given_protocol is None:
            raise ValueError(
                "the graph does not record the partner (corrupted prompt) its pairs were made "
                "with; pass --partner (abc, s2_io_flip, ...) or --protocol (library, mib)"
            )
        partner = proto.partner
    return Judging(proto, partner or proto.partner, tuple(_notes(rec, task, proto, partner)))


def _notes(rec: Recorded, task: str | None, proto: Protocol, partner: str | None) -> list[str]:
    """One line for each setting the judging pairs take that differs from the record."""
    notes = []
    if rec.task == "ioi" and task is None:
        notes.append("the circuit was found on task ioi; it is judged on the --pairs file given")
    if rec.protocol is not None and proto.name != rec.protocol:
        notes.append(f"judged under protocol {proto.name}, not {rec.protocol} (found under it)")
    elif rec.protocol is None:
        notes.append(f"the graph does not record its protocol; judged under {proto.name}")
    if task is not None and rec.partner is not None and partner != rec.partner:
        notes.append(f"judged under partner {partner}, not {rec.partner} (found under it)")
    for what, found, now in (("padding", rec.pad, proto.pad), ("BOS", rec.bos, proto.bos)):
        if found is not None and found != now:
            notes.append(f"judged with {what} {_on(now)}, not {_on(found)} (found with it)")
    return notes


def judging_pairs(model, graph: nx.DiGraph, task: str, n: int, seed: int = 0, **given):
    """(`n` pairs of `task` made as the circuit in `graph` was found: its protocol's padding and
    BOS and its partner, `Judging` with the notes). `given`: `path` (where the graph was read
    from, for an older graph's summary.json), `protocol` and `partner` to judge under instead."""
    from attn_sink_circuits.studies.ioi.prompts import ioi_pairs

    if task != "ioi":
        raise ValueError(f"unknown task {task!r}; the tasks with generated pairs: ioi")
    rec = found_under(graph, given.get("path"))
    how = judging_under(rec, task, given.get("protocol"), given.get("partner"))
    made = ioi_pairs(model, n, seed=seed, partner=how.partner, pad=how.protocol.pad,
                     bos=how.protocol.bos)[0]  # fmt: skip
    return made, how


def _on(value: bool | None) -> str:
    return {True: "on", False: "off", None: "the model's default"}[value]


__all__ = [
    "PAIRS_FILE",
    "Judging",
    "Recorded",
    "found_under",
    "judging_pairs",
    "judging_under",
    "record_pairs",
]
