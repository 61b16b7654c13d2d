# giltracer: the two commands are `make demo` and `make test` (see README.md).
# Both install what is missing (Debian packages with apt-get, Python packages with pip),
# build, and run; both are idempotent.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
BUILD ?= build
# Interpreters for `make test-matrix` (pyenv's and Debian's own static, stripped one); it
# also runs `make test-sid` (SID_PYTHONS, Debian sid's 3.14 and 3.15 in a chroot; as root).
# `make test-matrix MATRIX=` runs only those, `SID_PYTHONS=` only the others.
MATRIX ?= $(wildcard $(HOME)/.pyenv/versions/3.9*/bin/python3 $(HOME)/.pyenv/versions/3.10*/bin/python3 \
            $(HOME)/.pyenv/versions/3.11*/bin/python3 $(HOME)/.pyenv/versions/3.12*/bin/python3 \
            $(HOME)/.pyenv/versions/3.13*/bin/python3) /usr/bin/python3.11
# World-readable place for per-interpreter venvs (the unprivileged run needs to read them).
MATRIX_DIR ?= /tmp/giltracer-matrix
# Interpreters test-matrix leaves out, by venv name (CI: pyenv-3.11, which `make test` ran).
MATRIX_SKIP ?=
APT_PACKAGES := build-essential pkg-config libjansson-dev libbpf-dev libelf-dev zlib1g-dev \
                clang llvm bpftool python3-dev python3-venv chromium
PIP_PACKAGES := pip scikit-build-core cmake ninja pytest ipython nbclient nbformat ipykernel websocket-client pybind11 mypy
# Only in the main venv (tests/browser/test_jupyterlab.py; skipped where it is missing): on
# older interpreters (3.9) pip's resolver spends many minutes backtracking over its pins.
LAB_PACKAGES := jupyterlab
export GT_WERROR ?= ON

.PHONY: all setup deps venv install demo notebooks reference lesson-shot lesson-shots lesson-shots-ft test test-lessons-busy test-c typecheck test-py test-unprivileged test-matrix matrix-one matrix-copy bench bench-long bench-children bench-sample bench-sample-sid bench-churn-cost bench-bytes bench-deflate bench-gil-event bench-tls readme-picture bench-matrix clean \
        pythons test-sid test-sid-lessons-busy bench-sid pythons-ft test-ft test-ft-ci test-tsan-ft test-tsan-py bench-ft \
        deps-harden asan-venv test-asan test-asan-c test-asan-py test-valgrind fuzz stress stress-sid stress-asan \
        test-loop

all: test

deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then echo "giltracer: missing Debian packages:$$missing; run: sudo apt-get install -y$$missing" >&2; exit 1; fi; \
	  echo "giltracer: installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

# Re-run when the Makefile changes (e.g. a new package in PIP_PACKAGES): pip skips what is there.
$(VENV)/.ok: Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade $(PIP_PACKAGES)
	$(PY) -m pip install -q $(LAB_PACKAGES)
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

# Lesson 1 rendered, and the picture of its viewer that docs/user-guide.md shows (checked: the two
# counters' GIL strips alternate held and waiting).
lesson-shot: setup
	$(PY) notebooks/lessons.py -o $(BUILD)/notebooks notebooks/01-meet-the-gil.ipynb
	$(PY) notebooks/screenshot.py $(BUILD)/notebooks/01-meet-the-gil.html docs/lesson-1-meet-the-gil.png

# Every lesson run and rendered, and a picture of its first viewer in docs/ (lesson 1's
# checked as lesson-shot checks it).
# The free-threaded lessons' pictures come from 3.14t (lesson-shots-ft), not from this build.
FT_LESSONS := 07-free-threaded-python 12-free-threaded-what-replaces-the-gil
lesson-shots: notebooks
	for page in $(BUILD)/notebooks/[0-9][0-9]-*.html; do n=$$(basename $$page .html); \
	  case " $(FT_LESSONS) " in *" $$n "*) continue;; esac; \
	  $(PY) notebooks/screenshot.py $$([ $$n = 01-meet-the-gil ] || echo --any) $$page \
	    docs/lesson-$$(echo $$n | sed 's/^0//').png || exit 1; done

# The free-threaded lessons executed on 3.14t in the chroot (as root: make pythons), rendered
# into $(BUILD)/notebooks-ft/, and a picture of each one's first viewer in docs/ (Chromium
# runs on the host).
lesson-shots-ft: pythons setup
	$(IN_SID) --bind $(CURDIR):/src -- sh -c 'set -e; n=ft-3.14t; d=$(SID_MATRIX); $(FT_VENV) && \
	  cd /src && $$d/$$n/bin/python notebooks/lessons.py -o /src/$(BUILD)/notebooks-ft \
	    $(foreach l,$(FT_LESSONS),notebooks/$(l).ipynb)'
	for n in $(FT_LESSONS); do $(PY) notebooks/screenshot.py --any $(BUILD)/notebooks-ft/$$n.html \
	  docs/lesson-$$(echo $$n | sed 's/^0//').png || exit 1; done

test: setup test-c typecheck test-py test-unprivileged

# The lessons with two busy processes beside them (CI): each claim holds or the lesson says
# the machine was busy (tests/test_notebooks.py checks which). The loops end with the run.
BUSY ?= 2
test-lessons-busy: install
	@pids=""; for i in $$(seq $(BUSY)); do $(PY) -c 'while True: pass' & pids="$$pids $$!"; done; \
	trap 'kill $$pids 2>/dev/null' EXIT INT TERM; \
	echo "giltracer: the lessons beside $(BUSY) busy processes ($$pids)"; \
	GILTRACER_REQUIRE=notebooks $(PY) -m pytest tests/test_notebooks.py -q -p no:cacheprovider

