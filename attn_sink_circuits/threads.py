"""How many CPU threads torch uses: by default the cores this process may run on that are not
already busy, so that two jobs on a shared machine do not oversubscribe it (an edge step ran
13x slower for 4x less CPU when every job took every core)."""

from __future__ import annotations

import os
import sys

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
"""Environment variables that, when set, fix the thread count (e.g. a job scheduler's)."""


def free_cores() -> int:
    """Cores this process may use (`os.sched_getaffinity`) minus the 1-minute load average of
    the others, at least 1."""
    try:
        allowed = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        allowed = os.cpu_count() or 1
    try:
        busy = os.getloadavg()[0]
    except OSError:
        busy = 0.0
    return max(1, min(allowed, round(allowed - busy)))


def default_threads() -> int:
    """The thread count when none is given: the first of `THREAD_VARIABLES` that is set, else
    `free_cores()`."""
    for name in THREAD_VARIABLES:
        value = os.environ.get(name, "").strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    return free_cores()


def set_threads(n: int | None = None) -> int:
    """Set torch's intra-op threads to `n` (default `default_threads()`); returns the count.
    Before torch is imported this sets `THREAD_VARIABLES`, which torch reads when it loads (at
    most the machine's cores), so a command still refuses bad arguments without loading torch."""
    n = default_threads() if n is None else n
    if n < 1:
        raise ValueError(f"threads must be >= 1, got {n}")
    if "torch" not in sys.modules:
        os.environ.update(dict.fromkeys(THREAD_VARIABLES, str(n)))
        return n
    import torch

    torch.set_num_threads(n)
    return n


__all__ = ["default_threads", "free_cores", "set_threads"]
