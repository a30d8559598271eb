"""`python -m circuits.cli`: the `circuits` command."""

import sys

from circuits.cli.app import main

sys.exit(main())
