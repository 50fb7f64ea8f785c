# Everything a fresh machine needs: `make demo` and `make test` create .venv and install first.
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_OUT ?= demo-out

.PHONY: setup demo test lint docs tutorials bench device-check reproduce clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q -e ".[dev]"
	touch $(STAMP)

setup: $(STAMP)

# 4 Dask workers on an embedded LocalCluster behind a 100 Mbit link model (--link paces every transfer, so
# bytes cost time as on a real network): PS against ring, fp32 against 8-bit codes, full data against
# ADASS with its two controls. The codec kernels are compiled (or loaded from numba's cache) before
# anything is timed; two lines under the table say what each choice saved.
demo: $(STAMP)
	$(BIN)/adass compare --workers 4 --data mnist5k --model mlp:hidden=128 --epochs 6 --batch-size 256 \
		--lr 0.1 --link 100mbit,50us --samplers adass --exchanges ps ring --codecs fp32 qsgd:bits=8 \
		--seeds 1 --out $(DEMO_OUT) --overwrite

# two pytest workers, a test file to each at a time (its module fixtures built once): most tests wait on
# Dask clusters, subprocesses and browsers, so two share two cores well; TEST_JOBS=1 runs them one by one
TEST_JOBS ?= 2
test: $(STAMP)
	$(BIN)/python -m pytest -q $(if $(filter 1,$(TEST_JOBS)),,-n $(TEST_JOBS) --dist loadfile)

lint: $(STAMP)
	$(BIN)/ruff check toolkit tests dashboards
	$(BIN)/ruff format --check toolkit tests dashboards

# the documentation site under docs/_build/html (Sphinx, PyData theme, MyST-NB). The tutorials run while
# the site builds (about 7 minutes on two cores the first time, cached under docs/_build after that);
# EXECUTE=force runs them again, EXECUTE=off shows the outputs they are stored with
EXECUTE ?= cache
docs: $(STAMP)
	ADASS_DOCS_EXECUTE=$(EXECUTE) $(BIN)/sphinx-build -W --keep-going -b html docs docs/_build/html
	@echo "open docs/_build/html/index.html"

# run every tutorial notebook at full size and store its outputs (NOTEBOOKS=tutorials/02_*.py for some)
NOTEBOOKS ?=
tutorials: $(STAMP)
	$(BIN)/python scripts/execute_tutorials.py $(NOTEBOOKS)

bench: $(STAMP)
	$(BIN)/adass bench samplers --out bench-out

# on a machine with an NVIDIA GPU: the tests marked cuda and `adass bench dml --quick --device cuda`,
# their output under device-check-out/ (scripts/device_check.sh)
device-check: $(STAMP)
	VENV=$(VENV) OUT=device-check-out bash scripts/device_check.sh

# the full run behind docs/results.md (about 70 minutes on two cores with JOBS=2; `adass reproduce --quick` for a smoke run).
# Finished runs are kept under reproduce-out/runs: running it again (after Ctrl-C, say) resumes where it
# stopped; `make reproduce JOBS=8` spreads the independent runs over 8 processes; rm -rf reproduce-out
# (or --overwrite) starts afresh
JOBS ?= 1
reproduce: $(STAMP)
	$(BIN)/adass reproduce --out reproduce-out --jobs $(JOBS)

clean:
	rm -rf $(VENV) $(DEMO_OUT) bench-out reproduce-out device-check-out docs/_build docs/jupyter_execute
