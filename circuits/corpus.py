"""Moved to `circuits.core.traces` (problems and traces, read back), `circuits.generation`
(`write_traces`) and `circuits.decoding` (`prompt_ids`, `plain_hf_model`). Transitional: this
name stays until claims/controls.py imports the new homes; then it goes."""

from circuits.core.traces import Trace, read_traces

__all__ = ["Trace", "read_traces"]
