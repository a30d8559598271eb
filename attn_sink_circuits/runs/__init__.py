"""The run machinery below every study: atomic output folders and strict JSON (`io`), each
run's provenance (`provenance`), the audit of a run's folder (`audit`), resumable steps with one
keyed checkpoint (`steps`)."""
