# longlook — entry points. `make setup` is idempotent and fast when nothing changed.
# The distribution's CPython when there is one: Debian builds it with PGO and LTO and
# links it statically, which a default pyenv build does not, and aioquic (all Python)
# runs ~8% faster on it (BENCHMARKS.md, "Interpreter"). Else python3.11 on PATH.
PYTHON_BOOTSTRAP ?= $(firstword $(wildcard /usr/bin/python3.11) python3.11)
VENV := .venv
PY := $(VENV)/bin/python
STAMPS := .stamps
CARGO_MANIFEST := harness/emulator/Cargo.toml
CARGO_FLAGS := --release --locked --manifest-path $(CARGO_MANIFEST)
LINK_BIN := harness/emulator/target/release/longlook-link
ACTIONLINT := .tools/bin/actionlint
ACTIONLINT_VERSION := v1.7.12

.PHONY: setup test check mutants bench-emulator clean docker-engine docker-base docker-images

setup: $(STAMPS)/system-deps $(STAMPS)/python-deps $(STAMPS)/pylink $(ACTIONLINT) $(LINK_BIN)
	harness/endpoints/build-all.sh

# The link emulator, rebuilt when its sources change. A file target, so that a set-up
# checkout runs no toolchain: a user without root (docs/testbed.md) may have none.
$(LINK_BIN): $(wildcard harness/emulator/src/*.rs) harness/emulator/Cargo.toml harness/emulator/Cargo.lock
	cargo build $(CARGO_FLAGS)
	touch $@

# actionlint checks the CI workflow (.github/workflows, tests/test_ci_workflow.py);
# built from the Go module proxy (its PyPI wrapper downloads a release binary).
$(ACTIONLINT):
	GOBIN=$(abspath .tools/bin) go install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION)

$(STAMPS):
	mkdir -p $@

# Re-run only when the script (its package list) changes.
$(STAMPS)/system-deps: scripts/install-system-deps.sh | $(STAMPS)
	scripts/install-system-deps.sh
	touch $@

# pyvenv.cfg is a plain file written at creation (bin/python is a symlink whose
# mtime is the interpreter's), so a re-created venv re-triggers the install.
$(VENV)/pyvenv.cfg:
	$(PYTHON_BOOTSTRAP) -m venv $(VENV)

# Re-install only when the pins or the package metadata change.
$(STAMPS)/python-deps: requirements.txt pyproject.toml $(VENV)/pyvenv.cfg | $(STAMPS)
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet -e .
	touch $@

# The emulator core's Python bindings (PyO3 via maturin) for virtual-time runs
# (docs/virtual-time.md); rebuilt when the core or the bindings change.
PYLINK := harness/emulator/python
$(STAMPS)/pylink: $(PYLINK)/src/lib.rs $(PYLINK)/Cargo.toml $(PYLINK)/Cargo.lock $(wildcard harness/emulator/src/*.rs) $(STAMPS)/python-deps
	VIRTUAL_ENV=$(abspath $(VENV)) $(VENV)/bin/maturin develop --release --locked --quiet -m $(PYLINK)/Cargo.toml
	touch $@

# The suite's own tests, TEST_JOBS at a time (pytest-xdist; a file's tests stay on one
# worker, so module fixtures are built once), then those marked `solo`, which need the
# host to themselves, one at a time. The second runs whatever the first gave; the exit
# status is the first failure's. TEST_ARGS adds pytest options to both.
TEST_JOBS ?= 2
TEST_ARGS ?=
test: setup
	cargo test $(CARGO_FLAGS)
	status=0; \
	$(PY) -m pytest tests/ -n $(TEST_JOBS) --dist loadfile -m "not solo" $(TEST_ARGS) || status=$$?; \
	$(PY) -m pytest tests/ -m solo $(TEST_ARGS) || { rc=$$?; [ $$status -ne 0 ] || status=$$rc; }; \
	exit $$status

# The main job: the properties on the embedded default (aioquic plus one compiled
# stack) with the quick, derandomised Hypothesis profile. Override with e.g.
# `make check IMPL=quinn PROFILE=release`.
IMPL ?= aioquic,quic-go
PROFILE ?= ci
# More pytest options for both passes below, e.g. CHECK_ARGS="-k window".
CHECK_ARGS ?=
# JUnit XML: CHECK_JUNIT=artifacts/check.xml writes artifacts/check-virtual.xml and
# artifacts/check-real.xml, one per pass (scripts/compare-outcomes.py reads "A,B").
CHECK_JUNIT ?=
# Virtual-time cases at once: a virtual clock does not care for a shared CPU.
CHECK_JOBS ?= 2
# Two passes (--only-mode): the cases placed in virtual time CHECK_JOBS at a time,
# then the real-time ones alone, whose verdicts do care. "No case placed" (pytest's
# exit 5, e.g. quic-go has no virtual backend) is no failure. Writes the results
# (artifacts/results/, a file per pass) and the report a person opens
# (artifacts/report/index.html); the verdict is the passes' exit status.
check: setup
	@mkdir -p artifacts/results && rm -f artifacts/results/*.ndjson
	status=0; \
	for only in virtual real; do \
		jobs=; [ $$only = real ] || jobs="-n $(CHECK_JOBS)"; \
		junit=; [ -z "$(CHECK_JUNIT)" ] || junit="--junitxml $(basename $(CHECK_JUNIT))-$$only.xml"; \
		$(PY) -m pytest properties/ --impl $(IMPL) --hypothesis-profile $(PROFILE) --only-mode $$only $$jobs $$junit \
			--results artifacts/results/$$only-time.ndjson $(CHECK_ARGS); rc=$$?; \
		[ $$rc -ne 5 ] || rc=0; [ $$status -ne 0 ] || status=$$rc; \
	done; \
	$(PY) -m harness.cli report artifacts/results --out artifacts/report \
		$$(test -d artifacts/model-coverage && echo --model-coverage artifacts/model-coverage) \
		|| echo "check: no report (see above)"; exit $$status

# The mutant zoo (issue 7): every mutant of tests/mutants/catalogue.py against the
# properties, then the table and the score. Takes about an hour; narrow it with
# e.g. `make mutants MUTANTS_ARGS="--only beta_0_9 --stock-runs 1"`.
MUTANTS_ARGS ?=
mutants: setup
	$(PY) scripts/mutants.py $(MUTANTS_ARGS)

# Model-checks spec/ (TLA+) and compares the state counts with spec/manifest.json.
tlc: $(STAMPS)/system-deps $(STAMPS)/python-deps
	nice -n 19 $(PY) -m harness.model.check

# The Docker backend (docs/docker.md): an engine (a running one, or dockerd started
# with --bridge=none --iptables=false), a base image without a registry, and our
# endpoints' images from the host builds. Each step is idempotent.
docker-engine:
	scripts/docker-engine.sh

docker-base: docker-engine
	nice -n 19 scripts/docker-base.sh

docker-images: setup docker-base
	nice -n 19 scripts/docker-images.sh $(DOCKER_STACKS)

bench-emulator: setup
	scripts/install-bench-deps.sh
	$(PY) bench/emulator_bench.py

clean:
	rm -rf $(VENV) $(STAMPS) harness/emulator/target .pytest_cache *.egg-info
