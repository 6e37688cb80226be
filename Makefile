# The two commands of the README:  `make demo`  and  `make test`.
# Each creates .venv on first use (Python >= 3.11 as `python3`, or PYTHON=...).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# mysqlclient (the `mysql` extra) builds only where the MySQL client headers are; its own stamp
# is checked on every run, so installing the headers later is enough to get it.
MYSQL_STAMP := $(VENV)/.installed-mysql

.PHONY: demo test lint check clean mysql-extra

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,postgres]'
	@touch $@

mysql-extra: $(STAMP)
	@if [ -f $(MYSQL_STAMP) ] && [ $(MYSQL_STAMP) -nt $(STAMP) ]; then \
	    :; \
	elif pkg-config --exists mysqlclient 2>/dev/null || pkg-config --exists mariadb 2>/dev/null \
	        || pkg-config --exists libmariadb 2>/dev/null; then \
	    echo "MySQL client headers found: installing the mysql extra (mysqlclient)"; \
	    if $(BIN)/python -m pip install -q -e '.[mysql]'; then \
	        touch $(MYSQL_STAMP); \
	    else \
	        echo "note: mysqlclient did not build (see above); PyMySQL is used; retried next run."; \
	    fi; \
	else \
	    echo "note: no MySQL client headers: mysqlclient not installed, PyMySQL is used instead"; \
	    echo "      (apt-get install default-libmysqlclient-dev pkg-config, then run make again)"; \
	fi

demo: mysql-extra
	$(BIN)/flow demo

test: mysql-extra
	@$(BIN)/python -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests (exit 5)"; exit 0; fi; exit $$rc

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check flow flow_sqla flow_cli
	$(BIN)/mypy

check: lint test

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache flow-demo
