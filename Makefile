# make demo : set up .venv and run the main job on the bundled example model
# make test : set up .venv, lint, and run the test suite
# make slow : the slow tests as well (full model suite through both frontends)
# make conformance : the whole ONNX conformance suite through the ONNX backend -> build/conformance.json

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.luminal-installed
EXAMPLE := examples/mlp.onnx
# Evaluation licensing for the demo: its own LUMINAL_HOME and a local evaluation vendor key.
DEMO_HOME   := build/demo-home
DEMO_VENDOR := build/demo-vendor
BENCH_DURATION ?= 10
# Test processes: two share a 2-core machine (gcc, Python and the kernels' own threads
# interleave); 1 runs the suite in this process.
TEST_WORKERS ?= 2

CONFORMANCE_JSON ?= build/conformance.json

.PHONY: setup demo test slow lint bench conformance clean

setup: $(STAMP)

$(STAMP): pyproject.toml vendor/pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), f"luminal needs Python 3.11, found {sys.version.split()[0]} at {sys.executable}"'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch is pinned in the dev extra (==2.13.0) so pip takes the CPU build
	$(PY) -m pip install --quiet -e '.[dev]'
	# the vendor's tooling is its own distribution (luminal-vendor): the demo and the
	# licensing tests use it as the vendor (on PostgreSQL too); a customer's install never has it
	$(PY) -m pip install --quiet -e './vendor[postgres]'
	@touch $(STAMP)

$(EXAMPLE): benchmarks/models.py | $(STAMP)
	$(PY) -m benchmarks.models --export mlp -o $(EXAMPLE)

demo: $(STAMP) $(EXAMPLE)
	$(VENV)/bin/luminal devices
	$(VENV)/bin/luminal inspect $(EXAMPLE)
	$(VENV)/bin/luminal run $(EXAMPLE) --reference --compare onnxruntime
	@# Evaluation license: a local eval vendor key (from `keygen`, never certified by the
	@# vendor root with `certify`) signs a license bound to this install.  The key is trusted
	@# only by an explicit local setting, so it can only yield evaluation licenses (<= 90 days,
	@# <= 4 devices, terms not billable) and `license show` says it is NOT a production key.
	@# A production vendor runs `root-keygen` once and `certify` per signing key instead.
	rm -rf $(DEMO_HOME) $(DEMO_VENDOR)
	$(VENV)/bin/luminal-vendor keygen -o $(DEMO_VENDOR)/eval --valid-days 30
	LUMINAL_HOME=$(DEMO_HOME) $(VENV)/bin/luminal license request -o $(DEMO_VENDOR)/request.json
	$(VENV)/bin/luminal-vendor activate $(DEMO_VENDOR)/request.json -k $(DEMO_VENDOR)/eval.key \
		--licensee evaluation --targets cpu --price cpu=0.10 --days 30 --evaluation \
		-o $(DEMO_VENDOR)/license.json
	LUMINAL_HOME=$(DEMO_HOME) $(VENV)/bin/luminal license trust $(DEMO_VENDOR)/eval.pub.json --evaluation
	LUMINAL_HOME=$(DEMO_HOME) $(VENV)/bin/luminal license install $(DEMO_VENDOR)/license.json
	LUMINAL_HOME=$(DEMO_HOME) $(VENV)/bin/luminal license show
	@# The search: e-graph rewrites, then each kernel's variants measured on this machine;
	@# the second compile takes the winners from the tuning database without measuring.
	LUMINAL_HOME=$(DEMO_HOME) $(VENV)/bin/luminal compile $(EXAMPLE) -o examples/mlp.lmnl --target cpu --budget 30s
	LUMINAL_HOME=$(DEMO_HOME) $(VENV)/bin/luminal compile $(EXAMPLE) -o examples/mlp.lmnl --target cpu --budget 30s
	LUMINAL_HOME=$(DEMO_HOME) $(VENV)/bin/luminal tune-db show --kernels
	@# Running needs no license, but the artifact must be signed by a key this install
	@# trusts: it is (the demo home built it); another install would first run
	@# `luminal artifact-key trust` on the demo home's `luminal artifact-key export`.
	LUMINAL_HOME=$(DEMO_HOME) $(VENV)/bin/luminal run examples/mlp.lmnl --compare onnxruntime
	@# The compiled example against ONNX Runtime on the original model: a signed report, its
	@# verification (signature + every number recomputed) and its HTML page.  An INVALID run
	@# (exit 5: e.g. a noisy machine) still writes its signed report, so the demo goes on.
	@# Blocks of 200 ms: on a shared machine a block's noise is the stalls it catches, which
	@# average out over a longer block (20 ms blocks reached +-8..12% in the 63 s cap on the
	@# shared 2-core dev machine).  An evaluation demo bills on a +-10% interval (its lower
	@# bound: wider only costs the vendor); +-5%, the default, took 60-80 s there or more.
	LUMINAL_HOME=$(DEMO_HOME) $(VENV)/bin/luminal bench examples/mlp.lmnl --baseline onnxruntime \
		--duration 20 --block-ms 200 --target-halfwidth 0.10 -o build/demo-report.json \
		|| test $$? -eq 5
	LUMINAL_HOME=$(DEMO_HOME) $(VENV)/bin/luminal report verify build/demo-report.json
	$(VENV)/bin/luminal report show build/demo-report.json --format html -o build/demo-report.html
	@echo "HTML report: $(CURDIR)/build/demo-report.html"

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

test: lint
	$(PY) -m pytest -q $(if $(filter-out 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile)

slow: lint
	$(PY) -m pytest -q -m "slow or not slow"

conformance: $(STAMP)
	$(PY) -m tools.conformance --expected tests/conformance/expected_failures.toml --json $(CONFORMANCE_JSON)

bench: $(STAMP)
	$(PY) -m benchmarks.compare --duration $(BENCH_DURATION) --json benchmarks/compare.json
	$(PY) -m benchmarks.roofline --json benchmarks/roofline.json

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache $(EXAMPLE) examples/*.lmnl *.egg-info build/demo-home build/demo-vendor build/demo-report.*
