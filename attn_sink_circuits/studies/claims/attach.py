"""A claims table as a section of another trace's report (the P0 and secondary reports): the
trace keeps everything it has and gains a `claims` table, the claim figures and a claims
paragraph, through the report protocol every trace already follows (`TraceResult`)."""

from __future__ import annotations

import pandas as pd

from attn_sink_circuits.studies.claims.figures import claim_figures
from attn_sink_circuits.studies.claims.table import ClaimsTable, claim_line
from attn_sink_circuits.studies.result import TraceResult


class WithClaims:
    """`trace` with `table` attached; every other attribute is the trace's own."""

    def __init__(self, trace, table: ClaimsTable, jump_layers=()) -> None:
        self._trace, self._table, self._jumps = trace, table, tuple(jump_layers)

    def __getattr__(self, name: str):
        return getattr(self._trace, name)

    def summary(self) -> dict:
        return {**self._trace.summary(), "claims": self._table.verdicts()}

    def tables(self) -> dict[str, pd.DataFrame]:
        return {**self._trace.tables(), "claims": self._table.frame()}

    def figures(self) -> dict:
        return {**self._trace.figures(), **claim_figures(self._table.tables, self.model,
                                                        self._jumps)}  # fmt: skip

    def save(self, folder, model=None):
        """The trace's run folder with the claims in it (`TraceResult.save` on this trace)."""
        return TraceResult.save(self, folder, model)

    def text(self) -> str:
        lines = "\n".join(f"- {claim_line(r)}" for r in self._table.rows)
        return f"{self._trace.text()}\n\n## The papers' claims, measured\n\n{lines}"


def with_claims(trace, table: ClaimsTable, jump_layers=()) -> WithClaims:
    """`trace` (any `TraceResult`) whose report also shows `table`."""
    return WithClaims(trace, table, jump_layers)


def p0_with_claims(model, trace) -> WithClaims:
    """A P0 trace with the P0 claims table beside it (`studies.claims.claims`, default
    settings, on the trace's fit texts): what `circuits p0 --claims` writes. Here, not in the
    P0 study, because the claims read the P0 study (its formation), never the other way."""
    from attn_sink_circuits.studies.claims.pipeline import claims

    measured = claims(model, trace.texts)
    return with_claims(trace, measured.table, measured.run["jump_layers"])


def secondary_with_claims(trace) -> WithClaims:
    """A secondary-sink trace with Wong et al.'s claims read from its tables (default
    settings) beside it: what `circuits secondary` writes. Here, not in the secondary study,
    because the claims read that study, never the other way."""
    from attn_sink_circuits.studies.claims.config import ClaimsConfig
    from attn_sink_circuits.studies.claims.secondary import secondary_claims

    return with_claims(trace, secondary_claims(trace.tables(), ClaimsConfig()))
