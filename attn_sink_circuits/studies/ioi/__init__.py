"""Standard behaviours to find circuits for, beyond sinks: each task module generates its
prompts with counterfactual partners (`attn_sink_circuits.discovery.pairs.Pairs`)."""

TASKS = ("ioi",)
"""Task names the CLI accepts (`circuits discover --task`)."""

__all__ = ["TASKS"]
