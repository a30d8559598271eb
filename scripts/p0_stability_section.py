"""docs/p0/README.md's stability section: tables whose every number is a make_docs value mark
(`<!--v RUN KEY FORMAT-->`) on the seed-0 runs in docs/p0/<model>/ and on
docs/p0/stability/stability.json, so `scripts/make_docs.py --check` keeps them equal to the
runs. Written between START and END in the README (what lies outside is left as it is)."""

from __future__ import annotations

from pathlib import Path

START = "<!-- p0-stability:start (scripts/p0_stability.py analyse writes this part) -->"
END = "<!-- p0-stability:end -->"
STAB = "docs/p0/stability/stability.json"
KINDS = ("prose", "code", "german", "table")


def mark(run: str, key: str, fmt: str) -> str:
    return f"<!--v {run} {key} {fmt}-->?<!--/v-->"


def rules_rows(model: str, fig: dict) -> list[str]:
    """The default rule's circuit (the run's own) and the old rule's on the same curve."""
    run, s = f"docs/p0/{model}", model.replace(".", "_")
    ci = f"{mark(run, 'heldout_faithfulness_ci.0', '.2f')}-{mark(run, 'heldout_faithfulness_ci.1', '.2f')}"
    kinds = [mark(run, f"heldout_by_kind.{k}.faithfulness", ".2f") for k in KINDS]
    unseen = [mark(STAB, f"{s}.unseen.{k}.f", ".2f") if k in fig.get("unseen", {}) else "-"
              for k in KINDS]  # fmt: skip
    band = [model, "band_by_kind (default)", mark(run, "edge_circuit_edges", ",d"),
            f"{mark(run, 'heldout_faithfulness', '.2f')} ({ci})", *kinds, *unseen]  # fmt: skip
    old = fig.get("seed0", {})
    if old.get("target08_edges") is None:
        return ["| " + " | ".join(band) + " |"]
    t = f"{s}.seed0.target08_heldout"
    target = [model, "target (fit f >= 0.8)", mark(STAB, f"{s}.seed0.target08_edges", ",.0f"),
              mark(STAB, f"{t}_all", ".2f"), *(mark(STAB, f"{t}_{k}", ".2f") for k in KINDS),
              *(["not judged"] + ["-"] * 3)]  # fmt: skip
    return ["| " + " | ".join(row) + " |" for row in (band, target)]


def stability_row(model: str, fig: dict) -> str:
    s = model.replace(".", "_")

    def m(key: str, fmt: str) -> str:
        return mark(STAB, f"{s}.{key}", fmt)

    cells = [model, m("n_splits", "d")]
    if fig.get("edges_jaccard_mean") is not None:
        cells += [f"{m('edges_min', ',d')}-{m('edges_max', ',d')}",
                  f"{m('heldout_f_min', '.2f')}-{m('heldout_f_max', '.2f')}",
                  f"{m('edges_jaccard_mean', '.2f')} ({m('edges_jaccard_min', '.2f')}-"
                  f"{m('edges_jaccard_max', '.2f')})", m("nodes_jaccard_mean", ".2f"),
                  m("edges_in_every_split", ",d")]  # fmt: skip
        cells.append(f"{m('cross_f_mean', '.2f')} ({m('cross_f_min', '.2f')}-"
                     f"{m('cross_f_max', '.2f')}; {m('cross_pairs', 'd')} pairs)"
                     if fig.get("cross_f_mean") is not None else "-")  # fmt: skip
    else:
        cells += ["one split so far"] + ["-"] * 5
    if fig.get("zero"):
        cells.append(
            f"{m('zero.edges', ',d')} edges, f {m('zero.heldout_f', '.2f')}, Jaccard "
            f"{m('zero_jaccard_edges', '.2f')} (nodes {m('zero_jaccard_nodes', '.2f')})"
        )
    else:
        cells.append("not run yet")
    return "| " + " | ".join(cells) + " |"


def common_line(model: str, fig: dict) -> str:
    s = model.replace(".", "_")
    top = fig.get("common_top")
    if not top:
        return f"- **{model}**: fewer than two splits so far; nothing to intersect."
    edges = "; ".join(
        f"{mark(STAB, f'{s}.common_top.{i}.edge', 's')} "
        f"({mark(STAB, f'{s}.common_top.{i}.direct_mean', '+.3f')})"
        for i, e in enumerate(top) if e.get("direct_mean") is not None
    )  # fmt: skip
    return (f"- **{model}** ({mark(STAB, f'{s}.edges_in_every_split', ',d')} edges in all "
            f"{mark(STAB, f'{s}.n_splits', 'd')} splits), the strongest by exact direct "
            f"effect: {edges}.")  # fmt: skip


def section(figures: dict, models: list[str]) -> str:
    kinds = " | ".join(KINDS)
    lines = [
        START, "",
        "What each size rule keeps (seed 0 = `make demo`'s settings; held out: 16 texts, 4 a "
        "kind; left out: the 128 texts of the file its split did not use, 32 a kind):", "",
        f"| model | rule | edges | held-out f (95% CI) | {kinds} | left out: {kinds} |",
        "|" + "---|" * 12,
    ]  # fmt: skip
    for model in models:
        lines += rules_rows(model, figures.get(model.replace(".", "_"), {}))
    lines += [
        "", "Across splits (`--edge-seed` 0-4) and the zero ablation at seed 0:", "",
        "| model | splits | edges (min-max) | held-out f (min-max) | edge Jaccard mean (min-max) "
        "| node Jaccard mean | edges in every split | each circuit on the other splits' "
        "held-out texts: f mean (min-max) | zero ablation (seed 0) |",
        "|" + "---|" * 9,
    ]  # fmt: skip
    lines += [stability_row(m, figures.get(m.replace(".", "_"), {})) for m in models]
    lines += ["", "Edges in every split's circuit:", ""]
    lines += [common_line(m, figures.get(m.replace(".", "_"), {})) for m in models]
    return "\n".join(lines + ["", END])


def write_section(readme: Path, figures: dict, models: list[str]) -> str:
    """The README's text with the section replaced (or put after its first heading) and every
    mark filled in from the runs (`make_docs.render`)."""
    from make_docs import render

    text = readme.read_text(encoding="utf-8")
    new = section(figures, models)
    if START in text:
        before, rest = text.split(START, 1)
        text = before + new + rest.split(END, 1)[1]
    else:
        head, body = text.split("\n", 1)
        text = f"{head}\n\n{new}\n{body}"
    return render(text, str(readme))


__all__ = ["END", "START", "section", "write_section"]
