"""Where named edges stand in saved IOI runs' rankings: each edge's score and its rank among
all edges by signed score (1 = the most supporting; the importance file's sign is MIB's:
positive supports) and by |score|, with the run's top edges by signed score, written to
RUN/edge_ranks.json with the hash of the importance file read. The importance files (9 MB and
more) are not committed; this keeps what the docs say about single edges (e.g. where a method
puts input -> m0, the edge every path from the changed token starts on) traceable.

    .venv/bin/python scripts/mib_edge_ranks.py docs/mib/runs/smollm2-135m-s2_io_flip-eap-100 \\
        --importances /tmp/mibruns --edges "input->m0"      # ROOT/<run name>/importances.mib.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path


def edge_ranks(saved: dict, edges: list[str], top: int) -> dict:
    """Score and ranks of each of `edges` among all of the importance file `saved`'s edges (ties
    share the best rank), and its `top` edges by signed score."""
    scores = {name: float(e["score"]) for name, e in saved["edges"].items()}
    missing = [e for e in edges if e not in scores]
    if missing:
        some = ", ".join(sorted(scores)[:3])
        raise SystemExit(f"no edge {', '.join(missing)} in the importance file (names look like "
                         f"{some}): spell them as MIB's graph does")  # fmt: skip
    values = sorted(scores.values(), reverse=True)
    sizes = sorted((abs(v) for v in values), reverse=True)

    def rank(sorted_desc: list[float], v: float) -> int:
        return next(i for i, x in enumerate(sorted_desc) if x <= v) + 1

    out = {"n_edges": len(scores), "edges": {}}
    for name in edges:
        v = scores[name]
        out["edges"][name] = {"score": v, "rank_signed": rank(values, v),
                              "rank_abs": rank(sizes, abs(v))}  # fmt: skip
    best = sorted(scores.items(), key=lambda kv: -kv[1])[:top]
    out["top_signed"] = [{"edge": n, "score": v} for n, v in best]
    return out


def read_importances(run: Path, root: str | None = None) -> tuple[dict, str, Path]:
    """(run's importance file, found as `submission.importance_file` finds it, its sha256, its
    path); refused unless it carries the sign mark `write_mib` puts in its files
    (`graph.eap_ig.SCORE_CONVENTION`: positive supports)."""
    from attn_sink_circuits.discovery.submission import importance_file
    from attn_sink_circuits.graph.eap_ig import SCORE_CONVENTION

    try:
        path = importance_file(run, root)
    except FileNotFoundError as err:
        raise SystemExit(f"{err}; give --importances ROOT") from None
    raw = path.read_bytes()
    try:
        saved = json.loads(raw)
    except ValueError as err:
        raise SystemExit(f"{path}: not JSON ({err}); give the file a run wrote") from None
    if not isinstance(saved, dict) or not isinstance(saved.get("edges"), dict):
        raise SystemExit(f"{path}: no 'edges' table; not an importance file write_mib wrote")
    convention = saved.get("cfg", {}).get("score_convention")
    if convention != SCORE_CONVENTION:
        raise SystemExit(f"{path}: score_convention {convention!r}, not {SCORE_CONVENTION!r}: "
                         "a file written before the sign mark; its signs cannot be read here")  # fmt: skip
    return saved, hashlib.sha256(raw).hexdigest(), path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", help="folders scripts/mib_ioi.py wrote")
    p.add_argument("--importances", help="ROOT holding <run name>/importances.mib.json")
    p.add_argument("--edges", nargs="+", default=["input->m0"], help="MIB edge names")
    p.add_argument("--top", type=int, default=10, help="top edges by signed score to list")
    args = p.parse_args()
    if args.top < 0:
        p.error(f"--top must be 0 or more, got {args.top}")

    from attn_sink_circuits.discovery.protocol import read_run
    from attn_sink_circuits.runs.io import atomic_write
    from attn_sink_circuits.runs.provenance import code_identity, provenance, stamped

    code_identity()
    for run in map(Path, args.runs):
        try:
            summary = read_run(run)
        except ValueError as err:
            raise SystemExit(str(err)) from None
        saved, sha, path = read_importances(run, args.importances)
        out = {"importances_sha256": sha, **edge_ranks(saved, args.edges, args.top)}
        record = provenance(settings={"run": str(run), "importances": str(path.parent),
                                      "edges": args.edges, "top": args.top})  # fmt: skip
        record["of_run"] = {"folder": str(run), "original": summary["provenance"]}
        with atomic_write(run / "edge_ranks.json", "w") as fh:
            fh.write(json.dumps(stamped(out, record), indent=1) + "\n")
        print(f"{run.name}: " + "; ".join(
            f"{n} {e['score']:+.3f} rank {e['rank_signed']:,} of {out['n_edges']:,}"
            for n, e in out["edges"].items()))  # fmt: skip


if __name__ == "__main__":
    main()
