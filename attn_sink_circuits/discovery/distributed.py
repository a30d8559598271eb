"""Data-parallel discovery: the texts of a runner sharded over processes, their per-text values
gathered back in text order, so every process holds what one process alone would compute.

Start any discovery under `torchrun --nproc-per-node N` (e.g. `torchrun --nproc-per-node 2
$(which circuits) p0 ...`): the process group is joined on first use from torchrun's
environment (gloo on the CPU, NCCL when the model is on CUDA). Every process loads the model,
runs the clean pass of all texts (it is shared: mean ablation and resampling read every text)
and then scores or judges only its contiguous shard of the texts. `per_text` is the single
place where shards meet: EAP / EAP-IG scores (`attribution.chunked`) and the metric values
behind every faithfulness number (`evaluation.evaluate`) pass through it, so edge scores,
faithfulness, curves, random baselines and bootstrap intervals come out the same on every rank
(and as with one process, to float rounding). Everything else (circuit choice, exact path
patching, learned masks) runs whole on every rank. Only rank 0 writes files (`is_writer`).
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
from torch import Tensor

if TYPE_CHECKING:
    from attn_sink_circuits.discovery.forward import EdgeRunner


def world() -> tuple[int, int]:
    """(rank, world size): (0, 1) outside torchrun; joins the process group on first use."""
    size = int(os.environ.get("WORLD_SIZE", "1"))
    if size <= 1:
        return 0, 1
    if not dist.is_available():
        raise RuntimeError("WORLD_SIZE > 1 but this torch build has no torch.distributed")
    if not dist.is_initialized():
        if torch.cuda.is_available():
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
        atexit.register(leave)
    return dist.get_rank(), dist.get_world_size()


def leave() -> None:
    """Destroy the process group at exit (registered when `world` joins one): a gloo group left
    to the interpreter's teardown can abort its process ("terminate called without an active
    exception", SIGABRT) after every result is written, failing the torchrun job. Skipped after
    an uncaught exception: the other ranks may be waiting in a collective, and destroying an
    NCCL group then can hang; torchrun ends them once this rank exits non-zero."""
    failed = getattr(sys, "last_value", None) is not None
    if dist.is_available() and dist.is_initialized() and not failed:
        dist.destroy_process_group()


def is_writer() -> bool:
    """True on the one process that writes files (rank 0, or the only process)."""
    return world()[0] == 0


def shard_rows(n: int, rank: int, size: int) -> range:
    """Rank `rank`'s contiguous share of `n` texts (sizes differ by at most one)."""
    return range(n * rank // size, n * (rank + 1) // size)


def per_text(runner: EdgeRunner, fn: Callable[[EdgeRunner], Tensor], dim: int = 0) -> Tensor:
    """`fn(runner)` (values with one entry per text along `dim`) computed on this rank's shard
    of the texts and gathered from every rank in text order; `fn(runner)` when not
    distributed."""
    rank, size = world()
    if size == 1:
        return fn(runner)
    n = runner.tokens.shape[0]
    if n < size:
        raise ValueError(
            f"{n} texts cannot be shared by {size} processes; give at least {size} texts or "
            "run fewer processes (torchrun --nproc-per-node)"
        )
    local = fn(runner.subset(shard_rows(n, rank, size))).movedim(dim, 0).contiguous()
    return gather_rows(local, n).movedim(0, dim)


def gather_rows(local: Tensor, n: int) -> Tensor:
    """Every rank's rows of `local` [rows, ...] (rank order, `n` in all) on every rank. Shards
    differ in size by one, so each is padded to the largest before the all-gather."""
    rank, size = world()
    width = max(len(shard_rows(n, r, size)) for r in range(size))
    # NCCL moves CUDA tensors only; gloo, CPU ones.
    device = torch.device("cuda") if dist.get_backend() == "nccl" else torch.device("cpu")
    padded = local.new_zeros((width, *local.shape[1:]), device=device)
    padded[: local.shape[0]] = local.detach().to(device)
    parts = [torch.empty_like(padded) for _ in range(size)]
    dist.all_gather(parts, padded)
    rows = [part[: len(shard_rows(n, r, size))] for r, part in enumerate(parts)]
    return torch.cat(rows).to(local.device)


def writer_paths(*paths: Path) -> tuple[Path, ...]:
    """`paths` on the writing rank; on every other rank, copies in a scratch folder that is
    removed at exit, so that only rank 0 writes files. What already exists (checkpoints to
    resume from) is copied, so every rank resumes from the same finished steps."""
    rank, _ = world()
    if rank == 0:
        return paths
    scratch = Path(tempfile.mkdtemp(prefix=f"circuits-rank{rank}-"))
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    copies = []
    for i, path in enumerate(paths):
        copy = scratch / str(i) / path.name
        copy.parent.mkdir()
        if path.is_dir():
            shutil.copytree(path, copy)
        elif path.exists():
            shutil.copy2(path, copy)
        copies.append(copy)
    return tuple(copies)
