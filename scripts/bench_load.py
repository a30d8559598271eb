"""Cold and warm load time and peak memory of each installed offline model.

Each measurement runs in a fresh subprocess (peak RSS is per process). "cold" loads into an empty
temporary cache (verify + assemble + dequantise + write); "warm" loads the same entry again.

    python scripts/bench_load.py [KEY ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

from attn_sink_circuits.models.gguf import weights_installed
from attn_sink_circuits.models.registry import MODELS

CHILD = """
import json, resource, time, torch
from attn_sink_circuits.models import load_model, model_info
t = time.perf_counter()
m = load_model({key!r})
with torch.no_grad():
    m(m.to_tokens("The capital of France is"))
print(json.dumps({{"seconds": time.perf_counter() - t, "from_cache": model_info(m).from_cache,
    "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}}))
"""


def run(key: str, cache: str) -> dict:
    env = {**os.environ, "CIRCUITS_CACHE": cache}
    out = subprocess.run(
        [sys.executable, "-c", CHILD.format(key=key)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "keys", nargs="*", default=[k for k, s in MODELS.items() if weights_installed(s)]
    )
    args = parser.parse_args()
    print(
        f"{'model':<14} {'cold s':>8} {'cold GB':>8} {'warm s':>8} {'warm GB':>8}  (load + one forward)"
    )
    for key in args.keys:
        with tempfile.TemporaryDirectory(prefix="circuits-bench-") as cache:
            cold = run(key, cache)
            warm = run(key, cache)
        assert not cold["from_cache"] and warm["from_cache"]
        print(
            f"{key:<14} {cold['seconds']:>8.1f} {cold['peak_rss_gb']:>8.2f} "
            f"{warm['seconds']:>8.1f} {warm['peak_rss_gb']:>8.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
