# Two entry points, both self-contained on a machine with only Python 3.11:
#   make run   - the main job, step by step: list the built-in tools and run calls over
#                this directory (examples/demo.sh; examples/README.md)
#   make test  - the whole test suite (`make check`: ruff and mypy, as CI runs them;
#                `make test-raced`: the tests that once raced, repeated under CPU load)
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run test test-raced check venv clean fuzz fuzz-ci prerequisites

$(BIN)/toolbridge: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

venv: $(BIN)/toolbridge

# Each step says what it shows; the model responses in examples/ are hand-written.
run: venv
	@sh examples/demo.sh $(BIN)/toolbridge

check: venv
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy --strict src

# OS packages and the MCP test servers the tests use for real (apt-get when root).
prerequisites:
	@bash .ci/prerequisites

# pytest exits 5 when it collected no test: that must fail, not pass silently. The suite runs
# in TEST_WORKERS pytest-xdist workers, one per core (one test after another, it leaves a
# core idle while it waits for real processes and servers to start); tests sharing one
# costly runtime stay in one worker (tests/conftest.py). TEST_WORKERS=0: in this process.
# Bytecode is written even where PYTHONDONTWRITEBYTECODE is set (into the git-ignored
# __pycache__/ folders): the suite starts hundreds of Python processes (the CLI, MCP
# servers, guide pages, Ray workers), and without .pyc files each one compiled the
# package's sources again (0.25 s of CPU of a 0.75 s `toolbridge tools`), and each worker
# rewrote every test module's asserts again.
TEST_WORKERS ?= 2
test: venv prerequisites
	@env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup; status=$$?; \
	if [ $$status -eq 5 ]; then echo "no tests ran" >&2; exit 1; fi; exit $$status

# The tests that once raced, 3 times in a row beside a CPU burner on every core (.ci/raced;
# CI runs it after `make test`): a timing race put back into them fails here.
test-raced: venv prerequisites
	@VENV=$(VENV) bash .ci/raced

# The fuzz suite on its own with CI's budget (tests/fuzz/conftest.py): 300 examples per
# target, about a minute of CPU; .ci/run runs it after `make test`, which runs the same
# targets with 100 examples each.
fuzz-ci: venv
	TOOLBRIDGE_FUZZ=ci $(BIN)/python -m pytest tests/fuzz -q -n $(TEST_WORKERS)

# The fuzz suite with the long profile: 20,000 examples per target, tens of minutes.
# A long target may pass the 300 s per-test hang guard of `make test` by design: it is off here.
fuzz: venv prerequisites
	TOOLBRIDGE_FUZZ=long $(BIN)/python -m pytest tests/fuzz -q --hypothesis-show-statistics --timeout=0

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
