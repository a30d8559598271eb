"""`emergence`: the same measurements at every checkpoint of a training run, one row each."""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch
from matplotlib.figure import Figure

from attn_sink_circuits.runs.io import atomic_folder, json_finite, stored, write_csv, write_json
from attn_sink_circuits.runs.provenance import provenance, stamped
from attn_sink_circuits.runs.record_paths import portable_path
from attn_sink_circuits.studies.emergence.config import EmergenceConfig
from attn_sink_circuits.studies.emergence.figures import emergence_figure
from attn_sink_circuits.studies.emergence.measure import measure_checkpoint
from attn_sink_circuits.studies.emergence.specs import (
    CheckpointSpec,
    check_hub,
    expand_specs,
    load_checkpoint,
)
from attn_sink_circuits.studies.emergence.summary import (
    run_summary,
    summary_text,
    trajectory_markdown,
)

TEXT_CHARS_PER_TOKEN = 8
"""Held-out windows are this many characters per token long, so that any tokenizer (one byte a
token, or BPE) gives at least `n_tokens` tokens; `token_rows` cuts them."""


def stdlib_texts(n: int, n_tokens: int) -> list[str]:
    """`n` windows of the standard-library corpus's held-out files (never trained on)."""
    return heldout_texts("stdlib", n, n_tokens)


def heldout_texts(corpus: str, n: int, n_tokens: int) -> list[str]:
    """`n` evenly spaced windows of the held-out part (never trained on) of the training corpus
    called `corpus` (`attn_sink_circuits.training.corpora.CORPORA`)."""
    from attn_sink_circuits.training.corpora import named_corpus

    data = named_corpus(corpus).heldout
    width = n_tokens * TEXT_CHARS_PER_TOKEN
    starts = torch.linspace(0, len(data) - width - 1, n).long().tolist()
    return [bytes(data[s : s + width]).decode("utf-8", errors="ignore") for s in starts]


@dataclass
class EmergenceResult:
    """One row per checkpoint (see `measure_checkpoint`), in the order given, and the training
    runs' loss curves (`run`, `step`, `train_loss`, `heldout_loss`) where the checkpoints
    come from this library's training."""

    checkpoints: list[CheckpointSpec]
    rows: list[dict]
    config: EmergenceConfig
    texts: str
    loss: pd.DataFrame = field(repr=False)
    seconds: float = 0.0

    def table(self) -> pd.DataFrame:
        """The rows as a table: run, step, loss and every scalar (lists as text)."""
        records = []
        for spec, row in zip(self.checkpoints, self.rows, strict=True):
            training = spec.training or {}
            rec = {"run": run_name(spec), "step": spec.step, "checkpoint": spec.label}
            rec |= {"tokens": training.get("tokens"), "heldout_loss": training.get("heldout_loss")}
            for key, value in row.items():
                if key in ("p0_norm", "p0_norm_ratio", "p0_mass_by_layer", "seconds"):
                    continue
                rec[key] = " ".join(map(str, value)) if isinstance(value, list) else value
            rec["seconds"] = round(sum(row["seconds"].values()), 2)
            records.append(rec)
        return pd.DataFrame(records)

    def runs(self) -> dict[str, list[int]]:
        """Row indices of each training run (checkpoints of no run: "series")."""
        out: dict[str, list[int]] = {}
        for i, spec in enumerate(self.checkpoints):
            out.setdefault(run_name(spec) or "series", []).append(i)
        return out

    def summaries(self) -> dict[str, dict]:
        table = self.table()
        return {run: run_summary(table.iloc[idx]) for run, idx in self.runs().items()}

    def summary(self) -> dict:
        """Each run's closing numbers first (`summaries`: where the sink forms, its last phase,
        the last edge circuit), then the number of checkpoints and the texts measured on."""
        return json_finite({"runs": self.summaries(), "checkpoints": len(self.rows),
                            "texts": self.texts, "seconds": round(self.seconds, 1)})  # fmt: skip

    def text(self) -> str:
        head = (
            f"emergence over {len(self.rows)} checkpoints on {self.texts} "
            f"({self.config.n_texts} x {self.config.n_tokens} tokens); {self.seconds:.0f} s"
        )
        body = [summary_text(run, s) for run, s in self.summaries().items()]
        return "\n".join([head, *body])

    def figures(self) -> dict[str, Figure]:
        table = self.table()
        return {
            run: emergence_figure(
                run, table.iloc[idx], [self.rows[i] for i in idx],
                self.loss[self.loss.run == run], self.config.formed_mass,
            )
            for run, idx in self.runs().items()
        }  # fmt: skip

    def save(self, out: str | Path) -> Path:
        """Write `table.csv`, `rows.json` (every measurement, per-layer lists included),
        `loss.csv` (gzip'd, `loss.csv.gz`, when large), `summary.json`, `summary.txt` and per
        run `emergence_<run>.png` and `trajectory_<run>.md` (the table in markdown) into
        `out`, replaced as a whole, with the run's provenance (its settings: the config)."""
        record = provenance(settings=self.config.to_dict())
        with atomic_folder(out, {"study": "emergence"}, record) as tmp:
            write_csv(tmp / "table.csv", self.table())
            write_csv(tmp / "loss.csv", self.loss, lean=True)
            checkpoints = [s.to_dict() | {"spec": recorded_spec(s)} for s in self.checkpoints]
            write_json(tmp / "rows.json", {"checkpoints": checkpoints, "rows": self.rows})
            doc = {"config": self.config.to_dict(), "texts": self.texts, "seconds": self.seconds}
            write_json(tmp / "summary.json", stamped(doc | {"runs": self.summaries()}, record))
            (tmp / "summary.txt").write_text(self.text() + "\n", encoding="utf-8")
            table = self.table()
            for run, idx in self.runs().items():
                text = trajectory_markdown(table.iloc[idx]) + "\n"
                (tmp / f"trajectory_{run}.md").write_text(text, encoding="utf-8")
            for run, fig in self.figures().items():
                fig.savefig(tmp / f"emergence_{run}.png", dpi=90)
        return Path(out)


