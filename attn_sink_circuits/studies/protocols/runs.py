"""The papers' protocols on every offline model: Gu et al.'s sink rate and Sun et al.'s massive
activations, one run folder per model under docs/sinks/, and the tables in docs/sinks/README.md.

Per model, one forward pass per text (`attn_sink_circuits.studies.protocols.texts`) gives Gu et
al.'s alpha at P0 per head and text and Sink^eps at eps 0.3 and 0.8, and Sun et al.'s per-layer
largest |entries| of the block outputs against their median (`attn_sink_circuits.sinks.papers`).
A model whose folder already holds a run of this protocol is not measured again (resumable;
`--force` does).

    OMP_NUM_THREADS=1 python -m attn_sink_circuits.studies.protocols [--models KEY ...] [--force]
        [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from attn_sink_circuits.sinks.protocols import EPSILONS, eps_tag, run_protocols
from attn_sink_circuits.studies.claims.verdict import mean_interval
from attn_sink_circuits.studies.protocols.tables import MODELS, OUT, update_readme
from attn_sink_circuits.studies.protocols.texts import Selection, first_tokens, select_texts


def figure(layers, title: str):
    """Left: Sun et al.'s plot (top 1-3 |entries| and the median per layer, log scale);
    right: the share of heads with alpha > eps per layer (per text, then averaged)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 3), layout="constrained")
    left, right = fig.subplots(1, 2)
    x = layers["sun_layer"]
    for column in ("top1_abs", "top2_abs", "top3_abs", "median_abs"):
        left.plot(x, layers[column], marker="o", markersize=3, label=column.split("_")[0])
    left.set(yscale="log", xlabel="layer (Sun et al.'s count: block + 1)", ylabel="|entry|")
    left.legend(fontsize=7)
    for eps in EPSILONS:
        right.plot(x, layers[f"{eps_tag(eps)}_share"], marker="o", markersize=3,
                   label=f"alpha > {eps:g}")  # fmt: skip
    right.set(ylim=(-0.02, 1.02), xlabel="layer (block + 1)", ylabel="share of heads")
    right.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    return fig


def model_record(model, key: str) -> dict:
    """What was loaded: the loader's ModelInfo and, for a registry model, its GGUF."""
    from attn_sink_circuits.core.identity import model_info
    from attn_sink_circuits.models.registry import MODELS as REGISTRY

    record = model_info(model).to_dict()
    spec = REGISTRY.get(key)
    record["gguf_name"] = spec.gguf_name if spec else None
    return record


def summarise(key: str, run, selection: Selection) -> dict:
    """The run's headline numbers (summary.json's "summary")."""
    report = run.report
    german = [lang == "german" for lang in selection.language]
    return {
        "model": key,
        "n_texts": len(report.texts),
        "n_tokens": report.texts[0].n_tokens,
        "n_layers": report.n_layers,
        "n_heads": report.n_heads,
        "n_heads_total": report.n_layers * report.n_heads,
        "position0": run.position0,
        "seconds": round(run.seconds, 1),
        **run.sink_summary({"english": [not g for g in german], "german": german}),
        **{
            f"{eps_tag(e)}_ci": list(mean_interval(run.per_text_rates(e).tolist())[1:])
            for e in EPSILONS
        },
        **run.sun_summary(run.layers_frame()),
    }


def save(
    folder: Path, key: str, run, selection: Selection, model, started: float, rounding=None
) -> dict:
    """The run folder of a `ProtocolRun`, atomically: summary.json (with its provenance),
    layers.csv, heads.csv and protocols.png; the marker carries the same provenance."""
    from attn_sink_circuits.report.draw import save_figure
    from attn_sink_circuits.runs.io import atomic_folder, write_csv, write_json
    from attn_sink_circuits.runs.provenance import provenance, stamped

    summary = summarise(key, run, selection)
    if rounding is not None:  # a rounded copy: its model and the rounding, named apart
        summary |= {"model": key.removesuffix(f"-{rounding}"), "rounding": rounding}
    kinds = [w.split(":")[1] for w in selection.where]
    settings = {
        "n_tokens": summary["n_tokens"],
        "sink_position": 0,
        **run.report.settings.to_dict(),
    }
    record = provenance(model, selection.texts, kinds, None, settings, started=started,
                        source=" + ".join(selection.files))  # fmt: skip
    doc = {"summary": summary, "protocol": selection.record(), "model": model_record(model, key)}
    layers = run.layers_frame()
    title = f"{key}: {summary['n_texts']} texts x T = {summary['n_tokens']}"
    with atomic_folder(folder, {"measured": "paper_protocols", "model": key}, record) as tmp:
        write_json(tmp / "summary.json", stamped(doc, record))
        write_csv(tmp / "layers.csv", layers)
        write_csv(tmp / "heads.csv", run.heads_frame())
        save_figure(figure(layers, title), tmp / "protocols.png", dpi=80)
    return summary


