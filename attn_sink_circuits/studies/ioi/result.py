"""`IOIResult`: what `attn_sink_circuits.studies.ioi.run` returns, a `CircuitResult`
(`attn_sink_circuits.studies.result`): the IOI edge circuit with its held-out judgement and MIB's
CPR / CMD (`summary`), its graph (recording the pairs' metric, task, partner and protocol, so
`judge_saved` judges it as it was found), `draw`, `judge(data)`, `figures` and `save(folder)`,
the run folder `circuits discover` writes."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx
from matplotlib.figure import Figure

from attn_sink_circuits._repr import number, summary_html
from attn_sink_circuits.core.identity import model_key
from attn_sink_circuits.discovery import EdgeCircuit
from attn_sink_circuits.discovery.pairs import Pairs
from attn_sink_circuits.discovery.saved import judge_saved
from attn_sink_circuits.studies.ioi import TASKS
from attn_sink_circuits.studies.ioi.config import IOIConfig
from attn_sink_circuits.studies.ioi.data import IOIPairs, given_rows, pairs_of
from attn_sink_circuits.studies.ioi.figures import curves_frame, mib_curves_figure
from attn_sink_circuits.studies.result import FoundCircuit

FILES = ("summary.json", "curve.csv", "edges.csv", "mib_curves.csv", "circuit.json",
         "circuit.eap-ig.json", "importances.mib.json", "mib_curves.png", "faithfulness.png", "heads.json")  # fmt: skip
"""What `IOIResult.save` writes (edges.csv and circuit.json gzip'd, NAME.gz, when large;
mib_curves.png only when the run measured MIB's sizes; heads.json with `config.heads`)."""


@dataclass(repr=False)
class IOIResult(FoundCircuit):
    """An IOI circuit run: the `model`, its `config`, the `pairs` (fit and held-out, with what
    made them), the discovered `circuit` (`EdgeCircuit`: scores, curve, held-out judgement,
    MIB's per-size values), its `graph`, the run's `provenance` record, and the discovery's
    wall time and the process's peak memory; with `config.heads`, the model's `behaviour` and
    its `heads`."""

    model: Any
    config: IOIConfig
    pairs: IOIPairs
    circuit: EdgeCircuit
    graph: nx.DiGraph
    provenance: dict = field(default_factory=dict)
    seconds: float = 0.0
    peak_rss_mb: float = 0.0
    behaviour: dict | None = None
    """The model's own logit difference on the pairs (`heads.behaviour`), with `config.heads`."""
    heads: list[dict] | None = None
    """Every head's name-mover row with its circuit edges (`heads.head_table`), with
    `config.heads`."""

    def finding(self) -> str:
        """The finding in one sentence: MIB's CPR / CMD on the held-out pairs (where measured),
        the circuit's size, its held-out faithfulness with the interval and random circuits'."""
        s = self.circuit.summary()
        lo, hi = s["heldout_faithfulness_ci"]
        head = ""
        if "cpr_heldout" in s:
            (clo, chi), (dlo, dhi) = s["cpr_heldout_ci"], s["cmd_heldout_ci"]
            head = (f"CPR {number(s['cpr_heldout'])} [{number(clo)}, {number(chi)}], CMD "
                    f"{number(s['cmd_heldout'], '.3f')} [{number(dlo, '.3f')}, "
                    f"{number(dhi, '.3f')}] on {s['n_heldout_texts']} held-out pairs; ")  # fmt: skip
        return (
            f"{head}the circuit keeps {s['n_edges']:,} of {s['n_edges_total']:,} edges, held-out "
            f"faithfulness {number(s['heldout_faithfulness'])} [{number(lo)}, {number(hi)}] "
            f"(random circuits of its size {number(s['random_faithfulness_mean'])})"
        )

    def summary(self) -> dict:
        """The finding first, then the run (model, pairs, partner, protocol with what differs
        from it) and the circuit's summary (`EdgeCircuit.summary`: size, faithfulness on fit and
        held-out pairs with the interval, random circuits, CPR / CMD and MIB's sizes), |1 - f|
        held-out, the model's and the empty circuit's held-out metric, the model's behaviour
        (`model_*`, with `config.heads`), wall time and peak memory. JSON-ready: a number not
        measured (NaN, e.g. the stability with no resamples) is None."""
        found = self.circuit.summary()
        found.pop("positions", None)  # every position
        cfg, held = self.config, self.circuit.heldout
        f = found["heldout_faithfulness"]
        behaviour = {f"model_{k}": v for k, v in (self.behaviour or {}).items()}
        doc = {
            "finding": self.finding(),
            "model": model_key(self.model),
            "pairs": self.pairs.source,
            "partner": self.pairs.partner,
            "protocol": {"name": cfg.protocol, "overrides": cfg.overrides()},
            "pair_seed": cfg.pair_seed,
            "n_tokens": self.pairs.n_tokens,
            **found,
            "ig_steps": cfg.discovery.ig_steps if found["method"].startswith("eap_ig") else None,
            "abs_1_minus_f_heldout": abs(1 - f) if math.isfinite(f) else math.nan,
            "heldout_model_metric": held.model_metric,
            "heldout_empty_metric": held.empty_metric,
            **behaviour,
            "seconds": self.seconds,
            "peak_rss_mb": self.peak_rss_mb,
        }
        return {k: None if isinstance(v, float) and not math.isfinite(v) else v
                for k, v in doc.items()}  # fmt: skip

    def figures(self) -> dict[str, Figure]:
        """MIB's per-size curves (where measured) and the faithfulness curve."""
        from attn_sink_circuits.studies.figures import faithfulness_figure

        out = {}
        if self.circuit.mib:
            s = self.circuit.summary()
            title = (f"{model_key(self.model)} IOI {self.pairs.partner or 'pairs'} "
                     f"{s['method']}: CPR {s['cpr_heldout']:.2f}, CMD {s['cmd_heldout']:.3f} "
                     "(held-out)")  # fmt: skip
            out["mib_curves"] = mib_curves_figure(curves_frame(self.circuit.mib), title)
        out["faithfulness"] = faithfulness_figure(self.circuit, model_key(self.model))
        return out

    def judging(self) -> tuple[Any, Any]:
        return self.model, self.config.discovery

    def draw(self, title: str | None = None, **settings: Any) -> Figure:
        """The circuit drawn (`FoundCircuit.draw`), titled with the model and the pairs."""
        title = title or f"IOI circuit: {model_key(self.model)}, {self.pairs.source}"
        return super().draw(title, **settings)

    def judge(self, data: Any = "ioi", *, seed: int | None = None) -> dict:
        """The circuit's faithfulness on other pairs, judged as it was found (its protocol's
        padding and BOS, its partner; `attn_sink_circuits.discovery.saved.judge_saved`): the task's
        name "ioi" (`judge_saved`'s 32 pairs, made with seed `seed`, default the run's pair seed
        + 1: other prompts than the run's), `Pairs`, a pairs file or rows. With the interval,
        random circuits of its size (its own count) and the complement."""
        d = self.config.discovery
        seed = self.config.pair_seed + 1 if seed is None else seed
        if not isinstance(data, Pairs) and not (isinstance(data, str) and data in TASKS):
            source = str(data) if isinstance(data, str | Path) else "rows"
            rows = given_rows(data, source)
            data = pairs_of(self.model, rows, len(rows), self.config.named(), shuffle=False,
                            source=source)  # fmt: skip
        return judge_saved(self.model, self.graph, data, n_random=d.n_random, n_boot=d.n_boot,
                           seed=seed, batch_size=d.batch_size)  # fmt: skip

    def save(self, folder: str | Path, *, progress: bool = False) -> Path:
        """Write the run folder `folder` atomically (`FILES`, with the run's provenance in
        summary.json and the folder's marker); returns the folder."""
        from attn_sink_circuits.runs.io import atomic_folder
        from attn_sink_circuits.runs.steps import Steps
        from attn_sink_circuits.studies.ioi.save import write_circuit, write_tables

        record = self.provenance or None
        with atomic_folder(folder, record=record) as tmp, Steps(3, "writing", progress) as steps:
            steps.run("tables", write_tables, self, tmp)  # heads.json too, with config.heads
            steps.run("circuit", write_circuit, self, tmp)
            steps.run("figures", self.write_figures, tmp)
        return Path(folder)

    def write_figures(self, folder: Path) -> None:
        """Each figure as FOLDER/NAME.png."""
        for name, fig in self.figures().items():
            fig.savefig(folder / f"{name}.png", dpi=120)

    def __repr__(self) -> str:
        return f"IOIResult({model_key(self.model)}, {self.pairs.source}: {self.finding()})"

    def _repr_html_(self) -> str:
        return summary_html(repr(self), self.summary())


__all__ = ["FILES", "IOIResult"]
