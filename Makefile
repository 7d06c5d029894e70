# Two commands do all the set-up: `make lab` opens the course, `make test` runs every test.
# Both create .venv on first use. TORCH is pinned so pip takes a known build; override it for
# a GPU machine, e.g. `make lab TORCH=torch==2.13.0` from a CUDA index.
PYTHON ?= python3
VENV   ?= .venv
TORCH  ?= torch==2.13.0
PY      = $(VENV)/bin/python
# the tools `pplab plan --export` writes for: the tests read each export back with the tool's
# own config code, which needs none of their training stacks (--no-deps: no triton, datasets)
EXPORT_TOOLS = torchtitan==0.2.2 megatron-core==0.16.1
STAMP   = $(VENV)/.installed
# pytest keeps each test module's assertion-rewritten bytecode in __pycache__ unless
# PYTHONDONTWRITEBYTECODE is set (as many containers set it); then every test worker re-parses
# all the test files, about 5 s of make test-fast's 24
unexport PYTHONDONTWRITEBYTECODE

.PHONY: lab test test-fast bench bench-tests bench-runtime bench-calibration bench-browser site clean

# pplab's bytecode is compiled here, as pip does for an installed package, not by each test
# worker at once on the first run
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "$(TORCH)"
	$(PY) -m pip install --quiet -e ".[dev]"
	$(PY) -m pip install --quiet --no-deps $(EXPORT_TOOLS)
	$(PY) -m compileall -q pplab
	touch $(STAMP)

ROOTFLAG = $(if $(filter 0,$(shell id -u)),--allow-root,)

# kernel websockets without Nagle's algorithm (pplab/canvases/labserver.py): 40 ms less per redraw
LABFLAGS = --ServerApp.kernel_websocket_connection_class=pplab.canvases.labserver.NoDelayConnection
# default settings for this lab (tools/jupyter-config/labconfig): no "Jupyter news?" prompt on
# every start; a student's own choice in JupyterLab's settings still wins
LABENV = JUPYTER_CONFIG_PATH=$(CURDIR)/tools/jupyter-config$(if $(JUPYTER_CONFIG_PATH),:$(JUPYTER_CONFIG_PATH),)

lab: $(STAMP)
	$(LABENV) $(VENV)/bin/jupyter lab --ip=127.0.0.1 $(ROOTFLAG) $(LABFLAGS) --ServerApp.root_dir=. notebooks/00_setup_and_first_run.ipynb

# the fast tier with a worker per core, then the slow tier as two pytest processes at once
# (tools/slow_tier.py): the tests that change users and permissions (JupyterHub, Slurm, the
# sandbox as an ordinary user) one at a time in one, since they share Unix accounts and
# namespaces and mostly wait; everything else in the other (lessons, the browser, torchrun,
# grading), then the solutions under nbval. The
# lessons' saved outputs are compared on that stream's one run of each lesson
test: $(STAMP)
	$(PY) -m pytest -m "not slow" -n auto tests
	$(PY) tools/slow_tier.py

# the edit loop: no test over half a second, no torchrun, notebook runs or browser, a worker
# per core (pytest-xdist); make test runs everything (its time: README)
test-fast: $(STAMP)
	$(PY) -m pytest -m "not slow" -n auto tests

# medians and ratios; the figures the docs quote go to docs/figures.json and from there into
# the docs (benchmarks/figures.py), so no doc keeps a number older than the last `make bench`
bench: $(STAMP)
	$(PY) benchmarks/bench_simulator.py --record
	$(PY) benchmarks/bench_search.py --table --record
	$(PY) benchmarks/bench_planner.py --record
	$(PY) benchmarks/figures.py --write

# the test suite's own time and size, as the README quotes them (FAST=1: the fast tier only)
bench-tests: $(STAMP)
	$(PY) benchmarks/bench_tests.py --record $(if $(FAST),--fast,)
	$(PY) benchmarks/figures.py --write

bench-runtime: $(STAMP)
	$(PY) benchmarks/bench_runtime_vs_torch.py

# measured vs simulated makespans before and after pplab calibrate (docs/calibration.md)
bench-calibration: $(STAMP)
	$(PY) benchmarks/bench_calibration.py --record
	$(PY) benchmarks/bench_calibration.py --emulate
	$(PY) benchmarks/figures.py --write

# slider -> picture latency in real Chromium (Debian's chromium); last line:
# "browser redraw p50 X ms p95 Y ms" (timeline canvas, P=8 M=32 V=2 interleaved)
bench-browser: $(STAMP)
	$(PY) benchmarks/bench_browser.py

# the course as a static JupyterLite site in site/ (needs Python and npm; not part of set-up)
site:
	$(PYTHON) tools/build_site.py site

clean:
	rm -rf $(VENV) build site *.egg-info
