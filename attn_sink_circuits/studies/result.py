"""What every trace returns.

Every tracer's result is a `TraceResult`: `summary()` (headline numbers, JSON-ready),
`tables()` (name -> DataFrame), `graph` (the circuit, or None when there is nothing to draw),
`figures()` (name -> matplotlib Figure), `text()` (the findings in words, Markdown),
`finding()` (the few sentences a report opens with), `captions()` (what each figure and table
shows), `summary_keys()` (what each summary number means), `details()` (further JSON), plus
`model`, `config`, `seconds` and `provenance` (what ran on what: `attn_sink_circuits.runs.provenance`).
`save(folder)` writes any of them with one folder layout (`attn_sink_circuits.report.write_trace`);
`read_summary` reads its summary.json back. Notebooks show the short `repr` or the HTML table.
How a pipeline runs its steps (timing, checkpoints, resume) is `attn_sink_circuits.runs.steps`.

Every study's result, whatever its base, follows one protocol: `Result` (`summary()` with the
finding first, `save(folder)` writing the run folder with its provenance, `figures()`), and
`CircuitResult` where the study yields a circuit (`graph`, `draw()`, `judge(data)` through the
library's one judging path, `attn_sink_circuits.discovery.saved.judge_saved`, which reads what
the circuit was found under from the graph). Each study package exposes
`run(model, data, config) -> Result`; `tests/test_study_shape.py` checks every one.
`FoundCircuit` gives a result holding an edge circuit its `draw` and `judge`; `save_figures`
writes a result's figures. This module is the studies' save path: with a result's own `save`,
the one place a study reaches `attn_sink_circuits.report` (which sits below the studies).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import networkx as nx
import pandas as pd

from attn_sink_circuits._repr import summary_html
from attn_sink_circuits.runs.provenance import check_schema_version

SUMMARY_FILE = "summary.json"


@runtime_checkable
class Result(Protocol):
    """What every study's `run` returns."""

    def summary(self) -> dict:
        """Headline numbers, JSON-ready, the finding first."""
        ...

    def save(self, folder: str | Path) -> Path:
        """Write the run folder (atomic, with the run's provenance); returns its main file or
        the folder."""
        ...

    def figures(self) -> dict:
        """Name -> matplotlib Figure."""
        ...


@runtime_checkable
class CircuitResult(Result, Protocol):
    """A `Result` that found a circuit: its graph (with what it was found under on it), drawn
    and judged on other data."""

    graph: nx.DiGraph

    def draw(self, title: str | None = None, **settings: Any) -> Any:
        """The circuit drawn (`attn_sink_circuits.report.draw_circuit`)."""
        ...

    def judge(self, data: Any) -> dict:
        """The circuit's faithfulness on other data, judged as it was found."""
        ...


class TraceResult:
    """Base of the tracers' results (see the module docstring). Subclasses are dataclasses with
    `model: str`, `config`, `graph`, `seconds` and implement `summary`, `tables`, `figures`
    and `text`."""

    title: str = "trace"
    """What was traced, for report titles (e.g. "P0-sink circuit")."""
    model: str
    config: Any
    graph: nx.DiGraph | None
    seconds: dict[str, float]
    resumed: tuple[str, ...] = ()
    """Steps loaded from a checkpoint instead of run (their `seconds` are the original run's)."""
    provenance: dict | None = None
    """The run's provenance record (`attn_sink_circuits.runs.provenance.provenance`: model, texts with the fit
    / held-out indices, config), made by the tracer when it finished; `write_trace` sets its
    end time when it writes. None: only the code, command and software are known."""

    def summary(self) -> dict:
        raise NotImplementedError

    checkpoint: Path | None = None
    """The folder the run kept its finished steps in (None: none), removed once `save` has
    written the run folder."""

    def save(self, folder: str | Path, model: Any = None) -> Path:
        """Write the run folder (`attn_sink_circuits.report.write_trace`: summary.json with the
        provenance, tables, the circuit, figures, report.html, summary.md; atomic); returns
        report.html's path. With `model` (the one traced), the report also shows the attention
        patterns of the heads the trace names. Under torchrun only rank 0 writes (the other
        ranks write to a scratch folder removed at exit); the step checkpoints (`checkpoint`)
        are removed once the folder is whole."""
        from attn_sink_circuits.discovery.distributed import writer_paths
        from attn_sink_circuits.report import write_trace
        from attn_sink_circuits.runs.steps import remove_checkpoints

        report = write_trace(self, writer_paths(Path(folder))[0], model)
        if self.checkpoint is not None:
            remove_checkpoints(self.checkpoint)
        return report

    def tables(self) -> dict[str, pd.DataFrame]:
        raise NotImplementedError

    def figures(self) -> dict:
        raise NotImplementedError

    def text(self) -> str:
        raise NotImplementedError

    def finding(self) -> str:
        """The finding in a few sentences with its headline numbers (Markdown): what the report
        and summary.md open with. Default: the first paragraph of `text()`."""
        return self.text().split("\n\n", 1)[0]

    def captions(self) -> dict[str, str]:
        """Figure or table name -> a caption saying what it shows (default none: the name)."""
        return {}

    def summary_keys(self) -> dict[str, str]:
        """Summary key -> what it means (default none), written beside the summary."""
        return {}

    def details(self) -> dict:
        """Further JSON beside the summary (default none)."""
        return {}

    def attention_views(self) -> tuple[list[str], list[str]]:
        """(texts, head ids) worth showing as attention patterns (default none)."""
        return [], []

    def settings(self) -> dict:
        """The config's fields plus what the run was given (model, texts)."""
        return self.config.to_dict()

    def __repr__(self) -> str:
        g = self.graph
        graph = f"{g.number_of_nodes()} nodes / {g.number_of_edges()} edges" if g else "none"
        return (
            f"{type(self).__name__}(model={self.model!r}, tables={len(self.tables())}, "
            f"graph={graph}, seconds={sum(self.seconds.values()):.1f})"
        )

    def _repr_html_(self) -> str:
        return summary_html(repr(self), self.summary())


