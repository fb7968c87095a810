# Breakpoint Manager: `make run` serves the whole system, `make test` runs the suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
UV := $(BIN)/uv
# What `make run` needs (the project and the agent client, bpm), then the dev tools, the
# MCP SDK and the agent frameworks of bpm_client's adapters on top (tests, linters, docs,
# bpm mcp): two steps, so that a first `make run` installs (and compiles) only the first.
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev
# uv (from PyPI) installs in seconds what pip took minutes for; it compiles the bytecode
# as pip does (a process started with PYTHONDONTWRITEBYTECODE would compile it every time)
# and trusts the system's certificates (a proxy's CA), as pip does with its `cert`.
UV_INSTALL := $(UV) pip install --python $(BIN)/python --compile-bytecode --system-certs
# uv reads its own index settings (UV_DEFAULT_INDEX, UV_INDEX), not pip's; pip's index
# variable is passed on.
ifdef PIP_INDEX_URL
export UV_DEFAULT_INDEX ?= $(PIP_INDEX_URL)
endif

# Local development defaults; production sets DEBUG=0 and a real SECRET_KEY.
RUN_ENV := DEBUG=$${DEBUG:-1}
# The suite runs with DEBUG off, as in production; the key is for tests only.
TEST_ENV := DEBUG=0 SECRET_KEY=$${SECRET_KEY:-insecure-test-only-key}
# Where `make docs-serve` serves the guides: not BPM_PORT (`make run` may be serving there)
# nor the free port above it that a taken BPM_PORT suggests (8001, in the README).
DOCS_PORT ?= 8765

.PHONY: help install run web ports migrate test test-fast lint docs docs-serve format schema typescript-types image clean

# `make help` lists every target that has a `## text` comment on its line.
help: ## List the targets, one line each
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  make %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# The virtualenv and uv in it: the system's pip installs uv into a virtualenv made without
# pip (faster), or, where that pip is too old for --python, the virtualenv's own pip does.
# Made when an install step finds no uv (a virtualenv made before uv was used included).
$(UV):
	@echo "install: creating $(VENV) with uv in it (the installer, from PyPI)"
	@$(PYTHON) -m venv --without-pip $(VENV)
	@$(PYTHON) -m pip --python $(BIN)/python install --quiet "uv>=0.13" 2>/dev/null || \
		{ $(BIN)/python -m ensurepip --default-pip >/dev/null && \
		  $(BIN)/python -m pip install --quiet "uv>=0.13"; }

$(STAMP): pyproject.toml clients/python/pyproject.toml
	@test -x $(UV) || $(MAKE) --no-print-directory $(UV)
	@echo "install: the project and the agent client (bpm) into $(VENV)"
	$(UV_INSTALL) -e . -e ./clients/python
	@touch $(STAMP)

$(DEV_STAMP): $(STAMP)
	@test -x $(UV) || $(MAKE) --no-print-directory $(UV)
	@echo "install: the dev tools (tests, linters, docs), the MCP SDK and the agent frameworks into $(VENV)"
	$(UV_INSTALL) -e ".[dev]" -e "./clients/python[mcp,watch,langgraph,openai-agents]"
	@touch $(DEV_STAMP)

install: $(DEV_STAMP) ## Create .venv and install the project and its dev tools

# The port make run and make web serve on (BPM_PORT, 8000 by default) checked first: one
# line naming BPM_PORT when it is taken, before anything is installed or started.
ports: ## Check that BPM_PORT (8000 unless set) is free, or say so in one line
	@$(PYTHON) devtools/ports.py

# A PostgreSQL DATABASE_URL naming a database that does not exist: created when the server
# allows, else one line that says what to do (no DATABASE_URL: SQLite, nothing to check).
# devtools/migrate.py prints one line for all the migrations applied (all of migrate's
# output when it fails); `manage.py migrate` itself lists them one by one.
migrate: $(STAMP) ## Apply the database migrations (creating a missing PostgreSQL database)
	@test -z "$$DATABASE_URL" || $(BIN)/python -m devtools.database
	@$(RUN_ENV) $(BIN)/python -m devtools.migrate $(BIN)/python manage.py migrate --noinput

