# preflab: the README's two commands are `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The CPU build of torch 2.13.0 lies on local disk on the project's machines.
PIP_LINKS := $(if $(wildcard /opt/wheels),--find-links /opt/wheels,)

.PHONY: install consumers demo test test-fast bench schemas lint typecheck clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(PIP_LINKS) -e ".[dev,postgres,train,scale]"
	touch $@

PORT ?= 8000
HOST ?= 127.0.0.1

demo: install  ## the main job on the embedded SQLite default, then the web app (make demo PORT=8100; Ctrl+C stops it)
	$(BIN)/preflab demo --dir demo-output --serve --host $(HOST) --port $(PORT)

consumers: install  ## verl 0.9.1 + OpenRLHF 0.11.2 (--no-deps) in .consumers/, for tests/consumers
	scripts/consumer-env.sh $(BIN)/python

# pytest-xdist workers (`auto`: one per core; 0: no xdist). Files go whole to one worker
# (--dist loadfile): module-scoped servers and databases are built once per file.
PYTEST_XDIST ?= auto
XDIST := -n $(PYTEST_XDIST) --dist loadfile

test: install consumers  ## the whole suite, SQLite and a throwaway PostgreSQL, in parallel
	PATH="$(abspath $(BIN)):$$PATH" scripts/with-postgres.sh $(BIN)/python -m pytest $(XDIST) $(PYTEST_ARGS)

test-fast: install consumers  ## the inner loop on SQLite: no `slow` (servers under load, races, browsers), `train` or PostgreSQL-parametrized tests
	PATH="$(abspath $(BIN)):$$PATH" scripts/with-postgres.sh $(BIN)/python -m pytest $(XDIST) -m "not train and not slow and not postgres" $(PYTEST_ARGS)

bench: install  ## every benchmark, figures printed
	$(BIN)/python benchmarks/run_all.py

lint: install  ## ruff (rules and formatting) over the code, tests, benchmarks and scripts; mypy
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/ruff format --check src tests benchmarks scripts
	$(MAKE) typecheck

typecheck: install  ## mypy: strict on schema, quality and store ([tool.mypy] in pyproject.toml)
	$(BIN)/mypy

schemas: install  ## regenerate schemas/*.schema.json from the pydantic models
	$(BIN)/preflab schema export --out schemas

clean:
	rm -rf $(VENV) demo-output .pytest_cache .consumers
