# Two commands: `make run` and `make test`. Both create .venv on first use, from the lock.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PIP    := $(BIN)/python -m pip --disable-pip-version-check
LOCKS  := requirements-build.lock requirements.lock

.PHONY: run test lint screenshots bench mutants lock lock-check clean

# Exactly the locked versions, every file checked against its hash. The sdists in the lock
# (llama-cpp-python) build with the locked build tools, not with whatever an isolated build
# would fetch today. A changed lock makes a new venv: nothing unlocked is left over.
$(STAMP): $(LOCKS) pyproject.toml
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --require-hashes --no-deps -r requirements-build.lock
	$(PIP) install --quiet --require-hashes --no-deps --no-build-isolation -r requirements.lock
	$(PIP) install --quiet --no-deps --no-build-isolation -e .
	$(PIP) check
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/steer $(ARGS)

test: $(STAMP)
	$(BIN)/ruff check app tests
	$(BIN)/lint-imports
	$(BIN)/mypy app
	$(BIN)/pytest -q $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check app tests

screenshots: $(STAMP)
	$(BIN)/python -m app.bench.screenshots screenshots
	STEER_WRITE_SCREENSHOTS=1 $(BIN)/pytest -q tests/test_web.py -k browser_tab

bench: $(STAMP)
	$(BIN)/steer bench engine
	$(BIN)/steer bench run

# A mutation score per room of core (app/bench/mutants.py; not part of `make test`: it takes
# long). `make mutants ROOMS="parser lookup"` runs some rooms: parser edits disk review lookup check.
mutants: $(STAMP)
	$(BIN)/python -m app.bench.mutants $(ROOMS)

# Refresh the locks from pyproject.toml: keeps today's pins where they still fit; `make lock
# UPGRADE=1` takes the newest releases the bounds allow. Then `make lock-check`.
LOCKVENV := .venv-lock
COMPILE  := $(LOCKVENV)/bin/pip-compile --quiet --generate-hashes --allow-unsafe --strip-extras \
            --no-emit-index-url --no-emit-find-links $(if $(UPGRADE),--upgrade)
lock:
	test -x $(LOCKVENV)/bin/pip-compile || ($(PYTHON) -m venv $(LOCKVENV) && \
	    $(LOCKVENV)/bin/pip install --quiet pip-tools==7.6.2)
	$(COMPILE) --extra dev -o requirements.lock pyproject.toml
	printf 'scikit-build-core\nsetuptools\nwheel\n' | $(COMPILE) -o requirements-build.lock -

# The lock in a throwaway copy: a new venv, an empty pip cache, then exactly the lock
# installed, and the embedded model loading and generating (steer doctor).
# LOCK_CHECK_TESTS=1 runs the whole suite there too.
lock-check:
	.ci/lock-check

clean:
	rm -rf $(VENV) $(LOCKVENV) .pytest_cache
