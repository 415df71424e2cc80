# Two commands do everything on a fresh machine: `make run` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export DAGSTER_HOME := $(CURDIR)/.dagster_home
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: install run test ui clean browser

install: $(STAMP)

# torch first: any other route to torch pulls the CUDA build and gigabytes with it.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

$(DAGSTER_HOME):
	mkdir -p $(DAGSTER_HOME)
	touch $(DAGSTER_HOME)/dagster.yaml

run: $(STAMP) $(DAGSTER_HOME)
	$(VENV)/bin/rag-eval run

# Browser tests use Debian's Chromium (never a browser download); installed here when missing and we are root.
browser:
	@if [ ! -x /usr/bin/chromium ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; fi

test: $(STAMP) $(DAGSTER_HOME) browser
	$(PY) -m pytest

ui: $(STAMP) $(DAGSTER_HOME)
	$(VENV)/bin/dagster dev -w workspace.yaml -h 127.0.0.1 -p 3000

clean:
	rm -rf $(VENV) $(DAGSTER_HOME) data/assets data/runs data/cache data/frozen
