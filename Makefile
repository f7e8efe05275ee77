# Build, notebook and test commands for the Percolator teaching kit.
#   make venv         .venv with the pinned requirements and the package (editable)
#   make lab          JupyterLab on 127.0.0.1 over the whole kit, opening START_HERE.md
#                     (token auth on); trusts the kit's own notebooks first
#   make trust        trust the kit's own notebooks (so Lab draws their saved widgets)
#   make lite         build/lite/: the kit as a static JupyterLite site (Pyodide, offline)
#   make serve-lite   serve build/lite on http://127.0.0.1:8000 (loopback only)
#   make bench-lite   time to a running kernel and to exercise 01's check, in Chromium
#   make release      build/release/: the student edition (folder, zip, browser site), no answers
#   make grade-bench  grade 200 notebooks (25 per exercise, right and wrong) with -j 2, timed
#   make common-mistakes  docs/common_mistakes.md from tests/wrong_answers/ (grades every entry: minutes)
#   make por-equivalence  every catalogue entry self-checked with and without partial-order
#                     reduction: same verdicts? schedules and CPU per family (EXERCISES="1 8")
#   make recall-equivalence  every catalogue entry graded sandboxed with and without recall
#                     (client processes replaced by recorded answers): same results? processes
#   make test         pytest tests/ (building the sites when a test first needs them), then nbval
#                     over notebooks/ and solutions/ (CI's command; at most 12 minutes)
#   make test-long    the tests marked long: soaks, sweeps, the whole catalogue sandboxed
#   make system-deps  Debian's chromium and redis-server (needs root or sudo)
#   make clean        remove .venv and build/test leftovers

SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LAB_OVERRIDES := $(VENV)/share/jupyter/lab/settings/overrides.json
NB_DIRS := notebooks solutions
SYSTEM_PKGS := chromium redis-server
# Extra pytest arguments, e.g. make test PYTEST_ARGS='-m "not slow"'
PYTEST_ARGS ?=
# Test processes (pytest-xdist): 2 uses both cores of a CI machine; 0 runs in this process.
TEST_JOBS ?= 2

.PHONY: venv trust lab lite serve-lite bench-lite release grade-bench common-mistakes test test-long secret-sweep por-equivalence recall-equivalence system-deps clean

venv: $(STAMP) trust

# Re-run only when the pins or the project metadata change. The editable
# install uses compat mode (a .pth with the repo root), so percolator_ref and
# its subpackages are importable as they appear, without reinstalling.
$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
	  { echo "$(PYTHON) is older than Python 3.11: set PYTHON=/path/to/python3.11"; exit 1; }
	@$(BIN)/python -c '' 2>/dev/null || { rm -rf $(VENV) && $(PYTHON) -m venv $(VENV); }
	$(BIN)/python -m pip install -r requirements.txt
	$(BIN)/python -m pip install --config-settings editable_mode=compat -e .
	touch $@

$(LAB_OVERRIDES): jupyter/overrides.json $(STAMP)
	install -D -m 644 $< $@

