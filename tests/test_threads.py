"""Threads: from the environment when it says, else from the cores not already busy."""

from __future__ import annotations

import os

import pytest
import torch

from attn_sink_circuits import threads


def test_the_environment_fixes_the_thread_count(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert threads.default_threads() == 3


def test_busy_cores_are_left_alone(monkeypatch):
    for name in threads.THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setattr(os, "getloadavg", lambda: (2.6, 0.0, 0.0))
    assert threads.free_cores() == 1  # 4 allowed, ~3 busy
    monkeypatch.setattr(os, "getloadavg", lambda: (9.0, 0.0, 0.0))
    assert threads.default_threads() == 1  # never below one
    monkeypatch.setattr(os, "getloadavg", lambda: (0.2, 0.0, 0.0))
    assert threads.default_threads() == 4


def test_set_threads_sets_torch_and_refuses_zero():
    before = torch.get_num_threads()
    try:
        assert threads.set_threads(1) == 1 and torch.get_num_threads() == 1
        with pytest.raises(ValueError, match="threads must be >= 1"):
            threads.set_threads(0)
    finally:
        torch.set_num_threads(before)
