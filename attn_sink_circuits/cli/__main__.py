"""`python -m attn_sink_circuits.cli`: the `circuits` command."""

import sys

from attn_sink_circuits.cli.app import main

sys.exit(main())
