"""Tracing: each paper's experiment as a pipeline of models -> sinks -> patching -> graph.

    config.py       Config / option: frozen, validated settings with help strings (CLI-ready)
    result.py       Result / CircuitResult: the protocol every study's result follows
                    (summary, save, figures; graph, draw, judge); TraceResult, the traces' base;
                    FoundCircuit (draw, judge); the studies' save path
    edge_config.py  EdgeFitConfig: the edge circuit's settings, a field of every tracer config
    edge_fit.py     fit_edges: the one split -> discover -> judge (also by kind) -> graph step
    figures.py, edge_text.py   what every tracer draws / says about its edge circuit
    p0/             the P0-sink circuit (Peng et al. 2026): one module per step, pipeline.trace_p0
    secondary/      secondary sinks (Wong et al. 2025): one module per step, trace_secondary

How a pipeline runs its steps (timing, progress, checkpoints, resume) is `attn_sink_circuits.runs.steps`,
below every module that runs steps (discovery's saved-graph judging and MIB sizes too).
The studies, each a package: `p0/`, `secondary/`, `ioi/` (MIB's protocol), `kv/`, `trigger/`,
`claims/`, `emergence/`, `known_answers/`. Each owns its figures and exposes
`run(model, data, config) -> Result`. `protocols/` runs the papers' own sink protocols
(Gu et al., Sun et al.) into docs/sinks/. The engine (`core`, `models`, `sinks`, `patching`,
`discovery`, `graph`, `report`, `training`) sits below the studies and never imports one; the
run machinery is `attn_sink_circuits.runs`.
A study measures, summarises and draws its figures without `attn_sink_circuits.report`; only
writing a result and drawing its circuit go through it: in `result.py` (`TraceResult.save` is
`report.write_trace`, `FoundCircuit.draw` is `report.draw_circuit`, `save_figures`) and lazily
inside a result's own `save` method (tests/test_structure.py checks it).
"""
