# ccvl-tf: the two commands are `make demo` (main job) and `make test` (test suite).
# Both create .venv from requirements.txt (the lock file) when it is missing or stale.
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.ccvl-installed
export TF_USE_LEGACY_KERAS := 1
# TensorFlow's C++ log level is left to the binaries: each sets TF_CPP_MIN_LOG_LEVEL=3 before
# TensorFlow loads (ccvl_tf/runtime/quiet.py), so a CPU machine's first lines are the run's own and
# not cuFFT / cuDNN / cuBLAS registration errors; a level set here would count as the user's
# and keep them. CCVL_VERBOSE=1, or TF_CPP_MIN_LOG_LEVEL in the environment, keeps them.

.PHONY: venv venv-gpu gpu-check demo test test-fast bench gridworld minatar-table lock clean-venv

venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { \
	  echo "error: '$(PYTHON)' was not found on PATH. ccvl-tf needs Python 3.11 exactly:" >&2; \
	  echo "  dm-reverb-nightly (the only Reverb build that loads into TF 2.16) ships cp311 wheels only." >&2; \
	  echo "  Install it (pyenv install 3.11 / apt-get install python3.11) or pass make PYTHON=/path/to/python3.11." >&2; \
	  echo "  See BUILD.md." >&2; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)' || { \
	  echo "error: '$(PYTHON)' is Python $$($(PYTHON) -c 'import platform; print(platform.python_version())'), but ccvl-tf needs 3.11 exactly" >&2; \
	  echo "  (dm-reverb-nightly ships cp311 wheels only). Pass make PYTHON=/path/to/python3.11. See BUILD.md." >&2; exit 1; }
	@test -x $(PY) || { echo "creating $(VENV) with $(PYTHON)"; $(PYTHON) -m venv $(VENV); }
	$(PY) -m pip install --disable-pip-version-check -q -r requirements.txt
	$(PY) -m pip install --disable-pip-version-check -q --no-deps --no-build-isolation -e .
	@touch $(STAMP)

# GPU: the CUDA wheels of requirements-gpu.txt (the lock of tensorflow[and-cuda]==2.16.2's extra,
# every wheel's sha256 checked) on top of the lock, in the same venv; then `make gpu-check`.
GPU_STAMP := $(VENV)/.ccvl-gpu-installed
venv-gpu: $(GPU_STAMP)

$(GPU_STAMP): $(STAMP) requirements-gpu.txt
	$(PY) -m pip install --disable-pip-version-check -q --require-hashes --no-deps -r requirements-gpu.txt
	$(PY) -m pip check
	@touch $(GPU_STAMP)

# The GPU check (BUILD.md, "GPU"): the stack, each learner's step time, the first 100 training
# steps on the GPU against the CPU's. Without a GPU: one line, exit status 0.
gpu-check: $(STAMP)
	@$(PY) binaries/gpu_check.py

# The main job on a default that needs no downloaded data: offline CCVL on Breakout from a
# 50k-transition dataset of a scripted player (25% random actions) it collects once; ends with
# the confidence diagnostics and a results table (random / behaviour / CCVL / Fixed-CCVL).
demo: $(STAMP)
	$(PY) binaries/train_offline.py --game=Breakout --root_dir=runs/breakout_demo

# The suite on TEST_WORKERS pytest-xdist workers (worksteal: a worker that runs out takes
# tests from the other's queue). Every test is independent of order and worker count;
# TEST_WORKERS=0 runs it in this one process.
TEST_WORKERS ?= 2
test: $(STAMP)
	$(PY) -m pytest tests -n $(TEST_WORKERS) --dist worksteal

# The edit-test loop: the tests not marked slow (no end-to-end binary runs, trainings of
# more than a few seconds, fine-tuning): a few minutes. CI runs the full `make test`.
test-fast: $(STAMP)
	$(PY) -m pytest tests -m "not slow" -n $(TEST_WORKERS) --dist worksteal

bench: $(STAMP)
	$(PY) binaries/benchmark.py --output=results/benchmark.json

gridworld: $(STAMP)
	$(PY) binaries/gridworld.py --output_dir=results/gridworld

# The MinAtar method table (Table 2 at CPU scale) at the budget chosen in docs/minatar_budget.md:
# the five datasets are built once (~25-45 min), then every method is trained and evaluated
# (about 3 hours on 2 cores, estimated; a rerun skips finished runs and resumes a training).
minatar-table: $(STAMP)
	$(PY) binaries/make_minatar_datasets.py --output_dir=data/minatar
	$(PY) binaries/compare.py --suite=minatar --data_dir=data/minatar --seeds=3 --workers=2 \
	    --methods=REM,CQL,AEVL,Fixed-CCVL,CCVL,BC,DQN --datasets=1%,5% \
	    --num_steps=20000 --learning_rate=1e-3 --output_dir=results/minatar_table

# Re-resolve the lock from requirements.in (direct dependencies) in a scratch venv.
lock:
	rm -rf /tmp/ccvl-lock && $(PYTHON) -m venv /tmp/ccvl-lock
	/tmp/ccvl-lock/bin/pip install -q -r requirements.in
	{ grep '^#' requirements.txt; /tmp/ccvl-lock/bin/pip freeze; } > requirements.txt.new && mv requirements.txt.new requirements.txt

clean-venv:
	rm -rf $(VENV)
