# make test: create the virtualenv if missing, install what the tests need, run the whole suite.
# make demo has a virtualenv of its own with toolwire's core dependencies and the mcp extra (its mcp_notes scenario
# starts a real MCP server), no test dependencies.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEMO_VENV ?= .venv-demo
DEMO_STAMP := $(DEMO_VENV)/.installed

.PHONY: test demo demo-workers fuzz bench install clean

# $(call venv,DIR,REQUIREMENT): create the virtualenv DIR (installing python3-venv with apt if venv fails), install
# REQUIREMENT (editable) into it, and mark it done with DIR/.installed
define venv
	@$(PYTHON) -m venv $(1) 2>/dev/null || { \
	  echo "python3 -m venv failed; installing python3-venv with apt"; \
	  apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null && $(PYTHON) -m venv $(1); }
	$(1)/bin/python -m pip install -q --upgrade pip
	$(1)/bin/python -m pip install -q -e '$(2)'
	@touch $(1)/.installed
endef

$(STAMP): pyproject.toml
	$(call venv,$(VENV),.[dev])

$(DEMO_STAMP): pyproject.toml
	$(call venv,$(DEMO_VENV),.[mcp])

install: $(STAMP)

# the PostgreSQL ledger's tests start a private server from the PostgreSQL binaries (installed with apt if missing;
# TOOLWIRE_SKIP_POSTGRES=1 skips those tests instead, TOOLWIRE_PG_DSN=... uses an existing server)
test: $(STAMP)
	@command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
	  (apt-get update -qq && apt-get install -y -qq postgresql >/dev/null)
	HYPOTHESIS_PROFILE=ci $(PY) -m pytest -q -n 2 -p no:cacheprovider

# make demo: the scenarios, for every dialect, against the built-in simulated provider over real HTTP (in
# $(DEMO_VENV), which holds toolwire, its core dependencies and the mcp extra)
demo: $(DEMO_STAMP)
	$(DEMO_VENV)/bin/toolwire demo

# make demo-workers [WORKERS=4] [KILL_EVERY=1]: the same conversations as durable DBOS workflows on WORKERS worker
# processes sharing a private PostgreSQL cluster (started on loopback for the run, stopped afterwards; PostgreSQL
# is installed with apt if missing), with a killer that SIGKILLs and restarts workers every ~KILL_EVERY seconds.
WORKERS ?= 4
KILL_EVERY ?= 1
demo-workers: $(STAMP)
	@command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
	  (apt-get update -qq && apt-get install -y -qq postgresql >/dev/null)
	$(PY) -m tests.with_postgres $(VENV)/bin/toolwire demo --workers $(WORKERS) --database '{dsn}' \
	  --kill-every $(KILL_EVERY)

# make fuzz [FUZZ_SECONDS=600] [FUZZ_ARGS=...]: the deep hypothesis profile of the suite, then the mutation fuzzer
# (python -m fuzz; reproducers go to fuzz/findings/, replay one with python -m fuzz --replay FILE).
FUZZ_SECONDS ?= 600
FUZZ_ARGS ?=
fuzz: $(STAMP)
	HYPOTHESIS_PROFILE=deep $(PY) -m pytest -q -n 2 -p no:cacheprovider tests
	$(PY) -m fuzz --seconds $(FUZZ_SECONDS) $(FUZZ_ARGS)

# make bench [BENCH_ARGS=--quick]: toolwire against a msgspec floor and the official SDKs (ratios; see bench/README.md).
# Not part of make test. google-genai (the Gemini peer) is installed if missing; without it that peer is skipped.
BENCH_ARGS ?=
bench: $(STAMP)
	@$(PY) -c 'import google.genai' 2>/dev/null || $(PY) -m pip install -q google-genai || echo "bench: google-genai not installed; the gemini peer is skipped"
	$(PY) -m bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) $(DEMO_VENV) .pytest_cache .hypothesis build *.egg-info