class FoundCircuit:
    """`draw` and `judge` for a result whose `graph` is an edge circuit found by edge discovery
    (its metric, positions, first token and settings on it). A subclass says which model the
    circuit was found on and under which discovery settings (`judging`)."""

    graph: nx.DiGraph

    def judging(self) -> tuple[Any, Any]:
        """(the model the circuit was found on, its `DiscoveryConfig`)."""
        raise NotImplementedError

    def draw(self, title: str | None = None, **settings: Any) -> Any:
        """The circuit drawn (`attn_sink_circuits.report.draw_circuit`; its `DrawOptions` as
        keywords)."""
        from attn_sink_circuits.report.draw import draw_circuit

        return draw_circuit(self.graph, title=title, **settings)

    def judge(
        self, data: Any = None, *, n_random: int | None = None, seed: int | None = None
    ) -> dict:
        """The circuit's faithfulness on other `data` (a list of texts, a text file, `Pairs` or a
        task's name; None: the default texts, `attn_sink_circuits.core.texts.DEFAULT_TEXTS`), cut
        and started as its fit texts were, with a bootstrap interval, `n_random` random circuits
        of its size (default: its own setting) and the complement: the library's one judging
        path, `attn_sink_circuits.discovery.saved.judge_saved`, which reads what the circuit was
        found under from the graph."""
        from attn_sink_circuits.core.texts import DEFAULT_TEXTS
        from attn_sink_circuits.discovery.saved import judge_saved

        model, d = self.judging()
        if model is None:
            raise ValueError(
                "this result holds no model (it was read back); judge its graph with "
                "attn_sink_circuits.discovery.saved.judge_saved(model, result.graph, data)"
            )
        data = DEFAULT_TEXTS if data is None else data
        if isinstance(data, Sequence) and not isinstance(data, str):
            if not data or not all(isinstance(t, str) for t in data):
                raise ValueError("data must be a non-empty list of texts, a text file or pairs")
            data = list(data)
        return judge_saved(
            model, self.graph, data, n_random=d.n_random if n_random is None else n_random,
            n_boot=d.n_boot, seed=d.seed if seed is None else seed, batch_size=d.batch_size,
        )  # fmt: skip


def save_figures(figures: dict, folder: str | Path) -> list[Path]:
    """Write each figure of `figures` (name -> Figure) as `{name}.png` in `folder` (atomically,
    `attn_sink_circuits.report.draw.save_figure`); returns the paths."""
    from attn_sink_circuits.report.draw import save_figure

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    return [save_figure(fig, folder / f"{name}.png") for name, fig in figures.items()]


def read_summary(folder: str | Path) -> dict:
    """The summary.json of a trace folder written by `attn_sink_circuits.report.write_trace`: the current
    layout, or the one before schema versions (no `schema_version`, no `provenance`; read as
    version 1); a newer schema version is refused with a ValueError in one line."""
    path = Path(folder) / SUMMARY_FILE
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file; give a folder written by a trace") from None
    except ValueError as err:
        raise ValueError(
            f"{path} is not JSON ({err}); the run that wrote it did not finish"
        ) from None
    if not isinstance(doc, dict) or "summary" not in doc:
        raise ValueError(f"{path} holds no trace summary (no 'summary' key)")
    return {**doc, "schema_version": check_schema_version(doc, path)}
