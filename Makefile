# Two entry points: `make demo` and `make test`. Both set themselves up in .venv.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-gpu setup clean

$(STAMP): pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q -c constraints.txt -e '.[test,triton,ray]'
	touch $(STAMP)

setup: $(STAMP)

# The main job on the default device (CUDA if present, else CPU): every practice cheat against the
# naive bench and against kernelvet, the honest kernels as controls.
demo: $(STAMP)
	$(BIN)/kernelvet practice --device auto

test: $(STAMP)
	$(BIN)/python -m pytest -q -m "not gpu"

test-gpu: $(STAMP)
	$(BIN)/python -m pytest -q -m gpu

clean:
	rm -rf $(VENV) build src/*.egg-info
