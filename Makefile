# One-command set-up: every target creates .venv with pinned versions when needed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check --quiet
STAMP := $(VENV)/.irscope-installed
PYTEST_ARGS ?=

.PHONY: setup test demo bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml requirements/test.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -r requirements/test.txt
	$(PIP) install --no-deps -e .
	@touch $(STAMP)

test: setup
	$(PY) -m pytest -n 2 --dist loadfile -q $(PYTEST_ARGS)

demo: setup
	$(PY) -m irscope inspect --replace -o .irscope/runs/demo-seed --name seed samples/scripts/seed_torch.py
	@rm -rf .irscope/runs/demo-gpu && mkdir -p .irscope/runs && cp -r samples/gpu/triton_kernels .irscope/runs/demo-gpu
	@echo; echo "Kernels captured on an H100 (samples/gpu/triton_kernels):"
	$(PY) -m irscope report .irscope/runs/demo-gpu --stage ptx,sass
	@echo; echo "Next: irscope open .irscope/runs/demo-seed   (or .irscope/runs/demo-gpu)"

bench: setup
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) .irscope build *.egg-info
