# Breakpoint Manager: `make run` serves the whole system, `make test` runs the suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# Local development defaults; production sets DEBUG=0 and a real SECRET_KEY.
RUN_ENV := DEBUG=$${DEBUG:-1}
# The suite runs with DEBUG off, as in production; the key is for tests only.
TEST_ENV := DEBUG=0 SECRET_KEY=$${SECRET_KEY:-insecure-test-only-key}

.PHONY: install run web migrate test lint format schema clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

migrate: install
	$(RUN_ENV) $(BIN)/python manage.py migrate --noinput

# The whole system: web, Celery worker and beat (embedded broker unless REDIS_URL is set).
run: migrate
	PATH="$(CURDIR)/$(BIN):$$PATH" $(RUN_ENV) $(BIN)/honcho -f Procfile.dev start

# Only the web process, for working on the API or console.
web: migrate
	$(RUN_ENV) $(BIN)/python manage.py runserver 127.0.0.1:8000

test: install
	$(TEST_ENV) $(BIN)/python -m pytest $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(TEST_ENV) $(BIN)/mypy
	$(TEST_ENV) $(BIN)/python manage.py makemigrations --check --dry-run
	$(TEST_ENV) $(BIN)/python manage.py spectacular --validate --fail-on-warn --file /dev/null

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

schema: install
	$(TEST_ENV) $(BIN)/python manage.py spectacular --validate --file schema.yml

clean:
	rm -rf $(VENV) db.sqlite3 var staticfiles .pytest_cache