# The whole system: web, Celery worker and beat (embedded broker unless REDIS_URL is set).
# devtools/supervisor.py runs Procfile.dev and stops all of it on Ctrl-C, SIGTERM or SIGHUP;
# exec, so that a SIGTERM to make reaches it.
run: ports migrate ## Serve the whole system (web, worker, beat) on http://127.0.0.1:8000 (or BPM_PORT)
	@exec env $(RUN_ENV) $(BIN)/python -m devtools.supervisor Procfile.dev

# Only the web process, for working on the API or console: Procfile.dev's web line, run by
# the same supervisor.
web: ports migrate ## Serve only the web process (on BPM_PORT, 8000 by default)
	exec env $(RUN_ENV) $(BIN)/python -m devtools.supervisor Procfile.dev web

# The suite runs on every core (pytest-xdist): TEST_WORKERS processes, `auto` one per core,
# 0 for one process (a single test under a debugger). Each worker has its own test database
# and Redis number (tests/support/workers.py); a test file stays on one worker, so the
# system its live tests share is started once. (One worker more than cores made the live
# tests' timing-sensitive faults flaky on two cores.)
TEST_WORKERS ?= auto
PYTEST := $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile

test: install ## Run the test suite on every core (PYTEST_ARGS=..., TEST_WORKERS=0 for one process)
	$(TEST_ENV) $(PYTEST) $(PYTEST_ARGS)

# For daily work: every test but those under tests/live/ (they start servers, workers,
# browsers; marked slow by their path in tests/conftest.py).
test-fast: install ## Run the suite without the tests that start processes (tests/live/)
	$(TEST_ENV) $(PYTEST) -m "not slow" $(PYTEST_ARGS)

lint: install docs ## ruff, mypy, import layers, migrations, OpenAPI, the docs build
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(TEST_ENV) $(BIN)/mypy
	$(BIN)/lint-imports --no-cache --no-logo
	$(TEST_ENV) $(BIN)/python manage.py makemigrations --check --dry-run
	$(TEST_ENV) $(BIN)/python manage.py spectacular --validate --fail-on-warn --file /dev/null

# The guides (docs/, mkdocs.yml) built with --strict: a broken link or anchor fails.
# The site goes to a temporary folder, removed afterwards (nothing to commit).
docs: install ## Build the guides in docs/ with mkdocs --strict (into a temporary folder)
	@site=$$(mktemp -d) && $(BIN)/mkdocs build --strict --quiet --site-dir "$$site"; \
		status=$$?; rm -rf "$$site"; exit $$status

docs-serve: install ## Serve the guides as you edit them, on http://127.0.0.1:8765 (DOCS_PORT=...)
	$(BIN)/mkdocs serve --dev-addr 127.0.0.1:$(DOCS_PORT)

format: install ## Fix what ruff can and format the code
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

schema: install ## Write the OpenAPI schema to schema.yml
	$(TEST_ENV) $(BIN)/python manage.py spectacular --validate --file schema.yml

# The TypeScript SDK's types, generated from that schema by openapi-typescript (pinned in
# clients/typescript's lockfile; `npm ci` there when missing). Commit the result: a test in
# `make test` (tests/clients/test_typescript_types.py) fails while it differs.
typescript-types: install ## Regenerate the TypeScript SDK's API types (clients/typescript/src/schema.ts)
	$(TEST_ENV) $(BIN)/python -m devtools.typescript_types