def load_result(folder: str | Path) -> EmergenceResult:
    """The EmergenceResult that `EmergenceResult.save` wrote into `folder`."""
    folder = Path(folder)
    try:
        rows = json.loads((folder / "rows.json").read_text(encoding="utf-8"))
        doc = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
        loss = pd.read_csv(stored(folder / "loss.csv"))
    except (OSError, ValueError) as err:
        raise ValueError(
            f"{folder} is not a folder written by EmergenceResult.save ({err})"
        ) from None
    specs = [CheckpointSpec(**c) for c in rows["checkpoints"]]
    return EmergenceResult(specs, rows["rows"], EmergenceConfig(**doc["config"]), doc["texts"],
                           loss, doc["seconds"])  # fmt: skip


def recorded_spec(spec: CheckpointSpec) -> str:
    """How rows.json names a checkpoint: a path under the repository relative to it, one
    outside as `<outside>/RUN/checkpoints/step_N` (`portable_path`, keeping what `run_name`
    reads); a registry key or hub name as it is."""
    return portable_path(spec.spec, keep=3 if run_name(spec) else 1)


def run_name(spec: CheckpointSpec) -> str:
    """The training run a checkpoint folder belongs to (`RUN/checkpoints/step_N`), else ""."""
    path = Path(spec.spec)
    return path.parent.parent.name if path.parent.name == "checkpoints" else ""


def loss_curves(specs: Sequence[CheckpointSpec]) -> pd.DataFrame:
    """The `log.csv` of every training run the checkpoints come from."""
    frames = []
    for run in dict.fromkeys(Path(s.spec).parent.parent for s in specs if run_name(s)):
        if (run / "log.csv").is_file():
            log = pd.read_csv(run / "log.csv")
            frames.append(log[["step", "train_loss", "heldout_loss"]].assign(run=run.name))
    cols = ["run", "step", "train_loss", "heldout_loss"]
    return pd.concat(frames)[cols] if frames else pd.DataFrame(columns=cols)


def trained_with_bos(spec: CheckpointSpec) -> bool:
    """False for a checkpoint of a run trained without <bos> (`run.json`, train.bos), so
    that it is measured on windows like its training windows; True otherwise."""
    run_doc = Path(spec.spec).parent.parent / "run.json"
    if not run_name(spec) or not run_doc.is_file():
        return True
    return bool(json.loads(run_doc.read_text(encoding="utf-8"))["train"].get("bos", True))


def _tokens(model, texts: list[str], config: EmergenceConfig, bos: bool = True):
    from attn_sink_circuits.discovery import split_texts, token_rows

    info = getattr(model, "circuits_info", None)
    with_bos = bos and (info is None or info.prepend_bos)
    first = model.tokenizer.bos_token_id if with_bos else None
    rows = token_rows(model, texts[: config.n_texts], config.n_tokens, first=first)
    fit, held = split_texts(texts, config.n_fit, config.n_heldout, config.seed)
    edges = (
        token_rows(model, fit, config.n_tokens, first=first),
        token_rows(model, held, config.n_tokens, first=first),
    )
    return rows, edges


def _wants_edges(index: int, n: int, every: int) -> bool:
    return every > 0 and (index % every == 0 or index == n - 1)


