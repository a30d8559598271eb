#!/bin/bash
# The CUDA check (scripts/gpu_check.py) with its output kept: gpu_check.sh [ARGS...] writes
# gpu_check-<date>.log beside wherever it is run. Exits 2 at once without CUDA.
set -o pipefail
cd "$(dirname "$0")/.." || exit 2
log="gpu_check-$(date -u +%Y%m%dT%H%M%SZ).log"
.venv/bin/python scripts/gpu_check.py "$@" 2>&1 | tee "$log"