# The same on sid's newest interpreters (SID_LESSON_PYTHONS), then on the free-threaded 3.14t
# (its lessons: the GIL-only ones skip there), in the chroot, as root: the busy
# loops run on the host and load the same CPUs.
SID_LESSON_PYTHONS ?= 3.14
test-sid-lessons-busy: pythons
	@pids=""; for i in $$(seq $(BUSY)); do $(PYTHON) -c 'while True: pass' & pids="$$pids $$!"; done; \
	trap 'kill $$pids 2>/dev/null' EXIT INT TERM; \
	for v in $(SID_LESSON_PYTHONS); do \
	  echo "giltracer: the lessons on sid-$$v beside $(BUSY) busy processes ($$pids)"; \
	  $(IN_SID) --bind $(CURDIR):/src -- sh -c 'set -e; v=$$1; d=$(SID_MATRIX); $(SID_VENV) && cd $$d && \
	    GILTRACER_REQUIRE=notebooks $$d/sid-$$v/bin/python -m pytest tests/test_notebooks.py -q -rs -p no:cacheprovider' sh $$v \
	  || exit 1; \
	done; \
	echo "giltracer: the lessons on the free-threaded 3.14t beside $(BUSY) busy processes ($$pids)"; \
	$(IN_SID) --bind $(CURDIR):/src -- sh -c 'set -e; n=ft-3.14t; d=$(SID_MATRIX); $(FT_VENV) && cd $$d && \
	  GILTRACER_REQUIRE=notebooks $$d/$$n/bin/python -m pytest tests/test_notebooks.py -q -rs -p no:cacheprovider'

test-c: deps
	cmake -S . -B $(BUILD)/ctest -DGT_BUILD_EXTENSION=OFF -DGT_BUILD_TESTS=ON -DGT_WERROR=$(GT_WERROR) >/dev/null
	cmake --build $(BUILD)/ctest -j2
	cd $(BUILD)/ctest && ctest --output-on-failure

# mypy --strict on magics/ (pyproject.toml's [tool.mypy]; the core is typed by
# magics/giltracer/_core.pyi).
typecheck: venv
	$(PY) -m mypy

# docs/reference.md from the option and environment tables (tests/test_reference.py holds
# the committed file to them); from the sources, no build needed.
reference: venv
	PYTHONPATH=magics $(PY) -c "from giltracer import options; options.write_reference()"

# What `make deps`/`install` brought must be used, not skipped (tests/test_environment.py).
comma := ,
REQUIRE_MAIN := chromium,jupyterlab,notebooks$(if $(filter 0,$(shell id -u)),$(comma)bpf)
REQUIRE_OTHER := chromium,notebooks
test-py: install
	GILTRACER_REQUIRE=$(REQUIRE_MAIN) $(PY) -m pytest tests -q -p no:cacheprovider

# The whole Python suite as an unprivileged user, with Debian's python3.11
# (pyenv's interpreters live under /root, which `nobody` cannot enter).
test-unprivileged: deps
	@$(MAKE) --no-print-directory matrix-one INTERP=/usr/bin/python3.11 NAME=debian-3.11
	@if [ "$$(id -u)" = 0 ]; then \
	  echo "giltracer: running the suite as user nobody (Debian python3.11)"; \
	  $(MAKE) --no-print-directory matrix-copy; \
	  rm -rf $(MATRIX_DIR)/home && mkdir -p $(MATRIX_DIR)/home && chmod 1777 $(MATRIX_DIR)/home; \
	  cd $(MATRIX_DIR) && setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=$(MATRIX_DIR)/home \
	    GILTRACER_REQUIRE=$(REQUIRE_OTHER) $(MATRIX_DIR)/debian-3.11/bin/python -m pytest tests -q -p no:cacheprovider; \
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

# SKIP_ANY_PYTHON=1 (CI): the matrix's interpreters and the ASan run leave out the tests
# whose result does not depend on the interpreter nor on the extension's memory safety
# (marked any_python: tests/conftest.py ANY_PYTHON), which `make test` runs on the main
# one.
SKIP_ANY_PYTHON ?= 0
MAIN_ONLY_ARGS := $(if $(filter 1,$(SKIP_ANY_PYTHON)),-m "not any_python")

test-matrix: deps
	@failed=""; for py in $(MATRIX); do \
	  name=$$($$py -c 'import sys,sysconfig; print(("debian-" if sys.prefix=="/usr" else "pyenv-")+sysconfig.get_python_version())'); \
	  case " $(MATRIX_SKIP) " in *" $$name "*) echo "=== $$name: skipped (MATRIX_SKIP)"; continue;; esac; \
	  echo "=== $$name ($$py)"; \
	  if $(MAKE) --no-print-directory matrix-one INTERP=$$py NAME=$$name && \
	     $(MAKE) --no-print-directory matrix-copy && \
	     (cd $(MATRIX_DIR) && GILTRACER_REQUIRE=$(REQUIRE_OTHER) $(MATRIX_DIR)/$$name/bin/python -m pytest tests -q -p no:cacheprovider $(MAIN_ONLY_ARGS)); then :; \
	  else failed="$$failed $$name"; fi; \
	done; \
	if [ -n "$(SID_PYTHONS)" ]; then \
	  if [ "$$(id -u)" = 0 ]; then $(MAKE) --no-print-directory test-sid || failed="$$failed sid"; \
	  else echo "test-matrix: sid's python$(SID_PYTHONS) not run: make pythons and its chroot need root"; fi; \
	fi; \
	if [ -n "$(FT_PYTHONS)" ]; then \
	  if [ "$$(id -u)" = 0 ]; then $(MAKE) --no-print-directory test-ft || failed="$$failed ft"; \
	  else echo "test-matrix: the free-threaded python$(FT_PYTHONS) not run: it lives in the chroot (root)"; fi; \
	fi; \
	if [ -n "$$failed" ]; then echo "test-matrix: FAILED on:$$failed"; exit 1; fi; \
	echo "test-matrix: all interpreters passed"

