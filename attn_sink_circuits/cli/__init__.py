"""The `circuits` command line: one module per command, built on one flag vocabulary.

- `app`: the program (parser from the command modules, the checks that need no model, errors
  and interrupts as one line), `main` and `build_parser`;
- `parser`: argparse's parser with renamed flags (hidden aliases with a note), "did you mean"
  and a description on every command; `renames`: the renamed flags (CHANGELOG.md lists them);
- `options`: the flag vocabulary (numbers, --model / --device / --dtype / --threads, --out,
  --texts, one option per config field); `checks`: refusals before torch is imported;
  `loading`: the one place a command loads its model; `output`: what commands print;
- one module per command: `models`, `export`, `generate`, `p0`, `faithfulness` (on texts or
  on pairs), `sinks`, `trigger`, `secondary`, `claims`, `train_lm`, `emergence`, `discover`,
  `kv`;
  `pairs`: the pair files and tasks that `discover` and `faithfulness` share.

Adding a command is one module with two functions, listed in `app.COMMANDS`:

    def run(args) -> int:                             # its work: checks, then library calls
        out = check_out(args.out)                     # refusals before torch is imported
        config = config_from(args, FaithfulnessConfig)   # checked before the model loads
        model = loading.load(args)
        ...
        return 0

    def add(sub) -> None:                             # its arguments
        p = command(sub, "name", "one-line summary", "what --help says beyond it")
        model_options(p)                              # --model, --device, --dtype, --threads
        out_option(p, "folder for the tables")        # --out, checked before any work
        config_options(p, FaithfulnessConfig)         # one option per config field, with help
        p.set_defaults(func=run)

A renamed flag gets a row in `renames.RENAMED` (and CHANGELOG.md): its old spelling keeps
working, hidden from --help, and prints one note naming the new one. Building the parser
imports no model code, so `circuits --help` and every command's `--help` answer at once. Errors
from user input (a ValueError or OSError whose message says what to fix) print as one line and
exit with status 2; Ctrl-C and SIGTERM print one line and exit with 130, and outputs are written
to a temp folder renamed into place at the end, so an interrupted run leaves no half-written
folder.
"""

from attn_sink_circuits.cli.app import build_parser, main

__all__ = ["build_parser", "main"]
