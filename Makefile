# Two entry points for a fresh machine: `make run` and `make test`.
# Each creates the virtualenv on its own the first time (or when requirements change).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

CHROMIUM := /usr/bin/chromium

.PHONY: run test lint validate clean bytecode browser tokenizer datasette mcp-servers spark FORCE

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	# The app itself, editable: puts the `dashmem` command in the venv (the package `dashmem`, which is lib/ of this
	# checkout, so it keeps the checkout's .data/ and workspaces/); the app and tests import lib/ as `lib`.
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	# ... and this checkout on the venv's path, so `python -m lib` works from any folder, as cron and the tests run it.
	echo "$(CURDIR)" > "$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/dashmem-checkout.pth"
	touch $(STAMP)

# The checkout's own modules as bytecode, as pip leaves an installed package. Python writes it on first import unless
# PYTHONDONTWRITEBYTECODE is set (as on this kind of machine and in many container images); then every process (each CLI
# run, each query worker) compiled lib/ anew from source: 0.2 s of a 0.3 s `python -m lib refresh` at 10k rows.
# Only what changed is compiled again.
bytecode: $(STAMP)
	@$(PY) -m compileall -q -j0 lib app_pages app.py

run: $(STAMP) bytecode .streamlit/secrets.toml
	$(PY) -m streamlit run app.py --server.headless true

# A random cookie key for this machine's sign-in cookies; never committed.
.streamlit/secrets.toml:
	mkdir -p .streamlit
	printf '[auth]\ncookie_key = "%s"\n' "$$($(PYTHON) -c 'import secrets; print(secrets.token_urlsafe(48))')" > $@