# ---- newer CPythons: Debian sid's python3.14 and python3.15 in a chroot ----------------
# `make pythons` makes (or reuses) PYTHONS_DIR/sid with mmdebstrap from the host's own Debian
# mirror (the URIs: line of its apt sources; sid's Release file has expired there, hence
# Check-Valid-Until false). The stamp holds the package list: a chroot made by hand with the
# same packages is adopted, missing packages are added. Entered only through tools/in-chroot
# (a private mount namespace: /proc, /sys, /dev vanish with the command).
PYTHONS_DIR ?= /var/cache/giltracer/pythons
SID := $(PYTHONS_DIR)/sid
SID_VERSIONS := 3.14 3.15
SID_PYTHONS ?= $(SID_VERSIONS)
# Which of them test-sid also runs as user nobody (CI: the newest runs as root only).
SID_NOBODY ?= $(SID_PYTHONS)
SID_PACKAGES := $(foreach v,$(SID_VERSIONS),python$(v)-dev python$(v)-venv python$(v)-dbg) \
                gcc libc6-dev make pkg-config libjansson-dev ca-certificates libbpf-dev clang \
                bpftool cmake ninja-build \
                xz-utils zlib1g-dev libssl-dev libffi-dev liblzma-dev libbz2-dev libsqlite3-dev \
                libreadline-dev
SID_MIRROR = $(shell sed -n 's/^URIs:[[:space:]]*//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | \
               tr ' ' '\n' | grep -v -e security -e '^$$' | head -1)
IN_SID := $(CURDIR)/tools/in-chroot $(SID)
# Inside the chroot: venvs and the copied tests, readable by user nobody.
SID_MATRIX ?= /opt/giltracer-matrix

pythons:
	@if [ "$$(id -u)" != 0 ]; then echo "giltracer: make pythons needs root (mmdebstrap, chroot)" >&2; exit 1; fi
	@want="$(sort $(SID_PACKAGES))"; \
	if [ -f $(SID).stamp ] && [ "$$(cat $(SID).stamp)" = "$$want" ]; then \
	  echo "giltracer: $(SID) is ready (stamp)"; exit 0; fi; \
	if [ -x $(SID)/bin/sh ]; then \
	  missing=""; for p in $$want; do \
	    chroot $(SID) dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; done; \
	  if [ -n "$$missing" ]; then echo "giltracer: adding to $(SID):$$missing"; \
	    $(IN_SID) env DEBIAN_FRONTEND=noninteractive sh -c "apt-get -o Acquire::Check-Valid-Until=false update -qq && apt-get install -y -qq$$missing >/dev/null" || exit 1; fi; \
	else \
	  command -v mmdebstrap >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap >/dev/null; } || exit 1; \
	  mirror="$(SID_MIRROR)"; [ -n "$$mirror" ] || { echo "giltracer: no Debian mirror in /etc/apt/sources.list.d/*.sources" >&2; exit 1; }; \
	  echo "giltracer: creating $(SID) from $$mirror (about 70 s, 650 MB)"; \
	  mkdir -p $(PYTHONS_DIR) && rm -rf $(SID).new && \
	  mmdebstrap --mode=root --variant=apt --aptopt='Acquire::Check-Valid-Until "false"' \
	    --dpkgopt='path-exclude=/usr/share/{doc,man,locale}/*' \
	    --include="$$(echo $$want | tr ' ' ,)" sid $(SID).new "$$mirror" >$(PYTHONS_DIR)/mmdebstrap.log 2>&1 \
	    || { tail -20 $(PYTHONS_DIR)/mmdebstrap.log >&2; exit 1; }; \
	  mv $(SID).new $(SID); \
	fi; \
	echo "$$want" > $(SID).stamp; echo "giltracer: $(SID) is ready"
	@$(MAKE) --no-print-directory pythons-ft

# Inside the chroot (sh, $$v = version, $$d = SID_MATRIX): the venv sid-$$v with the package
# built from a copy of the worktree (bound at /src), and the tests (and bench/, whose C
# hooks a test builds) copied beside it.
SID_VENV = rm -rf $$d-src-$$v && mkdir -p $$d-src-$$v && cd /src && \
	  tar --exclude=./.venv --exclude=./build --exclude=./.git -cf - . | tar -C $$d-src-$$v -xf - && \
	  make --no-print-directory -C $$d-src-$$v matrix-one INTERP=/usr/bin/python$$v NAME=sid-$$v MATRIX_DIR=$$d && \
	  make --no-print-directory -C $$d-src-$$v matrix-copy MATRIX_DIR=$$d && rm -rf $$d-src-$$v && \
	  rm -rf $$d/bench && cp -r /src/bench $$d/bench && chmod -R a+rX $$d/bench

# The Python suite on sid's interpreters (SID_PYTHONS), inside the chroot: as root (the bpf
# probe required) and as user nobody. SID_PYTEST_ARGS: more pytest arguments (-x, -k ...).
test-sid: pythons
	@failed=""; for v in $(SID_PYTHONS); do \
	  echo "=== sid-$$v (root, then nobody)"; \
	  $(IN_SID) --bind $(CURDIR):/src -- sh -c 'set -e; v=$$1; d=$(SID_MATRIX); $(SID_VENV) && cd $$d && \
	    export PATH="$$PATH:$(FT_PREFIX)/bin" && \
	    echo "--- sid-$$v as root" && \
	    GILTRACER_REQUIRE=notebooks,bpf $$d/sid-$$v/bin/python -m pytest tests -q -rs -p no:cacheprovider $(MAIN_ONLY_ARGS) $(SID_PYTEST_ARGS) && \
	    case " $(SID_NOBODY) " in *" $$v "*) ;; *) echo "--- sid-$$v as nobody: skipped (SID_NOBODY)"; exit 0;; esac && \
	    echo "--- sid-$$v as nobody" && rm -rf $$d/home && mkdir -p $$d/home && chmod 1777 $$d/home && \
	    setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=$$d/home GILTRACER_REQUIRE=notebooks \
	      $$d/sid-$$v/bin/python -m pytest tests -q -rs -p no:cacheprovider $(MAIN_ONLY_ARGS) $(SID_PYTEST_ARGS)' sh $$v \
	  || failed="$$failed sid-$$v"; \
	done; \
	if [ -n "$$failed" ]; then echo "test-sid: FAILED on:$$failed"; exit 1; fi; \
	echo "test-sid: all sid interpreters passed"

