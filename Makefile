# distml-lab — two commands: `make demo` (set up, then the tour) and `make test` (set up, then every check).
# Everything is installed into .venv by this file; a second run does not reinstall.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
export OMP_NUM_THREADS ?= 1
export MPLBACKEND ?= Agg

.PHONY: demo test lint pytest notebooks grade book figures report clean setup

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=23.2"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	$(BIN)/python -m ipykernel install --prefix $(VENV) --name python3 >/dev/null
	@touch $(STAMP)

# The tour: every chapter's twins, quick sweeps at world 2, both model tiers (report/index.md).
# The full sweeps: .venv/bin/distml-lab report --out report
demo: $(STAMP)
	$(BIN)/distml-lab report --quick --out report

report: demo

test: $(STAMP) lint pytest

lint: $(STAMP)
	$(BIN)/ruff check simulator backends lab exercises solutions tests benchmarks notebooks
	$(BIN)/mypy simulator
	$(BIN)/mypy backends lab

# Two pytest sessions side by side on disjoint halves of tests/ (tests/halves.py): the suite
# mostly waits (ranks starting, deadlines, kernels), so two finish sooner than one.
pytest: $(STAMP)
	DISTML_IMPL=solutions $(BIN)/python -m tests.halves -q --durations=15

notebooks: $(STAMP)
	DISTML_SMOKE=1 $(BIN)/python -m pytest -q --nbmake notebooks

# Grade your own exercise answers, per task with points: make grade CH=06  or  make grade EX=6.1
grade: $(STAMP)
	DISTML_IMPL=exercises $(BIN)/python -m tests.exercises.gradebook $(if $(CH),--chapter $(CH)) $(if $(EX),--exercise $(EX))

# The textbook's figures, drawn from the simulator (deterministic; not committed).
figures: $(STAMP)
	$(BIN)/python -m lab.figures textbook/figures

book: $(STAMP) figures
	$(BIN)/python -m lab.book textbook

clean:
	rm -rf report textbook/_build textbook/notebooks textbook/figures .pytest_cache .mypy_cache .ruff_cache
