"""`python -m attn_sink_circuits.studies.protocols`: `runs.main`."""

from attn_sink_circuits.studies.protocols.runs import main

raise SystemExit(main())
