# The two commands of the README:  `make demo`  and  `make test`.
# Each creates .venv on first use (Python >= 3.11 as `python3`, or PYTHON=...).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint check clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,postgres]'
	@if pkg-config --exists mysqlclient 2>/dev/null || pkg-config --exists libmariadb 2>/dev/null; then \
	    $(BIN)/python -m pip install -q -e '.[mysql]'; \
	else \
	    echo "note: MySQL client headers not found; mysqlclient skipped (PyMySQL is used instead)."; \
	    echo "      install them with: apt-get install default-libmysqlclient-dev pkg-config"; \
	fi
	@touch $@

demo: $(STAMP)
	$(BIN)/flow demo

test: $(STAMP)
	@$(BIN)/python -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests (exit 5)"; exit 0; fi; exit $$rc

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check flow flow_sqla flow_cli
	$(BIN)/mypy

check: lint test

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache flow-demo
