"""Tracing: each paper's experiment as a pipeline of models -> sinks -> patching -> graph -> report."""