# bench/run.py on sid's interpreters, by default the overhead section only (BENCH_SID_ARGS),
# with viztracer where it installs; reports in bench/results/<version>.md like bench-matrix.
BENCH_SID_ARGS ?= --only overhead
bench-sid: pythons
	@for v in $(SID_PYTHONS); do \
	  echo "=== bench sid-$$v"; \
	  $(IN_SID) --bind $(CURDIR):/src -- sh -c 'set -e; v=$$1; d=$(SID_MATRIX); $(SID_VENV); \
	    $$d/sid-$$v/bin/python -m pip install -q viztracer || echo "viztracer does not install on $$v: its columns are skipped"; \
	    rm -rf /tmp/gt-bench && cp -r /src/bench /tmp/gt-bench && \
	    $$d/sid-$$v/bin/python /tmp/gt-bench/run.py $(BENCH_SID_ARGS) --out /src/bench/results' sh $$v || exit 1; \
	done

# The sampling-mode bench (bench/sample_bench.py) on sid's interpreters (SID_PYTHONS), with
# py-spy where it installs and, on 3.15, CPython's own profiling.sampling in the same run:
# reports in bench/results/sample-<version>.md. BENCH_SAMPLE_ARGS as for bench-sample.
bench-sample-sid: pythons
	@for v in $(SID_PYTHONS); do \
	  echo "=== bench-sample sid-$$v"; \
	  $(IN_SID) --bind $(CURDIR):/src -- sh -c 'set -e; v=$$1; d=$(SID_MATRIX); $(SID_VENV); \
	    $$d/sid-$$v/bin/python -m pip install -q py-spy || echo "py-spy does not install on $$v: its column is skipped"; \
	    rm -rf /tmp/gt-bench && cp -r /src/bench /tmp/gt-bench && \
	    $$d/sid-$$v/bin/python /tmp/gt-bench/sample_bench.py $(BENCH_SAMPLE_ARGS) --out /src/bench/results' sh $$v || exit 1; \
	done

# ---- free-threaded CPython: 3.14t built from source in the sid chroot ------------------
# No Debian suite packages a free-threaded interpreter: `make pythons-ft` (part of `make
# pythons`) builds CPython FT_VERSION with --disable-gil into the chroot's FT_PREFIX from
# the tarball in PYTHONS_SRC, checked against SHA256SUMS there (about 11 min on 2 cores,
# once per machine: a stamp; its build dependencies are in SID_PACKAGES, from xz-utils
# on). A build already there with that version is adopted.
FT_VERSION := 3.14.7
# test-matrix runs test-ft (the whole suite on 3.14t, root then nobody: about 6 min here)
# when FT_PYTHONS=3.14t, the default; facts about the GIL are skipped there with the reason.
FT_PYTHONS ?= 3.14t
FT_PREFIX := /opt/python3.14t
FT_PYTHON := $(FT_PREFIX)/bin/python3.14t
FT_TARBALL := python3.14_$(FT_VERSION).orig.tar.xz
FT_STAMP := $(PYTHONS_DIR)/ft-3.14t.stamp
PYTHONS_SRC ?= $(abspath $(CURDIR)/../shared/pythons)

pythons-ft:
	@if [ "$$(id -u)" != 0 ]; then echo "giltracer: make pythons-ft needs root (chroot)" >&2; exit 1; fi
	@if [ ! -x $(SID)/bin/sh ]; then $(MAKE) --no-print-directory pythons || exit 1; fi; \
	if [ -f $(FT_STAMP) ] && [ "$$(cat $(FT_STAMP))" = "$(FT_VERSION)" ] && [ -x $(SID)$(FT_PYTHON) ]; then \
	  echo "giltracer: $(SID)$(FT_PREFIX) is ready (stamp)"; exit 0; fi; \
	have=$$($(IN_SID) $(FT_PYTHON) -c 'import sys, sysconfig; \
	  print(sys.version.split()[0] if sysconfig.get_config_var("Py_GIL_DISABLED") else "with-gil")' 2>/dev/null); \
	if [ "$$have" = "$(FT_VERSION)" ]; then \
	  echo "$(FT_VERSION)" > $(FT_STAMP); echo "giltracer: $(SID)$(FT_PREFIX) is ready (adopted: $$have)"; exit 0; fi; \
	(cd $(PYTHONS_SRC) 2>/dev/null && grep "  $(FT_TARBALL)$$" SHA256SUMS | sha256sum -c --quiet -) || \
	  { echo "giltracer: $(PYTHONS_SRC)/$(FT_TARBALL) is missing or does not match its SHA256SUMS" >&2; exit 1; }; \
	echo "giltracer: building CPython $(FT_VERSION) --disable-gil into $(SID)$(FT_PREFIX) (about 11 min; log $(PYTHONS_DIR)/ft-3.14t.log)"; \
	$(IN_SID) --bind $(PYTHONS_SRC):/srcpy -- sh -c 'set -e; rm -rf /tmp/ft-build && mkdir -p /tmp/ft-build && \
	  cd /tmp/ft-build && tar xf /srcpy/$(FT_TARBALL) && cd Python-* && \
	  ./configure --disable-gil --prefix=$(FT_PREFIX) --with-ensurepip=install && make -j$$(nproc) && \
	  make install && cd / && rm -rf /tmp/ft-build && \
	  $(FT_PYTHON) -c "import sys; assert not sys._is_gil_enabled()"' >$(PYTHONS_DIR)/ft-3.14t.log 2>&1 \
	  || { tail -20 $(PYTHONS_DIR)/ft-3.14t.log >&2; exit 1; }; \
	echo "$(FT_VERSION)" > $(FT_STAMP); echo "giltracer: $(SID)$(FT_PREFIX) is ready"

