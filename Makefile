# Two commands do all the set-up: `make lab` opens the course, `make test` runs every test.
# Both create .venv on first use. TORCH is pinned so pip takes a known build; override it for
# a GPU machine, e.g. `make lab TORCH=torch==2.13.0` from a CUDA index.
PYTHON ?= python3
VENV   ?= .venv
TORCH  ?= torch==2.13.0
PY      = $(VENV)/bin/python
STAMP   = $(VENV)/.installed

.PHONY: lab test test-fast bench bench-runtime bench-calibration bench-browser site clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "$(TORCH)"
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

ROOTFLAG = $(if $(filter 0,$(shell id -u)),--allow-root,)

# kernel websockets without Nagle's algorithm (pplab/canvases/labserver.py): 40 ms less per redraw
LABFLAGS = --ServerApp.kernel_websocket_connection_class=pplab.canvases.labserver.NoDelayConnection

lab: $(STAMP)
	$(VENV)/bin/jupyter lab --ip=127.0.0.1 $(ROOTFLAG) $(LABFLAGS) --ServerApp.root_dir=. notebooks/00_setup_and_first_run.ipynb

test: $(STAMP)
	$(PY) -m pytest tests
	$(PY) -m pytest --nbval --nbval-current-env -p no:randomly notebooks solutions

# the edit loop: pure core and drawing, no torchrun, notebooks or browser (about 40 s)
test-fast: $(STAMP)
	$(PY) -m pytest -m "not slow" tests

bench: $(STAMP)
	$(PY) benchmarks/bench_simulator.py
	$(PY) benchmarks/bench_search.py

bench-runtime: $(STAMP)
	$(PY) benchmarks/bench_runtime_vs_torch.py

# measured vs simulated makespans before and after pplab calibrate (docs/calibration.md)
bench-calibration: $(STAMP)
	$(PY) benchmarks/bench_calibration.py
	$(PY) benchmarks/bench_calibration.py --emulate

# slider -> picture latency in real Chromium (Debian's chromium); last line:
# "browser redraw p50 X ms p95 Y ms" (timeline canvas, P=8 M=32 V=2 interleaved)
bench-browser: $(STAMP)
	$(PY) benchmarks/bench_browser.py

# the course as a static JupyterLite site in site/ (needs Python and npm; not part of set-up)
site:
	$(PYTHON) tools/build_site.py site

clean:
	rm -rf $(VENV) build site *.egg-info