# Token auth stays on. Jupyter refuses to run as root without --allow-root,
# and root is the usual user on these machines.
LAB_ARGS ?= $(if $(filter 0,$(shell id -u)),--allow-root)
# The kit's own notebooks are trusted (their signatures go to the user's Jupyter data
# dir): JupyterLab draws a saved widget view only in a trusted notebook, and shows the
# saved text in an untrusted one. Cheap (about 2 s), so it runs on every make lab.
KIT_NOTEBOOKS = $(wildcard notebooks/*.ipynb exercises/*.ipynb solutions/*.ipynb)
trust: $(STAMP)
	@$(BIN)/jupyter trust $(KIT_NOTEBOOKS) >/dev/null && \
	  echo "trusted $(words $(KIT_NOTEBOOKS)) notebooks of the kit"

# Lab serves the repository root (notebooks/, exercises/, solutions/, docs/) and opens
# START_HERE.md, the landing page. LAB_EXTRA: more options (the tests give a port and token).
LAB_EXTRA ?=
lab: venv $(LAB_OVERRIDES)
	$(BIN)/jupyter lab --ip=127.0.0.1 $(LAB_ARGS) --ServerApp.root_dir="$(CURDIR)" \
	  --LabApp.default_url=/lab/tree/START_HERE.md $(LAB_EXTRA)

# The static site: npm's pyodide at the pyodide kernel's version, the kit's wheel
# and the pure-Python wheels it needs, the exercises and notebooks (lite/build.py).
# Downloads are cached in build/lite-cache; only PyPI and npm are contacted.
lite: venv
	$(BIN)/python lite/build.py --output-dir build/lite

serve-lite: lite
	$(BIN)/python lite/serve.py --directory build/lite --port 8000

bench-lite: lite
	$(BIN)/python lite/bench.py

# The instructor's page of wrong answers: each catalogue entry graded (secret 0), its first
# failing check and feedback (tests/test_common_mistakes.py keeps the page in step).
common-mistakes: venv
	$(BIN)/python -m percolator_ref common-mistakes

# The student edition (release/build.py, release/README.md): build/release/percolator-kit-student/,
# its zip, and build/release/site/ (the browser site of it, from make lite's cache and node).
release: venv lite
	$(BIN)/python release/build.py --output-dir build/release

# Issue 19's figure: every check and schedule of 200 sandboxed gradings (minutes).
grade-bench: venv
	$(BIN)/python -m percolator_ref grade-bench --per-exercise 25 -j 2

# pytest exits 5 when it collects nothing; that is not a failure while a
# notebook folder is still empty. nbval runs only over folders that hold
# notebooks (exercises/ is left out: unsolved exercises fail by design), one notebook per
# test process (--dist loadfile keeps a notebook's cells in order in one kernel).
# The sites are not built first: PERCOLATOR_BUILD_SITES=1 lets the first test that needs
# build/lite or build/release build it, once per run (tests/site_build.py), while the other
# test process goes on with unit tests.
# Tests marked `long` (soaks, sweeps, every catalogue entry through the sandbox: a faster
# test in this run covers each property) run under make test-long.
test: venv
	PERCOLATOR_BUILD_SITES=1 $(BIN)/python -m pytest -n $(TEST_JOBS) -m "not long" tests $(PYTEST_ARGS)
	@dirs=""; \
	for d in $(NB_DIRS); do \
	  if [ -n "$$(find $$d -name '*.ipynb' -not -path '*/.ipynb_checkpoints/*' -print -quit 2>/dev/null)" ]; then dirs="$$dirs $$d"; fi; \
	done; \
	if [ -z "$$dirs" ]; then echo "nbval: no notebooks yet in $(NB_DIRS); skipped"; exit 0; fi; \
	echo "$(BIN)/python -m pytest --nbval --nbval-current-env -n $(TEST_JOBS) --dist loadfile$$dirs $(PYTEST_ARGS)"; \
	$(BIN)/python -m pytest --nbval --nbval-current-env -n $(TEST_JOBS) --dist loadfile $$dirs $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "nbval: no notebook cells collected in$$dirs"; rc=0; fi; \
	exit $$rc

# The long tests make test leaves out (pyproject.toml's `long` mark): tens of minutes.
test-long: venv
	PERCOLATOR_BUILD_SITES=1 $(BIN)/python -m pytest -n $(TEST_JOBS) -m long tests $(PYTEST_ARGS)

# Every catalogue entry graded in-process under 100 secrets (issue 19): hours on 2 cores,
# so not part of `make test`.
# PERCOLATOR_SWEEP_SECRETS=N: fewer secrets; PERCOLATOR_SWEEP_EXERCISES=9,10: some exercises.
secret-sweep: venv
	PERCOLATOR_SECRET_SWEEP=1 $(BIN)/python -m pytest -n $(TEST_JOBS) tests/test_grading_interleavings.py -k 100_secrets $(PYTEST_ARGS)

# The partial-order reduction's equivalence run (issue 27 item 6): CPU-heavy, not in `make test`.
EXERCISES ?=
por-equivalence: venv
	nice -n 10 $(BIN)/python tools/por_equivalence.py $(EXERCISES)

# Recall's equivalence run (issue 27 item 7): every catalogue entry graded twice, sandboxed.
recall-equivalence: venv
	nice -n 10 $(BIN)/python tools/recall_equivalence.py $(EXERCISES)

system-deps:
	@command -v dpkg-query >/dev/null || { echo "Not a Debian system: install $(SYSTEM_PKGS) with your package manager."; exit 1; }; \
	missing=""; \
	for p in $(SYSTEM_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -z "$$missing" ]; then echo "system-deps: already installed: $(SYSTEM_PKGS)"; exit 0; fi; \
	if [ "$$(id -u)" -eq 0 ]; then sudo=""; \
	elif command -v sudo >/dev/null; then sudo="sudo"; \
	else echo "system-deps: missing Debian packages:$$missing"; \
	     echo "Ask an administrator to run: apt-get update && apt-get install -y$$missing"; exit 1; fi; \
	echo "system-deps: installing$$missing"; \
	$$sudo apt-get update && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y $$missing

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .hypothesis artifacts
	find . -path ./.git -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