# Inside the chroot (sh, $$d = SID_MATRIX, $$n = venv name): the venv $$n of FT_PYTHON with
# the package built from a copy of the worktree, and the tests copied beside it (SID_VENV's
# steps; GT_SANITIZE passes through to the build).
FT_VENV = py=$(FT_PYTHON) && $(CHROOT_VENV)
# The same for any interpreter $$py of the chroot.
CHROOT_VENV = rm -rf $$d-src-$$n && mkdir -p $$d-src-$$n && cd /src && \
	  tar --exclude=./.venv --exclude=./build --exclude=./.git -cf - . | tar -C $$d-src-$$n -xf - && \
	  make --no-print-directory -C $$d-src-$$n matrix-one INTERP=$$py NAME=$$n MATRIX_DIR=$$d && \
	  make --no-print-directory -C $$d-src-$$n matrix-copy MATRIX_DIR=$$d && rm -rf $$d-src-$$n && \
	  rm -rf $$d/bench && cp -r /src/bench $$d/bench && chmod -R a+rX $$d/bench

# The Python suite on the free-threaded 3.14t, inside the chroot, as root (the bpf probe
# required) and as user nobody, like test-sid. FT_PYTEST_ARGS: more pytest arguments.
# FT_TESTS: which tests (the whole suite by default); test-ft-ci: the free-threaded
# tracer's, the park probe's and its ground truth, the lessons about free-threading (a
# quick subset: CI runs the whole suite through test-matrix).
FT_TESTS ?= tests
FT_CI_TESTS := tests/test_free_threaded.py tests/test_free_threaded_contention.py tests/test_park.py \
               tests/test_notebooks.py
test-ft-ci:
	@$(MAKE) --no-print-directory test-ft FT_TESTS="$(FT_CI_TESTS)" \
	  FT_PYTEST_ARGS='-k "not test_notebooks or 07 or 12 or stored or asks or every_lesson"'

test-ft: pythons-ft
	@echo "=== ft-3.14t (root, then nobody)"; \
	$(IN_SID) --bind $(CURDIR):/src -- sh -c 'set -e; n=ft-3.14t; d=$(SID_MATRIX); $(FT_VENV) && cd $$d && \
	  echo "--- $$n as root" && \
	  GILTRACER_REQUIRE=notebooks,bpf $$d/$$n/bin/python -m pytest $(FT_TESTS) -q -rs -p no:cacheprovider $(MAIN_ONLY_ARGS) $(FT_PYTEST_ARGS) && \
	  echo "--- $$n as nobody" && rm -rf $$d/home && mkdir -p $$d/home && chmod 1777 $$d/home && \
	  setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=$$d/home GILTRACER_REQUIRE=notebooks \
	    $$d/$$n/bin/python -m pytest $(FT_TESTS) -q -rs -p no:cacheprovider $(MAIN_ONLY_ARGS) $(FT_PYTEST_ARGS)' \
	  || { echo "test-ft: FAILED"; exit 1; }; \
	echo "test-ft: the free-threaded 3.14t passed"

# The tracer's tests on 3.14t with the extension built with ThreadSanitizer (the
# interpreter is not instrumented: races between the tracer's own accesses, from any
# threads, are what it sees). Reports where giltracer's code makes one of the racing
# accesses fail the run (tools/tsan_ours.py; the rest are CPython's hand-offs TSan cannot
# see). TSAN_PYTEST_ARGS: which tests.
# (fork() of a process with threads deadlocks the child under TSan: those tests are left out)
TSAN_PYTEST_ARGS ?= tests/test_free_threaded.py tests/test_tracer.py tests/test_tracer_lifecycle.py -k "not fork"
test-tsan-ft: pythons-ft
	$(IN_SID) --bind $(CURDIR):/src -- sh -c 'set -e; n=ft-tsan-3.14t; d=$(SID_MATRIX); \
	  export GT_SANITIZE=thread; $(FT_VENV) && cd $$d && rm -rf $$d/tsan-logs && mkdir -p $$d/tsan-logs && \
	  rc=0; PYTHON_GIL=0 LD_PRELOAD=$$(gcc -print-file-name=libtsan.so) \
	    TSAN_OPTIONS=halt_on_error=0:exitcode=0:report_signal_unsafe=0:suppressions=/src/tools/tsan-ft.supp:log_path=$$d/tsan-logs/tsan \
	    $$d/$$n/bin/python -m pytest $(TSAN_PYTEST_ARGS) -q -p no:cacheprovider || rc=$$?; \
	  if [ -n "$$(ls -A $$d/tsan-logs)" ] && ! $$d/$$n/bin/python /src/tools/tsan_ours.py $$d/tsan-logs/*; then \
	    echo "test-tsan-ft: ThreadSanitizer reports in giltracer'"'"'s code above (all: $$d/tsan-logs)" >&2; exit 1; fi; \
	  exit $$rc'

# The Python-level tests where other threads touch what giltracer reads, with the
# extension built with ThreadSanitizer (the interpreters are not): on sid's 3.14, sessions
# that start and stop while interpreters with GILs of their own come and go and start and
# end threads; on 3.14t, the free-threaded tracer's and the session lifecycle's (one
# Result used from several threads at once). Fails, like test-tsan-ft, on a report where
# giltracer's code makes a racing access. About a minute (two venvs built, then the tests).
# The other subinterpreter tests are left out: with threads trading the main GIL through
# the hooks, TSan loses track of that mutex ("double lock") and then reports every access
# the GIL orders. TSAN_PY_GIL_ARGS, TSAN_PY_FT_ARGS: which tests on each.
TSAN_PY_GIL_ARGS ?= tests/test_subinterp.py -k "come_and_go or start_and_end"
TSAN_PY_FT_ARGS ?= tests/test_free_threaded.py tests/test_session_lifecycle.py -k "not fork"
TSAN_PY_OPTIONS = halt_on_error=0:exitcode=0:report_signal_unsafe=0:suppressions=/src/tools/tsan-ft.supp
test-tsan-py: pythons-ft
	$(IN_SID) --bind $(CURDIR):/src -- sh -c 'set -e; d=$(SID_MATRIX); export GT_SANITIZE=thread; \
	  n=tsan-3.14; py=/usr/bin/python3.14; $(CHROOT_VENV) || exit 1; n=ft-tsan-3.14t; $(FT_VENV) || exit 1; cd $$d; \
	  logs=$$d/tsan-py-logs; rm -rf $$logs && mkdir -p $$logs; rc=0; \
	  echo "--- tsan-3.14 (GIL, subinterpreters)"; \
	  LD_PRELOAD=$$(gcc -print-file-name=libtsan.so) TSAN_OPTIONS=$(TSAN_PY_OPTIONS):log_path=$$logs/gil \
	    $$d/tsan-3.14/bin/python -m pytest $(TSAN_PY_GIL_ARGS) -q -rs -p no:cacheprovider || rc=$$?; \
	  echo "--- ft-tsan-3.14t (free-threaded)"; \
	  PYTHON_GIL=0 LD_PRELOAD=$$(gcc -print-file-name=libtsan.so) TSAN_OPTIONS=$(TSAN_PY_OPTIONS):log_path=$$logs/ft \
	    $$d/ft-tsan-3.14t/bin/python -m pytest $(TSAN_PY_FT_ARGS) -q -rs -p no:cacheprovider || rc=$$?; \
	  if [ -n "$$(ls -A $$logs)" ] && ! $$d/tsan-3.14/bin/python /src/tools/tsan_ours.py $$logs/*; then \
	    echo "test-tsan-py: ThreadSanitizer reports in giltracer'"'"'s code above (all: $$logs)" >&2; exit 1; fi; \
	  exit $$rc'

