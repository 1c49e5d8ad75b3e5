# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install demo test test-serving lint reliability bench bench-quick report-screenshot readme-excerpts clean

install: $(STAMP)

# torch==2.13.0 first: it is a local CPU build; an unpinned torch would pull GBs of CUDA packages.
$(STAMP): setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

# The demo, then the README's quoted output checked against it (bench/readme_excerpts.py).
demo: install
	$(BIN)/madr demo --output runs/demo
	$(BIN)/python -m bench.readme_excerpts --check --run runs/demo

# The README's quoted output rewritten from the last `make demo`.
readme-excerpts:
	$(BIN)/python -m bench.readme_excerpts --run runs/demo

# Two worker processes, each test file in one of them (its module fixtures built once): 659 s against
# about 900 s in one process on 2 cores (29 Nov). `pytest tests` alone still runs them one by one.
test: install
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -n 2 --dist loadfile tests

# The `serving` extra (TensorFlow, pinned to what scann's TF ops were built for) in its own venv, so that
# `make test` never installs TensorFlow: the SavedModel export and `madr export-serving --saved_model`.
SERVING_VENV ?= .venv-serving
SERVING_STAMP := $(SERVING_VENV)/.installed
$(SERVING_STAMP): setup.py
	$(PYTHON) -m venv $(SERVING_VENV)
	$(SERVING_VENV)/bin/pip install --quiet --upgrade pip
	$(SERVING_VENV)/bin/pip install --quiet torch==2.13.0
	$(SERVING_VENV)/bin/pip install --quiet -e '.[test,serving]'
	touch $(SERVING_STAMP)

test-serving: $(SERVING_STAMP)
	$(SERVING_VENV)/bin/python -m pytest -q tests/test_serving.py \
		tests/test_index_partitioned.py -k "saved_model or tf_ or tensorflow or serve"

lint: install
	$(BIN)/ruff check .

# Corrupted model, planted pickle, stale output, bad input, kill -9, tampered index, shrunk catalog:
# a table of expected vs observed and records lost (docs/RELIABILITY.md). Also a test in `make test`.
reliability: install
	$(BIN)/python -m bench.reliability

# The benchmarks' peers and tools (faiss-cpu, sentence-transformers, py-spy): the "bench" extra.
BENCH_STAMP := $(VENV)/.bench-installed
$(BENCH_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e '.[test,bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(BIN)/python -m bench.run_all

bench-quick: $(BENCH_STAMP)
	$(BIN)/python -m bench.run_all --quick

# The README's picture of the morning report: the demo's page (after `make demo`) in headless Chromium.
report-screenshot:
	chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1000,1400 \
		--screenshot=docs/morning-report.png file://$(CURDIR)/runs/demo/report.html

clean:
	rm -rf runs build dist *.egg-info $(SERVING_VENV)
