"""The files of an IOI run folder (`IOIResult.save`): its tables (summary.json with the run's
provenance, curve.csv, edges.csv, mib_curves.csv) and its circuit (circuit.json, the EAP-IG file
and MIB's importance file)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from attn_sink_circuits.discovery.protocol import write_mib
from attn_sink_circuits.discovery.submission import IMPORTANCES
from attn_sink_circuits.graph.eap_ig import shape_of, write_eap_ig
from attn_sink_circuits.graph.io import write
from attn_sink_circuits.runs.io import write_csv, write_json
from attn_sink_circuits.runs.provenance import stamped
from attn_sink_circuits.studies.ioi.figures import curves_frame
from attn_sink_circuits.studies.ioi.name_movers import NameMoverRule

if TYPE_CHECKING:
    from attn_sink_circuits.studies.ioi.result import IOIResult


def write_tables(result: IOIResult, folder: Path) -> None:
    """summary.json (stamped with the run's provenance), curve.csv, edges.csv (gzip'd when
    large), mib_curves.csv (MIB's sizes, one row per split, ranking and size) and, where the
    run has them, heads.json (the name-mover rule and every head's row)."""
    write_json(folder / "summary.json", stamped(result.summary(), result.provenance or None))
    result.circuit.curve.to_csv(folder / "curve.csv", index=False)
    write_csv(folder / "edges.csv", result.circuit.edges_frame(), lean=True)
    curves_frame(result.circuit.mib).to_csv(folder / "mib_curves.csv", index=False)
    if result.heads is not None:
        rule = NameMoverRule().to_dict()
        write_json(folder / "heads.json", {"rule": rule, "heads": result.heads})


def write_circuit(result: IOIResult, folder: Path) -> Path:
    """circuit.json (gzip'd when large), circuit.eap-ig.json (the circuit for EAP-IG / MIB) and
    importances.mib.json (every edge's score: MIB's importance file); returns circuit.json's
    path as written."""
    shape = shape_of(result.model)
    path = write(result.graph, folder / "circuit.json", lean=True)
    write_eap_ig(result.graph, folder / "circuit.eap-ig.json", shape)
    write_mib(result.circuit, shape, folder / IMPORTANCES)
    return path


__all__ = ["write_circuit", "write_tables"]