# Thread scaling (1, 2, 4 threads of call-heavy work), traced and untraced, on the
# free-threaded 3.14t and on sid's 3.14 with the GIL (bench/ft_scaling.py): reports in
# bench/results/ft-scaling-<version>.md; fails when 3.14t's traced scaling 1 -> 2 threads
# is not within 10 % of its untraced scaling.
bench-ft: pythons-ft
	$(IN_SID) --bind $(CURDIR):/src -- sh -c 'set -e; d=$(SID_MATRIX); \
	  v=3.14; $(SID_VENV); $$d/sid-$$v/bin/python /src/bench/ft_scaling.py --out /src/bench/results || true; \
	  n=ft-3.14t; $(FT_VENV); $$d/$$n/bin/python /src/bench/ft_scaling.py --out /src/bench/results'

# The what-if validation (bench/what_if_bench.py): each workload traced on sid's
# 3.14 with the GIL, its prediction from t.what_if() against its wall time on the
# free-threaded 3.14t (untraced, in a plain venv with NumPy); report in
# bench/results/what-if-<version>.md. WHAT_IF_ARGS: more arguments (--runs, --only, --strict).
WHAT_IF_ARGS ?=
.PHONY: bench-what-if
bench-what-if: pythons-ft
	$(IN_SID) --bind $(CURDIR):/src -- sh -c 'set -e; d=$(SID_MATRIX); v=3.14; $(SID_VENV); \
	  $$d/sid-$$v/bin/python -m pip install -q numpy || echo "bench-what-if: no NumPy for 3.14: numpy-pool is skipped"; \
	  [ -x $$d/ft-bare/bin/python ] || $(FT_PYTHON) -m venv $$d/ft-bare; \
	  $$d/ft-bare/bin/python -m pip install -q numpy || echo "bench-what-if: no NumPy for 3.14t: numpy-pool is skipped"; \
	  $$d/sid-$$v/bin/python /src/bench/what_if_bench.py --gil $$d/sid-$$v/bin/python --ft $$d/ft-bare/bin/python \
	    --out /src/bench/results $(WHAT_IF_ARGS)'

# ---- hardening: sanitizers, valgrind, fuzzing, stress (docs/DEVELOPING.md "Hardening checks") ----
SANITIZE := address,undefined
ASAN_VENV ?= $(BUILD)/asan-venv
# UBSan reports abort (-fno-sanitize-recover); ASan stops at the first report anyway.
UBSAN_OPTIONS := print_stacktrace=1:halt_on_error=1
ASAN_COMMON := abort_on_error=1:halt_on_error=1:detect_stack_use_after_return=1

# valgrind; llvm-symbolizer (package llvm) for readable sanitizer stacks; libFuzzer's
# runtime, which clang only recommends (libclang-rt-<clang major>-dev).
deps-harden: deps
	@missing=""; major=$$(clang --version | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -1); \
	for p in valgrind llvm libclang-rt-$$major-dev; do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then echo "giltracer: missing Debian packages:$$missing; run: sudo apt-get install -y$$missing" >&2; exit 1; fi; \
	  echo "giltracer: installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

# C unit tests (and the fuzz corpus replay) with ASan + UBSan, leak checking on.
test-asan-c: deps-harden
	cmake -S . -B $(BUILD)/asan-ctest -DGT_BUILD_EXTENSION=OFF -DGT_BUILD_TESTS=ON \
	  -DGT_WERROR=$(GT_WERROR) -DGT_SANITIZE=$(SANITIZE) >/dev/null
	cmake --build $(BUILD)/asan-ctest -j2
	cd $(BUILD)/asan-ctest && ASAN_OPTIONS=$(ASAN_COMMON):detect_leaks=1 \
	  UBSAN_OPTIONS=$(UBSAN_OPTIONS) ctest --output-on-failure

# The Python suite with the extension built with ASan + UBSan, in its own venv. The
# runtime is preloaded (the interpreter is not instrumented); PYTHONMALLOC=malloc lets
# ASan see every allocation; CPython leaks by design, so no leak checking here.
# Subprocesses (CLI, notebook kernels) inherit the environment and run under ASan too.
ASAN_PRELOAD := PYTHONMALLOC=malloc LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libubsan.so)"
ASAN_RUN := $(ASAN_PRELOAD) ASAN_OPTIONS=$(ASAN_COMMON):detect_leaks=0 UBSAN_OPTIONS=$(UBSAN_OPTIONS)
asan-venv: deps-harden
	@test -x $(ASAN_VENV)/bin/python || $(PYTHON) -m venv $(ASAN_VENV)
	@$(ASAN_VENV)/bin/python -m pip install -q --upgrade $(PIP_PACKAGES) 2>&1 | grep -v "^\[notice\]" || true
	GT_SANITIZE=$(SANITIZE) $(ASAN_VENV)/bin/python -m pip install -q --no-build-isolation \
	  --force-reinstall --no-deps -Cbuild-dir=$(BUILD)/asan-ext .
	$(ASAN_VENV)/bin/python -m pip install -q "giltracer[notebooks]"