def emergence(
    checkpoints: Sequence[str | Path],
    texts: Sequence[str] | None = None,
    config: EmergenceConfig = EmergenceConfig(),  # noqa: B008 (frozen)
    *,
    corpus: str = "stdlib",
    device: str = "cpu",
    cache: str | Path | None = None,
    progress: bool = True,
) -> EmergenceResult:
    """Measure every checkpoint (specs as `attn_sink_circuits.studies.emergence.specs` describes; training runs
    expand into their checkpoints) on `texts` (default: windows of the held-out part of the
    training corpus called `corpus`, `heldout_texts`). Every spec is checked before the first
    model loads.

    With `cache` (a folder), each checkpoint's row is saved there as it is measured, keyed by
    the checkpoint (its weights' hash for a folder), the config and the texts; a later call
    reads the rows already there instead of measuring again, so a killed series, or one
    extended by new checkpoints, only measures what is new."""
    specs = expand_specs(checkpoints)
    check_hub(specs)
    name = {"stdlib": "standard-library"}.get(corpus, corpus)
    source = "given texts" if texts is not None else f"held-out {name} windows"
    need = max(config.n_texts, config.n_fit + config.n_heldout)
    texts = list(texts) if texts is not None else heldout_texts(corpus, need, config.n_tokens)
    if len(texts) < need:
        raise ValueError(
            f"{len(texts)} texts given, {need} needed (n_texts={config.n_texts}, n_fit + "
            f"n_heldout={config.n_fit + config.n_heldout}); give more texts or lower these"
        )
    t0 = time.perf_counter()
    rows = []
    for i, spec in enumerate(specs):
        with_edges = _wants_edges(i, len(specs), config.edges_every)
        path = _cache_path(cache, spec, config, texts, with_edges)
        if path is not None and path.is_file():
            rows.append(json.loads(path.read_text(encoding="utf-8")))
        else:
            rows.append(_measure(spec, texts, config, with_edges, device))
            if path is not None:
                write_json(path, rows[-1])
        if progress:
            _progress(i, len(specs), spec, rows[-1])
    return EmergenceResult(
        specs, rows, config, source, loss_curves(specs), time.perf_counter() - t0
    )


def run(
    model: str | Path | Sequence[str | Path],
    data: str | Path | Sequence[str] | None = None,
    config: EmergenceConfig | None = None,
    *,
    corpus: str = "stdlib",
    device: str = "cpu",
    cache: str | Path | None = None,
    progress: bool = True,
) -> EmergenceResult:
    """The emergence study in one call: `emergence` over `model`, the checkpoints (a training
    run's folder, a checkpoint spec, or a list of them; `attn_sink_circuits.studies.emergence.specs`),
    on `data` (a list of texts, a text file, or None: held-out windows of the training corpus
    called `corpus`) with `config` (an `EmergenceConfig`; None: the defaults), each checkpoint
    loaded on `device`, its row kept in `cache` (`emergence`). The result is a `Result`;
    `circuits emergence` runs this."""
    from attn_sink_circuits.core.texts import read_texts

    if not isinstance(config, EmergenceConfig | None):
        raise ValueError(f"config is a {type(config).__name__}; give an EmergenceConfig (or None)")
    specs = [model] if isinstance(model, str | Path) else list(model or [])
    if not specs:
        raise ValueError("give the checkpoints: a training run's folder, a spec or a list of them")
    texts = read_texts(data) if isinstance(data, str | Path) else data
    return emergence(specs, texts, config or EmergenceConfig(), corpus=corpus, device=device,
                     cache=cache, progress=progress)  # fmt: skip


def _measure(spec, texts, config, with_edges: bool, device: str) -> dict:
    model = load_checkpoint(spec, device=device)
    tokens, edges = _tokens(model, texts, config, trained_with_bos(spec))
    return measure_checkpoint(model, tokens, edges if with_edges else None, config)


def _cache_path(cache, spec: CheckpointSpec, config, texts, with_edges: bool) -> Path | None:
    """Where a checkpoint's row is cached: a hash of what determines it."""
    if cache is None:
        return None
    weights = Path(spec.spec) / "model.safetensors"
    doc = {
        "spec": spec.spec,
        "step": spec.step,
        "weights": _sha256(weights.read_bytes()) if weights.is_file() else None,
        "config": config.to_dict(),
        "edges": with_edges,
        "texts": _sha256(json.dumps(list(texts)).encode()),
    }
    Path(cache).mkdir(parents=True, exist_ok=True)
    return Path(cache) / f"{_sha256(json.dumps(doc, sort_keys=True).encode())[:24]}.json"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _progress(i: int, n: int, spec: CheckpointSpec, row: dict) -> None:
    edges = (
        f", edge circuit {row['edges']} edges f={row['heldout_faithfulness']:.2f}"
        if "edges" in row
        else ""
    )
    print(
        f"[emergence] {i + 1}/{n} {run_name(spec) or spec.label} step {spec.step}: "
        f"{row['phase']}, P0 mass {row['p0_mass']:.2f}, sink at {row['sink_position']}, "
        f"massive after block {row['massive_layer']}{edges} "
        f"({sum(row['seconds'].values()):.1f} s)",
        file=sys.stderr,
        flush=True,
    )