def done(folder: Path, selection: Selection) -> bool:
    """Whether `folder` holds a run of this protocol on these texts (written by `save`)."""
    from attn_sink_circuits.runs.io import read_marker

    path = folder / "summary.json"
    if read_marker(folder) is None or not path.is_file():
        return False
    return json.loads(path.read_text(encoding="utf-8")).get("protocol") == selection.record()


def load(key: str):
    """A registry model, or `tiny` (attn_sink_circuits.models.tiny, for tests); None if not installed."""
    if key == "tiny":
        from attn_sink_circuits.models.tiny import tiny_model

        return tiny_model()
    from attn_sink_circuits.models import load_model
    from attn_sink_circuits.models.gguf import weights_installed
    from attn_sink_circuits.models.registry import get_spec

    return load_model(key) if weights_installed(get_spec(key)) else None


def run_model(key: str, selection: Selection, out: Path = OUT, force: bool = False) -> str:
    """Measure one model into `out/key` unless done; one line saying what happened."""
    folder = out / key
    if not force and done(folder, selection):
        return f"{key}: kept {folder} (same protocol and texts; --force measures again)"
    started = time.time()
    model = load(key)
    if model is None:
        return f"{key}: weights not installed; not measured"
    run = run_protocols(model, first_tokens(model, selection.texts))
    s = save(folder, key, run, selection, model, started)
    return (
        f"{key}: Sink^0.3 {s['sink03']:.1%}, Sink^0.8 {s['sink08']:.1%}; massive from block "
        f"{s['massive_layer']} (max |entry| / median {s['max_ratio']:.0f}); {s['seconds']} s"
    )


ROUNDED = OUT / "rounding"
"""Run folders of the protocol on rounded copies of a model: `<key>-<type>/`, `table.md`."""


def rounded_copy(key: str, kind: str) -> Path:
    """The loader's fp32 folder of registry model `key` rounded to `kind` (every matrix; the
    classes the file keeps at 8 bits or wider stay so: `attn_sink_circuits.models.rounding.file_plan`),
    written once into the cache (`<cache>/rounded/<key>-<kind>`)."""
    from attn_sink_circuits.models.rounding import cached_rounding

    return cached_rounding(key, kind)


def run_rounded(key: str, kinds: list[str], selection: Selection) -> list[dict]:
    """The protocol on `key` as loaded and on each rounded copy, each a run folder under
    `ROUNDED`; one row a model for `rounding_table`."""
    from attn_sink_circuits.models import load_model

    rows = []
    for kind in ["as loaded", *kinds]:
        name = key if kind == "as loaded" else f"{key}-{kind}"
        folder = ROUNDED / name.replace(" ", "-")
        started = time.time()
        model = load_model(key if kind == "as loaded" else rounded_copy(key, kind))
        run = run_protocols(model, first_tokens(model, selection.texts))
        s = save(folder, name, run, selection, model, started, rounding=kind)
        rows.append(s)
        print(f"{name}: Sink^0.3 {s['sink03']:.1%}; massive block {s['massive_layer']}", flush=True)
    return rows


def rounding_table(rows: list[dict]) -> str:
    """Markdown: per rounding, Gu's Sink^0.3 and ^0.8 (per text) with intervals, the P0 mass
    over later queries, Sun et al.'s first massive block and largest ratio."""
    lines = ["| model | weights | Sink^0.3 [95 %] | Sink^0.8 [95 %] | P0 mass | massive block | "
             "max \\|entry\\| / median |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        lo3, hi3 = r["sink03_ci"]
        lo8, hi8 = r["sink08_ci"]
        lines.append(
            f"| {r['model']} | {r['rounding']} | {r['sink03']:.3f} [{lo3:.3f}, {hi3:.3f}] | "
            f"{r['sink08']:.3f} [{lo8:.3f}, {hi8:.3f}] | {r['p0_mass_mean']:.3f} | "
            f"{r['massive_layer']} | {r['max_ratio']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m attn_sink_circuits.studies.protocols",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument("--models", nargs="+", default=list(MODELS), help="registry keys")
    parser.add_argument(
        "--rounded", nargs="+", choices=("q4_0", "q4_1", "q8_0"),
        help="instead: each model as loaded and rounded again to these GGUF types, into "
        "docs/sinks/rounding/ (a sensitivity to storage precision, not a bound)",
    )  # fmt: skip
    parser.add_argument("--force", action="store_true", help="measure models already done")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1)")
    args = parser.parse_args(argv)
    from attn_sink_circuits.threads import set_threads

    set_threads(args.threads)
    selection = select_texts()
    if args.rounded:
        for key in args.models:
            run_rounded(key, args.rounded, selection)
        rows = [json.loads(p.read_text(encoding="utf-8"))["summary"]
                for p in sorted(ROUNDED.glob("*/summary.json"))]  # fmt: skip
        (ROUNDED / "table.md").write_text(rounding_table(rows), encoding="utf-8")
        print(rounding_table(rows))
        return 0
    for key in args.models:
        print(run_model(key, selection, OUT, args.force), flush=True)
    print("README tables", "updated" if update_readme() else "not updated (no markers)")
    return 0
