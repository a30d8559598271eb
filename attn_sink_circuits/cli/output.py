"""What the commands print: a summary dict one line a key, numbers rounded for a terminal; a bar
over the steps that write a command's files."""

from __future__ import annotations


def short(value, depth: int = 0) -> str:
    """A value as a reader wants it on a terminal: numbers to 4 significant digits, short lists
    inline, a dict of dicts by its keys only (the whole of it is in summary.json)."""
    from attn_sink_circuits._repr import number

    if isinstance(value, float):
        return number(value, ",.0f" if 1e4 <= abs(value) < 1e12 else ".4g")
    if isinstance(value, list | tuple):
        shown = ", ".join(short(v, depth + 1) for v in value[:6])
        return f"[{shown}{', ...' if len(value) > 6 else ''}]"
    if isinstance(value, dict):
        if depth or any(isinstance(v, dict) for v in value.values()):
            return f"{', '.join(map(str, value))} (see summary.json)"
        return "; ".join(f"{k}: {short(v, depth + 1)}" for k, v in value.items())
    return str(value)


def print_summary(summary: dict) -> None:
    """One line a key, values by `short`."""
    width = max(map(len, summary), default=0) + 1
    for key, value in summary.items():
        print(f"{key:<{width}} {short(value)}")


def writing(n_steps: int):
    """A bar on stderr over the `n_steps` steps that write a command's files (`Steps`: each
    named as it runs, closed before an interrupt's message)."""
    from attn_sink_circuits.runs.steps import Steps

    return Steps(n_steps, "writing", True)


__all__ = ["print_summary", "short", "writing"]
