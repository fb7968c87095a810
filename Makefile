# Breakpoint Manager: `make run` serves the whole system, `make test` runs the suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# Local development defaults; production sets DEBUG=0 and a real SECRET_KEY.
RUN_ENV := DEBUG=$${DEBUG:-1}
# The suite runs with DEBUG off, as in production; the key is for tests only.
TEST_ENV := DEBUG=0 SECRET_KEY=$${SECRET_KEY:-insecure-test-only-key}

.PHONY: help install run web migrate test test-fast lint docs format schema image clean

# `make help` lists every target that has a `## text` comment on its line.
help: ## List the targets, one line each
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  make %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(STAMP): pyproject.toml clients/python/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]" -e "./clients/python[mcp]"
	touch $(STAMP)

install: $(STAMP) ## Create .venv and install the project and its dev tools

# A PostgreSQL DATABASE_URL naming a database that does not exist: created when the server
# allows, else one line that says what to do.
migrate: install ## Apply the database migrations (creating a missing PostgreSQL database)
	@$(BIN)/python -m config.database
	$(RUN_ENV) $(BIN)/python manage.py migrate --noinput

# The whole system: web, Celery worker and beat (embedded broker unless REDIS_URL is set).
# config/supervisor.py runs Procfile.dev and stops all of it on Ctrl-C, SIGTERM or SIGHUP;
# exec, so that a SIGTERM to make reaches it.
run: migrate ## Serve the whole system (web, worker, beat) on http://127.0.0.1:8000
	exec env $(RUN_ENV) $(BIN)/python -m config.supervisor Procfile.dev

# Only the web process, for working on the API or console.
web: migrate ## Serve only the web process (port 8000)
	$(RUN_ENV) $(BIN)/uvicorn config.asgi:application --host 127.0.0.1 --port 8000 --no-proxy-headers

test: install ## Run the test suite (PYTEST_ARGS=... passes arguments to pytest)
	$(TEST_ENV) $(BIN)/python -m pytest $(PYTEST_ARGS)

# For daily work: every test but those under tests/live/ (they start servers, workers,
# browsers; marked slow by their path in tests/conftest.py).
test-fast: install ## Run the suite without the tests that start processes (tests/live/)
	$(TEST_ENV) $(BIN)/python -m pytest -m "not slow" $(PYTEST_ARGS)

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

format: install ## Fix what ruff can and format the code
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

schema: install ## Write the OpenAPI schema to schema.yml
	$(TEST_ENV) $(BIN)/python manage.py spectacular --validate --file schema.yml

# Benchmarks print figures (never part of `make test`). DATABASE_URL defaults to the
# PostgreSQL database bpm_bench on 127.0.0.1; seed.py refuses a database whose name lacks
# "bench", creates it when missing, migrates it and seeds BENCH_COUNT rows once
# (BENCH_SEED_ARGS=--reset seeds again).
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
	$(BENCH_ENV) $(BIN)/python benchmarks/render_bench.py --use-database-url $(BENCH_RENDER_ARGS)
	$(BENCH_ENV) $(BIN)/python benchmarks/slow_receiver.py $(BENCH_SLOW_RECEIVER_ARGS)

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
		--capacity-timeout 30 --probes 5 --list-seconds 0.5
	$(BENCH_SMOKE_ENV) $(BIN)/python benchmarks/lists_at_scale.py --due 200 --creates 10 \
		--iterations 3 --case-seconds 2

# The container image (Dockerfile; docs/deploy.md), with docker or podman, whichever works
# here. Its base, debian:bookworm-slim, is pulled, or made with debootstrap where no
# registry answers (deploy/debian-base.sh, as root).
IMAGE ?= breakpoint-manager:latest

image: ## Build the container image (docker or podman; IMAGE=name:tag)
	deploy/build-image.sh $(IMAGE)

clean: ## Remove .venv, the SQLite database, var/ and collected static files
	rm -rf $(VENV) db.sqlite3 var staticfiles .pytest_cache
