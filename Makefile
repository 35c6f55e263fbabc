# Lockwarden: `make run` starts the tray app, `make test` runs ruff, mypy and the whole pytest
# suite (as CI does), `make check` is the edit loop: ruff, mypy and the tests not marked slow
# (a few minutes). All create .venv and install everything on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
SYSDEPS := $(VENV)/.sysdeps-stamp

.PHONY: run test check lint typecheck pytest bench package screenshots clean verify verify-mutants verify-every

$(SYSDEPS):
	@sh packaging/linux-sysdeps.sh
	@mkdir -p $(VENV) && touch $@

$(STAMP): pyproject.toml $(SYSDEPS)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	@touch $@

run: $(STAMP)
	$(BIN)/lockwarden gui

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy
	$(BIN)/mypy --strict core
	$(BIN)/mypy --platform win32 --cache-dir .mypy_cache/win32 core app
	$(BIN)/mypy --platform darwin --cache-dir .mypy_cache/darwin core app

pytest: $(STAMP)
	$(BIN)/python -m pytest -q

test: lint typecheck pytest

# The edit loop: what `test` checks, without the tests marked slow (pyproject.toml markers:
# servers, end-to-end runs, torture, fuzzing, real shells).
check: lint
	$(BIN)/mypy
	$(BIN)/mypy --strict core
	$(BIN)/python -m pytest -q -m "not slow"

# The interleaving checker (docs/engine.md, "Every interleaving checked"): every schedule of two
# processes within its bounds, a crash at every step, random ones of three and four; the
# number explored and the violations found. CI runs the shorter depth (tests/verify/).
verify: $(STAMP)
	$(BIN)/python -m tests.verify --depth full

# Each weakened engine on its own operations and seed, every schedule with one preemption and
# one crash (--depth deep: without a preemption the empty seed's races are not reached).
verify-mutants: $(STAMP)
	$(BIN)/python -m tests.verify --mutant all --depth deep

# Every interleaving, no preemption bound, of each pair of processes on each seed whose
# interleavings number at most 400 (the others are counted as capped); ~18 minutes on 2 cores.
verify-every: $(STAMP)
	$(BIN)/python -m tests.verify --depth every

bench: $(STAMP)
	@for b in tests/benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

package: $(STAMP)
	$(BIN)/python -m pip install -q -e '.[dev,package]'
	$(BIN)/python packaging/build.py

clean:
	rm -rf build dist .mypy_cache .ruff_cache .pytest_cache
