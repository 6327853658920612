# Two entry points for a fresh machine: `make run` and `make test`.
# Each creates the virtualenv on its own the first time (or when requirements change).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: run test validate clean

$(STAMP): requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $(STAMP)

run: $(STAMP)
	$(PY) -m streamlit run app.py --server.headless true

test: $(STAMP)
	$(PY) -m pytest -q

validate: $(STAMP)
	$(PY) -m lib validate workspaces/

clean:
	rm -rf $(VENV) .data .pytest_cache
