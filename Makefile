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

# Many CPU tests vet a kernel, and a vet reads the host's clocks: on a shared 2-core machine a
# moment of contention from outside can stretch one measurement past what the judge excuses (an
# honest reference's reps read 35-80x its back-to-back calls for a minute). A test that fails on
# an assertion is run once more; both runs show in the report (R), and one that fails twice fails.
test: $(STAMP)
	$(BIN)/python -m pytest -q -m "not gpu" --reruns 1 --only-rerun AssertionError

test-gpu: $(STAMP)
	$(BIN)/python -m pytest -q -m gpu

clean:
	rm -rf $(VENV) build src/*.egg-info
