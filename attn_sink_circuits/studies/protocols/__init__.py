"""The papers' protocols on the offline models: Gu et al.'s sink rate and Sun et al.'s massive
activations as their authors count them (`attn_sink_circuits.sinks.protocols`), one run folder
per model under docs/sinks/ and the tables of docs/sinks/README.md.

    texts.py    the 100 texts measured (78 English, 22 German) and their first 64 tokens
    runs.py     a model's run folder (resumable), rounded copies of a model, `main`
    tables.py   the README's tables, every number a value mark on its run folder

    OMP_NUM_THREADS=1 python -m attn_sink_circuits.studies.protocols [--models KEY ...] [--force]
"""
