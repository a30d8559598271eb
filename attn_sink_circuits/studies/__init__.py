"""Tracing: each paper's experiment as a pipeline of models -> sinks -> patching -> graph.

    config.py       Config / option: frozen, validated settings with help strings (CLI-ready)
    result.py       TraceResult: the protocol every trace follows (summary, tables, graph,
                    figures, text)
    edge_config.py  EdgeFitConfig: the edge circuit's settings, a field of every tracer config
    edge_fit.py     fit_edges: the one split -> discover -> judge (also by kind) -> graph step
    figures.py, edge_text.py   what every tracer draws / says about its edge circuit
    p0/             the P0-sink circuit (Peng et al. 2026): one module per step, pipeline.trace_p0
    secondary/      secondary sinks (Wong et al. 2025): one module per step, trace_secondary

How a pipeline runs its steps (timing, progress, checkpoints, resume) is `attn_sink_circuits.runs.steps`,
below every module that runs steps (discovery's saved-graph judging and MIB sizes too).
Tracing never imports `attn_sink_circuits.report`: `attn_sink_circuits.report.write_trace(trace, folder)` writes any
trace, and the CLI composes the two.
The studies, each a package: `p0/`, `secondary/`, `ioi/` (MIB's protocol), `kv/`, `trigger/`,
`claims/`, `emergence/` (and `known_answers/` where present). Each owns its figures. The
engine (`core`, `models`, `sinks`, `patching`, `discovery`, `graph`, `report`, `training`) sits
below the studies and never imports one; the run machinery is `attn_sink_circuits.runs`.
"""
