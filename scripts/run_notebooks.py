"""Execute every notebook in notebooks/ top to bottom and save it in place with its outputs, so
that GitHub and a fresh checkout show the results (`make notebooks`).

Each notebook runs in a scratch folder (files it writes do not land in the repository) with the
kernel of this Python (`.venv`). A failing notebook is reported and left as it was; the exit
status is 1 when any failed. `--only NAME` runs the notebooks whose file name contains NAME.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def _noise(out) -> bool:
    # Progress bars and tqdm's "IProgress not found" warning (it names this machine's paths).
    if out.get("output_type") != "stream" or out.get("name") != "stderr":
        return False
    text = out.get("text", "")
    return not text.strip() or text.startswith("\r") or "TqdmWarning" in text


def run(path: Path, timeout: int) -> None:
    nb = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory(prefix="nb-") as scratch:
        NotebookClient(
            nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": scratch}}
        ).execute()
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [out for out in cell.outputs if not _noise(out)]
    nbformat.write(nb, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="run only notebooks whose name contains this")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per cell (1800)")
    args = parser.parse_args(argv)
    paths = [p for p in sorted(NOTEBOOKS.glob("*.ipynb")) if args.only in p.name]
    if not paths:
        print(f"no notebook in {NOTEBOOKS} matches {args.only!r}", file=sys.stderr)
        return 1
    failed = []
    for path in paths:
        start = time.perf_counter()
        try:
            run(path, args.timeout)
        except CellExecutionError as err:
            failed.append(path.name)
            print(f"FAILED {path.name}: {str(err).splitlines()[-1][:300]}", file=sys.stderr)
            continue
        size = path.stat().st_size / 1e6
        print(f"ran {path.name} in {time.perf_counter() - start:.0f} s ({size:.1f} MB)")
    if failed:
        print(f"{len(failed)} notebook(s) failed (left unchanged): {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