# Reports also go to files, so one from a subprocess whose exit status no test checks
# (a forked child, a kernel) still fails the run.
ASAN_LOGS := $(CURDIR)/$(BUILD)/asan-logs
test-asan-py: asan-venv
	@rm -rf $(ASAN_LOGS) && mkdir -p $(ASAN_LOGS)
	$(ASAN_PRELOAD) ASAN_OPTIONS=$(ASAN_COMMON):detect_leaks=0:log_path=$(ASAN_LOGS)/asan \
	  UBSAN_OPTIONS=$(UBSAN_OPTIONS):log_path=$(ASAN_LOGS)/ubsan \
	  $(ASAN_VENV)/bin/python -m pytest tests -q -p no:cacheprovider $(MAIN_ONLY_ARGS) $(ASAN_PYTEST_ARGS); rc=$$?; \
	if [ -n "$$(ls -A $(ASAN_LOGS))" ]; then cat $(ASAN_LOGS)/*; \
	  echo "test-asan: sanitizer reports above (in $(ASAN_LOGS))" >&2; exit 1; fi; exit $$rc

test-asan: test-asan-c test-asan-py

# C unit tests (and the fuzz corpus replay) under valgrind memcheck. --fair-sched=yes: valgrind
# runs one thread at a time, and its default lock let a thread looping on sched_yield keep
# the one it waited for from running (test_gilhook ran for minutes, twice in CI).
test-valgrind: deps-harden
	cmake -S . -B $(BUILD)/valgrind -DGT_BUILD_EXTENSION=OFF -DGT_BUILD_TESTS=ON \
	  -DGT_WERROR=$(GT_WERROR) \
	  "-DGT_TEST_WRAPPER=valgrind;-q;--fair-sched=yes;--error-exitcode=1;--leak-check=full;--errors-for-leak-kinds=definite,indirect,possible;--track-origins=yes" >/dev/null
	cmake --build $(BUILD)/valgrind -j2
	cd $(BUILD)/valgrind && GT_TEST_UNDER_VALGRIND=1 ctest --output-on-failure

# libFuzzer targets (tests/fuzz/), FUZZ_SECONDS each, from the checked-in corpus.
# New interesting inputs go to $(BUILD)/fuzz/corpus-*; crashes to $(BUILD)/fuzz/artifacts
# (add them to tests/fuzz/corpus/<target>/ as crash-<what> once fixed: ctest replays them).
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := fuzz_merge fuzz_emit
fuzz: deps-harden
	CC=clang cmake -S . -B $(BUILD)/fuzz -DGT_BUILD_EXTENSION=OFF -DGT_BUILD_FUZZ=ON \
	  -DGT_WITH_BPF=OFF -DGT_WERROR=$(GT_WERROR) -DGT_SANITIZE=$(SANITIZE) >/dev/null
	cmake --build $(BUILD)/fuzz -j2
	@mkdir -p $(BUILD)/fuzz/artifacts; failed=""; for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(BUILD)/fuzz/corpus-$$t; echo "=== $$t: $(FUZZ_SECONDS) s"; \
	  ASAN_OPTIONS=$(ASAN_COMMON):detect_leaks=1 UBSAN_OPTIONS=$(UBSAN_OPTIONS) \
	  $(BUILD)/fuzz/$$t -max_total_time=$(FUZZ_SECONDS) -max_len=8192 -timeout=30 \
	    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=$(BUILD)/fuzz/artifacts/$$t- \
	    $(BUILD)/fuzz/corpus-$$t tests/fuzz/corpus/$$t 2>$(BUILD)/fuzz/$$t.log \
	  && grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" $(BUILD)/fuzz/$$t.log \
	  || { tail -60 $(BUILD)/fuzz/$$t.log; failed="$$failed $$t"; }; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz: FAILED:$$failed (inputs in $(BUILD)/fuzz/artifacts)"; exit 1; fi; \
	echo "fuzz: no crash in $(FUZZ_SECONDS) s per target"

# Fork, nested sessions, 1,000 threads, 1,000 start/stop cycles, signals, a pids
# limit, ...: each case in a subprocess with a timeout; report in $(BUILD)/stress/report.md.
# Also on a 3.12+ interpreter when there is one: there the tracer is sys.monitoring, which
# changes the competing-profiler cases.
STRESS_EXTRA ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.12*/bin/python3))
stress: install
	@extra=""; if [ -n "$(STRESS_EXTRA)" ]; then \
	  name=pyenv-$$($(STRESS_EXTRA) -c 'import sysconfig; print(sysconfig.get_python_version())'); \
	  $(MAKE) --no-print-directory matrix-one INTERP=$(STRESS_EXTRA) NAME=$$name && \
	  extra="--python $(MATRIX_DIR)/$$name/bin/python"; \
	fi; \
	$(PY) tests/stress/run_stress.py --out $(BUILD)/stress --python $(PY) $$extra

# `make test` RUNS times in a row (default 10) with two CPU hogs running: the tests must pass
# on a loaded 2-CPU machine every time. One line per run; stops at the first failure.
RUNS ?= 10
test-loop:
	@mkdir -p $(BUILD); sh -c 'while :; do :; done' & h1=$$!; sh -c 'while :; do :; done' & h2=$$!; \
	passed=0; for i in $$(seq 1 $(RUNS)); do s=$$(date +%s); \
	  if $(MAKE) --no-print-directory test > $(BUILD)/test-loop-$$i.log 2>&1; then r=ok; passed=$$((passed+1)); else r=FAILED; fi; \
	  echo "test-loop: run $$i $$r in $$(( $$(date +%s) - s )) s, load $$(cut -d' ' -f1-3 /proc/loadavg) ($(BUILD)/test-loop-$$i.log)"; \
	  [ $$r = ok ] || break; done; kill $$h1 $$h2; \
	echo "test-loop: $$passed of $(RUNS) passed"; [ $$passed = $(RUNS) ]

