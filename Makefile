# giltracer: the two commands are `make demo` and `make test` (see README.md).
# Both install what is missing (Debian packages with apt-get, Python packages with pip),
# build, and run; both are idempotent.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
BUILD ?= build
# Interpreters for `make test-matrix` (pyenv's and Debian's own static, stripped one).
MATRIX ?= $(wildcard $(HOME)/.pyenv/versions/3.9*/bin/python3 $(HOME)/.pyenv/versions/3.10*/bin/python3 \
            $(HOME)/.pyenv/versions/3.11*/bin/python3 $(HOME)/.pyenv/versions/3.12*/bin/python3 \
            $(HOME)/.pyenv/versions/3.13*/bin/python3) /usr/bin/python3.11
# World-readable place for per-interpreter venvs (the unprivileged run needs to read them).
MATRIX_DIR ?= /tmp/giltracer-matrix
APT_PACKAGES := build-essential pkg-config libjansson-dev libbpf-dev libelf-dev zlib1g-dev \
                clang llvm bpftool python3-dev python3-venv
PIP_PACKAGES := pip scikit-build-core cmake ninja pytest ipython nbclient nbformat ipykernel websocket-client jupyterlab
export GT_WERROR ?= ON

.PHONY: all setup deps venv install demo notebooks test test-c test-py test-unprivileged test-matrix matrix-one matrix-copy bench clean

all: test

deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then echo "giltracer: missing Debian packages:$$missing; run: sudo apt-get install -y$$missing" >&2; exit 1; fi; \
	  echo "giltracer: installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

$(VENV)/.ok:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade $(PIP_PACKAGES)
	touch $@

venv: $(VENV)/.ok

install: deps venv
	$(PY) -m pip install -q --no-build-isolation --force-reinstall --no-deps .
	$(PY) -m pip install -q "giltracer[notebooks]"

setup: install

demo: setup
	@mkdir -p $(BUILD)/demo
	$(PY) -m giltracer -o $(BUILD)/demo/threads_demo.html examples/threads_demo.py
	$(PY) notebooks/lessons.py -o $(BUILD)/notebooks notebooks/01-meet-the-gil.ipynb

# Execute every lesson in notebooks/ in a real kernel; render each to build/notebooks/*.html.
notebooks: setup
	$(PY) notebooks/lessons.py -o $(BUILD)/notebooks

test: setup test-c test-py test-unprivileged

test-c: deps
	cmake -S . -B $(BUILD)/ctest -DGT_BUILD_EXTENSION=OFF -DGT_BUILD_TESTS=ON -DGT_WERROR=$(GT_WERROR) >/dev/null
	cmake --build $(BUILD)/ctest -j2
	cd $(BUILD)/ctest && ctest --output-on-failure

test-py: install
	$(PY) -m pytest tests -q -p no:cacheprovider

# The whole Python suite as an unprivileged user, with Debian's python3.11
# (pyenv's interpreters live under /root, which `nobody` cannot enter).
test-unprivileged: deps
	@$(MAKE) --no-print-directory matrix-one INTERP=/usr/bin/python3.11 NAME=debian-3.11
	@if [ "$$(id -u)" = 0 ]; then \
	  echo "giltracer: running the suite as user nobody (Debian python3.11)"; \
	  $(MAKE) --no-print-directory matrix-copy; \
	  rm -rf $(MATRIX_DIR)/home && mkdir -p $(MATRIX_DIR)/home && chmod 1777 $(MATRIX_DIR)/home; \
	  cd $(MATRIX_DIR) && setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=$(MATRIX_DIR)/home \
	    $(MATRIX_DIR)/debian-3.11/bin/python -m pytest tests -q -p no:cacheprovider; \
	else echo "giltracer: not root: the main run was already unprivileged"; fi

# The tests and what they read (examples, notebooks), where every user can read them.
matrix-copy:
	@mkdir -p $(MATRIX_DIR) && cd $(MATRIX_DIR) && rm -rf tests examples notebooks && \
	  cp -r $(CURDIR)/tests $(CURDIR)/examples $(CURDIR)/notebooks . && chmod -R a+rX $(MATRIX_DIR)

# One interpreter: a venv in MATRIX_DIR, the package built for it, the Python suite.
matrix-one:
	@mkdir -p $(MATRIX_DIR) && chmod a+rx $(MATRIX_DIR)
	@test -x $(MATRIX_DIR)/$(NAME)/bin/python || $(INTERP) -m venv $(MATRIX_DIR)/$(NAME)
	@$(MATRIX_DIR)/$(NAME)/bin/python -m pip install -q --upgrade $(PIP_PACKAGES) 2>&1 | grep -v "^\[notice\]" || true
	$(MATRIX_DIR)/$(NAME)/bin/python -m pip install -q --no-build-isolation --force-reinstall --no-deps .
	$(MATRIX_DIR)/$(NAME)/bin/python -m pip install -q "giltracer[notebooks]"

test-matrix: deps
	@failed=""; for py in $(MATRIX); do \
	  name=$$($$py -c 'import sys,sysconfig; print(("debian-" if sys.prefix=="/usr" else "pyenv-")+sysconfig.get_python_version())'); \
	  echo "=== $$name ($$py)"; \
	  if $(MAKE) --no-print-directory matrix-one INTERP=$$py NAME=$$name && \
	     $(MAKE) --no-print-directory matrix-copy && \
	     (cd $(MATRIX_DIR) && $(MATRIX_DIR)/$$name/bin/python -m pytest tests -q -p no:cacheprovider); then :; \
	  else failed="$$failed $$name"; fi; \
	done; \
	if [ -n "$$failed" ]; then echo "test-matrix: FAILED on:$$failed"; exit 1; fi; \
	echo "test-matrix: all interpreters passed"

bench: setup
	$(PY) -m pip install -q viztracer
	$(PY) bench/run.py
	$(PY) bench/profile_bench.py

clean:
	rm -rf $(BUILD) $(VENV) $(MATRIX_DIR) dist *.egg-info