# The browser tests drive Debian's chromium (Playwright cannot download browsers here).
# As root this installs it; otherwise those tests skip and say why.
browser:
	@if [ ! -x $(CHROMIUM) ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
		|| echo "warning: could not install chromium; browser tests will skip"; fi

# The legacy Claude tokenizer Anthropic publishes on npm, for the tests that check token budgets in
# real tokens (tests/core/test_tokens.py). Not committed; without npm those tests skip and say why.
TOKENIZER := .data/tokenizer/claude.json
tokenizer:
	@if [ ! -s $(TOKENIZER) ] && command -v npm >/dev/null; then \
		tmp=$$(mktemp -d) && (cd $$tmp && npm pack --silent @anthropic-ai/tokenizer@0.0.4 >/dev/null) \
		&& tar -xzf $$tmp/anthropic-ai-tokenizer-0.0.4.tgz -C $$tmp package/claude.json \
		&& mkdir -p $$(dirname $(TOKENIZER)) && mv $$tmp/package/claude.json $(TOKENIZER); \
		rm -rf $$tmp; [ -s $(TOKENIZER) ] || echo "warning: could not fetch the tokenizer; the real-token tests will skip"; fi

# datasette, a REST JSON API over SQLite nobody here wrote, for the REST connector's tests (tests/data/test_rest_datasette.py):
# from PyPI into a venv of its own, being no dependency of the app. Without it those tests skip and say so.
DATASETTE := .data/thirdparty/datasette
datasette:
	@if [ ! -x $(DATASETTE)/bin/datasette ]; then \
		($(PYTHON) -m venv $(DATASETTE) && $(DATASETTE)/bin/pip install --quiet --disable-pip-version-check 'datasette>=0.65,<0.66') \
		|| { rm -rf $(DATASETTE); echo "warning: could not install datasette; the REST tests against it will skip"; }; fi

# Third-party MCP servers from PyPI, each in a venv of its own under .data/thirdparty/ (two need mcp 1.x; the project's
# venv keeps its own), which tests/data/test_mcp_servers.py starts and reads a real table through. The stamp holds the pins
# a venv was made with, so changing them makes it again; one that cannot be installed warns, and its tests skip saying so.
THIRDPARTY := .data/thirdparty
MCP_SERVERS := mcp-server-sqlite mcp-server-motherduck mcp-alchemy mcp-server-duckdb
PINS_mcp-server-sqlite := 'mcp-server-sqlite>=2025.4.25,<2026' 'mcp>=1.2,<2'
PINS_mcp-server-motherduck := 'mcp-server-motherduck>=1.1,<2'
PINS_mcp-alchemy := 'mcp-alchemy>=2026.10,<2027' 'psycopg2-binary>=2.9,<3'
PINS_mcp-server-duckdb := 'mcp-server-duckdb>=1.1,<2' 'mcp>=1.2,<2'
mcp-servers: $(MCP_SERVERS:%=$(THIRDPARTY)/%/.installed)
$(THIRDPARTY)/%/.installed: FORCE
	@if [ "$$(cat $@ 2>/dev/null)" != "$(PINS_$*)" ]; then \
		rm -rf $(THIRDPARTY)/$* && $(PYTHON) -m venv $(THIRDPARTY)/$* \
		&& $(THIRDPARTY)/$*/bin/pip install --quiet --disable-pip-version-check $(PINS_$*) \
		&& echo "$(PINS_$*)" > $@ || echo "warning: could not install $*; its tests will skip"; fi

# Apache Spark for the tests of Spark sources (tests/data/test_spark.py, tests/helpers/spark.py): Java 17 from Debian where
# it is missing (as root, as for Chromium), and the Spark Connect server, the full `pyspark`, in a venv of its own: the
# app's venv holds the thin `pyspark-client` (requirements.txt), and both provide the module `pyspark`, so never share
# one. Only the server's jars and scripts are used (--no-deps). Without either, those tests skip and say why.
SPARK := $(THIRDPARTY)/spark
PINS_spark := 'pyspark>=4.2,<5'
spark:
	@if ! command -v java >/dev/null && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null) \
		|| echo "warning: could not install Java; the Spark tests will skip"; fi
	@if [ "$$(cat $(SPARK)/.installed 2>/dev/null)" != "$(PINS_spark)" ]; then \
		rm -rf $(SPARK) && $(PYTHON) -m venv $(SPARK) \
		&& $(SPARK)/bin/pip install --quiet --disable-pip-version-check --no-deps $(PINS_spark) \
		&& echo "$(PINS_spark)" > $(SPARK)/.installed || echo "warning: could not install pyspark; the Spark tests will skip"; fi

# Four workers (pytest-xdist) on the CI machine's two cores: much of the suite waits on subprocesses, servers and a
# browser, so the extra workers fill the waits (docs/contributing.md); each has its own databases on the local servers
# (tests/helpers/databases.py). A worker that dies (a crash) ends the run at once (--max-worker-restart 0) rather than
# leaving the scheduler waiting for it. The tests of a module that share a module-scoped fixture (a `streamlit run`, a big
# table) run on one worker (--dist loadgroup; tests/conftest.py groups them). Each test is stopped after pytest.ini's timeout.
# The tests' processes write bytecode (PYTHONDONTWRITEBYTECODE emptied), so pytest keeps its rewritten test modules and
# the hundreds of processes the suite starts do not each compile lib/ again: about a sixth of tests/cli's CPU.
test: $(STAMP) bytecode browser tokenizer datasette mcp-servers spark
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -n 4 --dist loadgroup --max-worker-restart 0 --durations=25

# Bugs rather than taste (pyproject.toml [tool.ruff]): pyflakes, bugbear, sorted imports;
# then types (pyproject.toml [tool.basedpyright]): lib/, app_pages/, app.py, tests/, bench/ and scripts/, all in pyright's standard mode;
# then the wings of lib/ (.importlinter): each imports only the ones below it, and no circles.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/basedpyright
	$(VENV)/bin/lint-imports

validate: $(STAMP)
	$(PY) -m lib validate workspaces/

clean:
	rm -rf $(VENV) .data .pytest_cache
