# One-command set-up: every target creates .venv with pinned versions when needed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check --quiet
STAMP := $(VENV)/.irscope-installed
PYTEST_ARGS ?=

.PHONY: setup layers test test-fast test-thunder wheel-check demo bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml requirements/test.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -r requirements/test.txt
	$(PIP) install --no-deps -e .
	@touch $(STAMP)

# import-linter reads packages from disk, and parsers/ and tui/ install inside irscope: it reads
# the installed layout, built here from links (pyproject.toml holds the contracts).
LAYOUT := build/layers

layers: setup
	@rm -rf $(LAYOUT) && mkdir -p $(LAYOUT)/irscope
	@ln -s $(CURDIR)/irscope/* $(CURDIR)/parsers $(CURDIR)/tui $(LAYOUT)/irscope/
	cd $(LAYOUT) && $(CURDIR)/$(VENV)/bin/lint-imports --no-cache $(CURDIR)/pyproject.toml

test: layers
	$(PY) -m pytest -n 2 --dist loadfile -q $(PYTEST_ARGS)

# The edit loop: everything but the tests marked slow (real compiles of models and sweeps)
# and the fuzz campaign.
test-fast: layers
	$(PY) -m pytest -n 2 --dist loadfile -q -m "not slow and not gpu and not fuzz" $(PYTEST_ARGS)

# Lightning Thunder does not run with the torch of requirements/test.txt: its tests run in a
# virtual environment of their own, with the pinned Thunder and the torch it runs with.
THUNDER_VENV := .venv-thunder
THUNDER_STAMP := $(THUNDER_VENV)/.irscope-installed

$(THUNDER_STAMP): pyproject.toml requirements/thunder.txt
	@test -x $(THUNDER_VENV)/bin/python || $(PYTHON) -m venv $(THUNDER_VENV)
	$(THUNDER_VENV)/bin/python -m pip --disable-pip-version-check --quiet install \
		-r requirements/thunder.txt
	$(THUNDER_VENV)/bin/python -m pip --disable-pip-version-check --quiet install --no-deps -e .
	@touch $(THUNDER_STAMP)

test-thunder: $(THUNDER_STAMP)
	$(THUNDER_VENV)/bin/python -m pytest -q -m thunder tests/test_thunder.py $(PYTEST_ARGS)

# The wheel as a user installs it: the README's pip lines run in a clean virtual environment,
# irscope used after each (base install on the committed samples, each extra's collector).
wheel-check:
	bash .ci/wheel-check

demo: setup
	$(PY) -m irscope inspect --replace -o .irscope/runs/demo-seed --name seed samples/scripts/seed_torch.py
	@rm -rf .irscope/runs/demo-gpu && mkdir -p .irscope/runs && cp -r samples/gpu/triton_kernels .irscope/runs/demo-gpu
	@echo; echo "Kernels captured on an H100 (samples/gpu/triton_kernels):"
	$(PY) -m irscope report .irscope/runs/demo-gpu --stage ptx,sass
	@echo; echo "Next: irscope open .irscope/runs/demo-seed   (or .irscope/runs/demo-gpu)"

bench: setup
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) $(THUNDER_VENV) .irscope build *.egg-info
