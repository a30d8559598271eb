"""A saved IOI circuit judged under another corrupted partner: is the circuit a run found on its
partner's pairs (RUN/circuit.json.gz, the size rule's) a circuit of the task, or of the partner?

Each run's held-out pairs are made again from its record (`ioi.saved_run_pairs`: refused unless
they hash as the run recorded), then with `--partner`'s corrupted prompts instead (the same
clean prompts, answers and split: refused otherwise). The circuit is judged on both
(`discovery.saved.judge_saved` with the run's random circuits, bootstrap resamples and seed):
on its own partner's pairs its faithfulness must come out as the run's (within
`F_TOLERANCE`), on the other partner's it is what the circuit keeps when everything outside it
carries that partner's values. Under `s2_io_flip` the partner differs from the clean prompt at
one name and after it, so an edge outside the circuit changes nothing before it; under `abc`
nearly every position differs. Written to RUN/under_<partner>.json (provenance: this command,
the model, the other partner's pairs; the run judged under "rejudged").

    .venv/bin/python scripts/mib_cross_partner.py \\
        docs/mib/runs/smollm2-135m-s2_io_flip-eap_ig_inputs-100 --partner abc
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

F_TOLERANCE = 2e-3
"""How far the circuit's re-judged faithfulness on its own pairs may lie from the run's."""


def judged(model, summary: dict, graph, pairs) -> dict:
    """`judge_saved` of the circuit `graph` on `pairs` with the run's judging settings."""
    from attn_sink_circuits.discovery.saved import judge_saved

    s = summary["provenance"]["settings"]
    return judge_saved(model, graph, pairs, n_random=s["n_random"], n_boot=s["n_boot"],
                       seed=s["seed"], batch_size=s["batch_size"])  # fmt: skip


def cross_partner(model, summary: dict, graph, partner: str) -> tuple[dict, list]:
    """(the circuit judged on the run's held-out pairs with its own partner and with `partner`,
    the rows of the latter); refused when the own-partner faithfulness is not the run's."""
    from attn_sink_circuits.studies.ioi.prompts import saved_run_pairs

    own = judged(model, summary, graph, saved_run_pairs(model, summary)[1])
    if abs(own["faithfulness"] - summary["heldout_faithfulness"]) > F_TOLERANCE:
        raise SystemExit(
            f"the circuit re-judged on the run's own held-out pairs keeps "
            f"{own['faithfulness']:.4f}, the run recorded {summary['heldout_faithfulness']:.4f}: "
            "it is not the run's circuit or not judged as the run judged it"
        )
    held = saved_run_pairs(model, summary, partner)[1]
    return {summary["partner"]: own, partner: judged(model, summary, graph, held)}, held.rows()


def main() -> None:
    from attn_sink_circuits.cli.pairs import PARTNERS

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", help="folders scripts/mib_ioi.py wrote, with circuit.json")
    p.add_argument("--partner", required=True, choices=PARTNERS, help="the other partner")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()

    import torch

    from attn_sink_circuits.discovery.protocol import read_run
    from attn_sink_circuits.graph.io import read
    from attn_sink_circuits.models import load_model
    from attn_sink_circuits.runs.io import atomic_write, stored
    from attn_sink_circuits.runs.owned import add_to_run
    from attn_sink_circuits.runs.provenance import code_identity, provenance, stamped

    code_identity()  # the code's state now, before any commit made while this runs
    torch.set_num_threads(args.threads)
    try:
        summaries = {run: read_run(run) for run in map(Path, args.runs)}
    except ValueError as err:
        raise SystemExit(str(err)) from None
    for run, summary in summaries.items():
        if summary.get("partner") == args.partner:
            raise SystemExit(f"{run} was found on {args.partner} pairs already: give the other")
        circuit = stored(run / "circuit.json")
        if not circuit.is_file():
            raise SystemExit(f"{run}: no circuit.json(.gz): the run's circuit was not kept")
        model = load_model(summary["model"])
        out, rows = cross_partner(model, summary, read(circuit), args.partner)
        digest = hashlib.sha256(circuit.read_bytes()).hexdigest()
        settings = {"run": str(run), "circuit": str(circuit), "circuit_sha256": digest,
                    "partner": args.partner}  # fmt: skip
        record = provenance(model, rows, settings=settings)
        record["rejudged"] = {"folder": str(run), "original": summary["provenance"]}
        name = f"under_{args.partner}.json"
        with atomic_write(run / name, "w") as fh:
            fh.write(json.dumps(stamped(out, record), indent=1) + "\n")
        add_to_run(run, run / name)  # the run's next replacement takes it too
        print(f"{run.name} -> {name}: " + ", ".join(
            f"{k} f {v['faithfulness']:.3f} {[round(x, 3) for x in v['faithfulness_ci']]} "
            f"random {v['random_faithfulness']:.3f}" for k, v in out.items()))  # fmt: skip


if __name__ == "__main__":
    main()
