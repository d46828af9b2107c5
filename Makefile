# uwbench: every target is one line. `make demo` and `make test` work alone on a fresh machine.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

MLFLOW_PORT ?= 5000
STUDY ?= quickstart
STORAGE ?= runs/optuna/$(STUDY).journal
DASHBOARD_PORT ?= 8080
PAPER_STUDIES ?= table1_memorization table2_reasoning table3_pixel_mnist ablation_figure sinusoid_figure
# Where `make paper-cpu` writes its reports: never over the committed ones in reports/ (Tables 1 and 2 commit
# their paper50 reports; `uwbench report` refuses to replace a report of another profile without --force).
PAPER_CPU_REPORTS ?= runs/reports
# `make test` runs the suite in this many pytest-xdist processes: the machine's cores, at most 4 (each
# process imports torch; much of the suite waits on the subprocesses it starts). TEST_WORKERS=0: one process.
TEST_WORKERS ?= $(shell python3 -c "import os; print(min(4, len(os.sched_getaffinity(0))))" 2>/dev/null || echo 2)
# torch is installed first, pinned; TORCH_INDEX takes it from another package index, e.g. the CPU-only
# wheels: `make install TORCH_INDEX=https://download.pytorch.org/whl/cpu` (PyPI's Linux wheel is the CUDA
# build, several GB). Empty: PyPI.
TORCH ?= torch==2.13.0
TORCH_INDEX ?=

.PHONY: install demo test test-slow test-gpu gpu-check lint bench paper-cpu paper50 paper100 mlflow-ui dashboard clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV) && $(PY) -m pip install -q $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) '$(TORCH)' && $(PY) -m pip install -q -e '.[dev]' && touch $(STAMP)

demo: install
	$(PY) -m uwbench demo

test: install lint
	$(PY) -m pytest -q -m "not slow and not gpu" -n $(TEST_WORKERS) --dist worksteal

test-slow: install
	$(PY) -m pytest -q -m "slow"

test-gpu: install
	$(PY) -m pytest -q -m "gpu"

# On a CUDA machine, one call of at most about 13 minutes: the gpu tests, the population bench, a 3-member
# population run, paper50 swept for 3 minutes; what it leaves is in $(GPU_CHECK_OUT) (benchmarks/gpu_check.sh)
GPU_CHECK_OUT ?= runs/gpu-check
gpu-check: install
	GPU_CHECK_OUT=$(GPU_CHECK_OUT) PY=$(PY) sh benchmarks/gpu_check.sh

# ruff (pyproject.toml [tool.ruff]: pycodestyle, pyflakes, blind excepts, stale noqa markers), then every study file
lint: install
	$(VENV)/bin/ruff check --no-cache . && $(PY) -m uwbench validate studies/*.yaml

bench: install
	$(PY) -m pip install -q -e ".[bench]" && $(PY) -m uwbench bench

paper-cpu: install
	for s in $(PAPER_STUDIES); do $(PY) -m uwbench sweep studies/$$s.yaml --profile cpu --workers 2 && $(PY) -m uwbench report studies/$$s.yaml --profile cpu --out $(PAPER_CPU_REPORTS) || exit $$?; done

# Tables 1 and 2 at the paper's size, continued from their committed reports: each report's finished runs are
# restored into runs/ (`uwbench restore`: nothing is trained twice, on this machine or a new one), the runs it
# lacks are swept, and the report is rebuilt in reports/. WORKERS=1 leaves a core free.
WORKERS ?= 2
PAPER50_STUDIES ?= table1_memorization table2_reasoning
paper50: install
	for s in $(PAPER50_STUDIES); do $(PY) -m uwbench restore studies/$$s.yaml && $(PY) -m uwbench sweep studies/$$s.yaml --workers $(WORKERS) && $(PY) -m uwbench report studies/$$s.yaml || exit $$?; done

# The T=100 columns of Tables 1 and 2 (profile paper100), continued the same way from the runs committed in each
# study's reports/<study>/t100/ (a report folder of its own: the T=50 report is paper50's), then that report
# rebuilt from the store (its snapshot copied there, the report rebuilt beside it). Table 1 first.
PAPER100_STUDIES ?= table1_memorization table2_reasoning
PAPER100_CELLS ?=  # every cell; e.g. --cells 'ntm-*' for some (with one study in PAPER100_STUDIES)
PAPER100_POPULATION ?= off  # as the committed T=100 runs trained: their time comparisons compare runs trained alike
paper100: install
	for s in $(PAPER100_STUDIES); do r=reports/$$s/t100; mkdir -p $$r && { if [ -f $$r/runs.csv ]; then $(PY) -m uwbench restore studies/$$s.yaml --profile paper100 --from $$r; fi; } && $(PY) -m uwbench sweep studies/$$s.yaml --profile paper100 $(PAPER100_CELLS) --population $(PAPER100_POPULATION) --workers $(WORKERS) && $(PY) -m uwbench report studies/$$s.yaml --profile paper100 --out runs/t100-report --force && for f in runs curves traces; do cp runs/t100-report/$$s/$$f.csv $$r/; done && $(PY) -m uwbench report --from-csv $$r/runs.csv || exit $$?; done

mlflow-ui: install
	$(PY) -m uwbench.tracking.ui --tracking-uri sqlite:///runs/mlflow.db --port $(MLFLOW_PORT) && MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false $(VENV)/bin/mlflow ui --host 127.0.0.1 --port $(MLFLOW_PORT) --workers 1 --backend-store-uri sqlite:///runs/mlflow.db

dashboard: install
	@case "$(STORAGE)" in *://*) ;; *) test -f "$(STORAGE)" || { echo "no Optuna storage at $(STORAGE): sweep the study first (uwbench sweep studies/$(STUDY).yaml) or give STORAGE=PATH|URL"; exit 2; } ;; esac; $(PY) -m uwbench.dashboard --host 127.0.0.1 --port $(DASHBOARD_PORT) $(STORAGE)

clean:
	rm -rf runs .pytest_cache build *.egg-info && find . -name __pycache__ -prune -exec rm -rf {} +
