# The README's commands. Every target sets up what it needs first (idempotent, quick when done).
.PHONY: setup setup-test demo test lint bench clean

PY := .venv/bin/python

# What the job, the demos and the CLI need; the tests add their own tools on top.
setup:
	@bash scripts/setup.sh

setup-test: setup
	@bash scripts/install_observability_tools.sh

demo: setup
	$(PY) -m streaming.app.cli demo $(ARGS)

# Two pytest-xdist workers, one half of the suite each (tests/conftest.py says which); `make test PYTEST_ARGS=...`
# runs what it names in one process. pytest exits 5 when it collects nothing: a failure here, never a pass.
# The Go-built test tools, when missing, build in the background while the suite runs; the tests using them wait.
PYTEST_ARGS ?= -n 2 --dist loadgroup
test: setup
	@bash scripts/install_observability_tools.sh --go-in-background
	@$(PY) -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: no tests were collected" >&2; exit 1; fi; exit $$rc

# Lint: style, formatting, types (strict on the pure domain and the contract) and the package map.
lint: setup
	$(PY) -m ruff check streaming connectors localenv dashboards tests bench
	$(PY) -m ruff format --check streaming connectors localenv dashboards tests bench
	$(PY) -m mypy
	.venv/bin/lint-imports

clean:
	-$(PY) -m streaming.app.cli kafka stop
	-$(PY) -m streaming.app.cli rocketmq stop --line 5
	-$(PY) -m streaming.app.cli rocketmq stop --line 4.9
	-$(PY) -m streaming.app.cli spark-cluster stop
	rm -rf .run
