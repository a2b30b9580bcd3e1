# Two commands: `make run` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test lint screenshots bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/steer $(ARGS)

test: $(STAMP)
	$(BIN)/ruff check app tests
	$(BIN)/lint-imports
	$(BIN)/pytest -q $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check app tests

screenshots: $(STAMP)
	$(BIN)/python -m app.bench.screenshots screenshots

bench: $(STAMP)
	$(BIN)/steer bench engine
	$(BIN)/steer bench run

clean:
	rm -rf $(VENV) .pytest_cache