# Benchmarks print figures (never part of `make test`). DATABASE_URL defaults to the
# PostgreSQL database bpm_bench on 127.0.0.1; seed.py refuses a database whose name lacks
# "bench", creates it when missing, migrates it and seeds BENCH_COUNT rows once
# (BENCH_SEED_ARGS=--reset seeds again). make_run_timing.py times a cold and a warm
# `make run` in a fresh clone of HEAD (SQLite, its own port, empty uv and pip caches).
BENCH_COUNT ?= 1000000
BENCH_DATABASE_URL := postgres://postgres@127.0.0.1:5432/bpm_bench
BENCH_COMMON_ENV := DEBUG=0 SECRET_KEY=$${SECRET_KEY:-insecure-benchmark-only-key} REDIS_URL=$${REDIS_URL:-redis://127.0.0.1:6379/0} BPM_THROTTLE_TOKEN_RATE=$${BPM_THROTTLE_TOKEN_RATE:-off} BPM_THROTTLE_ANON_RATE=$${BPM_THROTTLE_ANON_RATE:-off}
BENCH_ENV := $(BENCH_COMMON_ENV) DATABASE_URL=$${DATABASE_URL:-$(BENCH_DATABASE_URL)}

.PHONY: bench bench-smoke
bench: install ## Seed a PostgreSQL bench database and print the benchmarks' figures
	$(BENCH_ENV) $(BIN)/python benchmarks/seed.py --count $(BENCH_COUNT) $(BENCH_SEED_ARGS)
	$(BENCH_ENV) $(BIN)/python benchmarks/api_hot_paths.py $(BENCH_ARGS)
	$(BENCH_ENV) $(BIN)/python benchmarks/http_bench.py $(BENCH_HTTP_ARGS)
	$(BENCH_ENV) $(BIN)/python benchmarks/lists_at_scale.py $(BENCH_SCALE_ARGS)
	$(BENCH_ENV) $(BIN)/python benchmarks/rule_replay.py $(BENCH_REPLAY_ARGS)
	$(BENCH_ENV) $(BIN)/python benchmarks/render_bench.py --use-database-url $(BENCH_RENDER_ARGS)
	$(BENCH_ENV) $(BIN)/python benchmarks/slow_receiver.py $(BENCH_SLOW_RECEIVER_ARGS)
	$(BENCH_ENV) $(BIN)/python benchmarks/login_flood.py $(BENCH_LOGIN_FLOOD_ARGS)
	$(BENCH_ENV) $(BIN)/python benchmarks/broker_down_create.py $(BENCH_BROKER_DOWN_ARGS)
	$(BIN)/python benchmarks/make_run_timing.py $(BENCH_MAKE_RUN_ARGS)

# The same scripts in a tiny mode (a few thousand rows, well under two minutes), so a
# schema change cannot break the benchmarks unnoticed: `.ci/run` runs it. It has its own
# database (not DATABASE_URL, which CI points at the suite's), created when missing and
# reseeded (--reset) every time; its figures mean nothing at this size.
BENCH_SMOKE_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/bpm_bench_smoke
BENCH_SMOKE_ENV := $(BENCH_COMMON_ENV) DATABASE_URL=$(BENCH_SMOKE_DATABASE_URL)

bench-smoke: install ## The benchmarks in a tiny mode (CI runs it)
	$(BENCH_SMOKE_ENV) $(BIN)/python benchmarks/seed.py --count 3000 --batch 1000 --reset
	$(BENCH_SMOKE_ENV) $(BIN)/python benchmarks/api_hot_paths.py --poll-iterations 50 \
		--iterations 3 --sample 1
	$(BENCH_SMOKE_ENV) $(BIN)/python benchmarks/http_bench.py --seconds 1 --warmup 0 \
		--connections 4 --client-procs 1 --workers 1 --sync-workers 1 --wsgi-workers 1 \
		--wsgi-threads 2 --pool-max 2 --poll-rows 50 --wakes 5 --waiters 10 --capacity 50 \
		--capacity-timeout 30 --probes 5 --list-seconds 0.5 --write-rows 300
	$(BENCH_SMOKE_ENV) $(BIN)/python benchmarks/lists_at_scale.py --due 200 --creates 10 \
		--iterations 3 --case-seconds 2
	$(BENCH_SMOKE_ENV) $(BIN)/python benchmarks/rule_replay.py --iterations 1

# The container image (Dockerfile; docs/deploy.md), with docker or podman, whichever works
# here. Its base, debian:bookworm-slim, is pulled, or made with debootstrap where no
# registry answers (deploy/debian-base.sh, as root).
IMAGE ?= breakpoint-manager:latest

image: ## Build the container image (docker or podman; IMAGE=name:tag)
	deploy/build-image.sh $(IMAGE)

clean: ## Remove .venv, the SQLite database, var/ and collected static files
	rm -rf $(VENV) db.sqlite3 var staticfiles .pytest_cache
