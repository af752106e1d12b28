# Podium's two entry points are `make demo` and `make test`; every other target
# is a step they share. Each step is idempotent, so a fresh clone and a warm
# checkout run the same commands.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit integration e2e bench controlplane e2esuite conformance testtools venv clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

controlplane: $(STAMP)
	$(PY) -m podium.devcluster build

# Kubernetes' scheduling e2e suite (hack/e2e), which `make test` runs in part.
e2esuite: $(STAMP)
	$(PY) -m podium.devcluster which e2e.test

# Every [sig-scheduling] e2e spec with $(SCHEDULER) as the only scheduler (docs/conformance.md).
SCHEDULER ?= podium
conformance: controlplane e2esuite
	$(PY) -m podium.devcluster conformance --scheduler $(SCHEDULER) \
		--report-dir conformance-report/$(SCHEDULER)

demo: controlplane
	$(PY) -m podium.devcluster demo

SOURCES := $(wildcard operator tests bench examples)

lint: $(STAMP)
	$(VENV)/bin/ruff check $(SOURCES)
	$(VENV)/bin/ruff format --check $(SOURCES)
	$(VENV)/bin/lint-imports

typecheck: $(STAMP)
	mkdir -p .mypy-src && ln -sfn ../operator .mypy-src/podium
	$(VENV)/bin/mypy -p podium

unit: $(STAMP)
	$(PY) -m pytest tests/unit -q

testtools:
	hack/test-tools.sh

test: controlplane e2esuite testtools lint typecheck
	$(PY) -m pytest tests examples -q -ra --durations=25 $(PYTEST_ARGS)

bench: controlplane
	$(PY) -m bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