# The same cases on sid's interpreters (SID_PYTHONS) and the free-threaded 3.14t, in the
# chroot, as root: reports in $(BUILD)/stress-<name>/report.md (not in CI: ~10 min).
stress-sid: pythons
	@failed=""; for n in $(foreach v,$(SID_PYTHONS),sid-$(v)) ft-3.14t; do \
	  echo "=== stress on $$n"; \
	  $(IN_SID) --bind $(CURDIR):/src -- sh -c 'set -e; n=$$1; d=$(SID_MATRIX); \
	    case $$n in ft-*) $(FT_VENV);; *) v=$${n#sid-}; $(SID_VENV);; esac; \
	    cd /src && $$d/$$n/bin/python tests/stress/run_stress.py --out /src/$(BUILD)/stress-$$n \
	      --python $$d/$$n/bin/python' sh $$n || failed="$$failed $$n"; \
	done; \
	if [ -n "$$failed" ]; then echo "stress-sid: FAILED on:$$failed"; exit 1; fi

# The same cases with the ASan + UBSan build: use-after-free races show up here.
stress-asan: asan-venv
	$(ASAN_RUN) $(ASAN_VENV)/bin/python tests/stress/run_stress.py --out $(BUILD)/stress-asan

bench: setup
	$(PY) -m pip install -q viztracer
	$(PY) bench/run.py
	$(PY) bench/profile_bench.py
	$(PY) bench/payload_bench.py
	$(PY) bench/gap_bench.py
	@if [ "$$(id -u)" = 0 ]; then $(MAKE) --no-print-directory bench-what-if; \
	else echo "bench: the what-if validation (3.14 traced vs 3.14t measured) needs root for make pythons: skipped"; fi

# The page's column compression against libdeflate (keep ours only if it wins) -> bench/results/deflate.md.
bench-deflate: setup
	@dpkg -s libdeflate-dev >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && apt-get install -y -qq libdeflate-dev >/dev/null; } || \
	  { echo "giltracer: bench-deflate needs libdeflate-dev: sudo apt-get install -y libdeflate-dev" >&2; exit 1; }
	$(PY) bench/deflate_bench.py

# The hooks GIL probe's cost per GIL event, in C on the fake interpreter object
# -> bench/results/gil-event.md. ~5 s.
bench-gil-event: deps venv
	$(PY) bench/gil_event_bench.py

# The core's thread-locals per TLS model (initial-exec, the fallback build's global-dynamic,
# TLS descriptors; each also with a full static TLS block): ns per GIL event of the hooks
# and per call event of the tracer (bench/results/tls-<version>.md). ~4 min. The builds
# are its own; the Python side is the venv's giltracer (make install, or another venv's:
# make bench-tls PY=/tmp/giltracer-matrix/pyenv-3.13/bin/python).
TLS_RUNS ?= 7
bench-tls: deps
	$(PY) bench/tls_cost.py --runs $(TLS_RUNS)

# Where a GIL-only or sampling session's cost goes on churn2 (a GIL hand-off at every
# call): the OS states, the GIL probe, its floor (the hooks decode, record nothing), the
# clock reads an exact record makes, the take's record at the signal or after the unlock,
# the sampler and an untraced thread taking the GIL as often; CPU time and context
# switches, in one process (bench/results/churn-cost-<version>.md). ~7 min.
bench-churn-cost: setup
	$(PY) bench/churn_cost.py $(CHURN_COST_ARGS)

# Sampling mode's CPU time vs untraced, the GIL probe alone and py-spy --gil --idle
# (installed here; it needs root for ptrace) -> bench/results/sample-<version>.md. ~8 min.
bench-sample: setup
	$(PY) -m pip install -q py-spy
	$(PY) bench/sample_bench.py $(BENCH_SAMPLE_ARGS)

# The README's picture (docs/threads-demo.svg): the demo traced, drawn as a cell's static picture.
readme-picture: setup
	$(PY) docs/make_picture.py

# A long cell past the event budget: LONG_S seconds (untraced) of 4 threads, traced with the default
# options, untraced and with functions=False -> bench/results/long-cell-<python>-<N>s.md.
LONG_S ?= 60
bench-long: setup
	$(PY) bench/long_cell.py --seconds $(LONG_S)

# Bytes of a traced cell's output (tiny and 1M calls) -> bench/results/output-bytes.md;
# BEFORE_PY=<an older build's python> (e.g. main's .venv/bin/python) adds its column.
# Following child processes: start-up per child, merge of 8 x 1M calls.
bench-children: setup
	$(PY) bench/children_bench.py

bench-bytes: setup
	$(PY) bench/output_bytes.py $(if $(BEFORE_PY),--before $(BEFORE_PY))

# Evidence that tracing neither stalls nor slows beyond its targets: the overhead suite and the stall benchmark on each of BENCH_MATRIX
# (pyenv's 3.11, 3.12, 3.13), each in its own venv in MATRIX_DIR with viztracer; reports in
# bench/results/<version>.md and gaps-<version>.md. About 8 minutes per interpreter; run it
# on a quiet machine (the verdicts are ratios, but load widens their intervals).
BENCH_MATRIX ?= $(wildcard $(HOME)/.pyenv/versions/3.11*/bin/python3 $(HOME)/.pyenv/versions/3.12*/bin/python3 \
                  $(HOME)/.pyenv/versions/3.13*/bin/python3)
bench-matrix: deps
	@for py in $(BENCH_MATRIX); do \
	  name=bench-$$($$py -c 'import sysconfig; print(sysconfig.get_python_version())'); \
	  echo "=== $$name ($$py)"; \
	  $(MAKE) --no-print-directory matrix-one INTERP=$$py NAME=$$name && \
	  $(MATRIX_DIR)/$$name/bin/python -m pip install -q viztracer && \
	  $(MATRIX_DIR)/$$name/bin/python bench/run.py && \
	  $(MATRIX_DIR)/$$name/bin/python bench/gap_bench.py || exit 1; \
	done

clean:
	rm -rf $(BUILD) $(VENV) $(MATRIX_DIR) dist *.egg-info
