# The two commands of the README: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Every in-tree plugin distribution (plugins/<name>/pyproject.toml), installed beside the host.
PLUGIN_DIRS := $(patsubst %/pyproject.toml,%,$(wildcard plugins/*/pyproject.toml))
# The example plugins the docs walk through; the tests install them for real.
EXAMPLE_DIRS := $(patsubst %/pyproject.toml,%,$(wildcard examples/*/pyproject.toml))
PLUGIN_TESTS := $(wildcard plugins/*/tests examples/*/tests)

# The members' sandbox image (sandbox/image/); bump the tag when its packages change.
SANDBOX_IMAGE ?= skald-sandbox:2

# The data dir holds skald.yml, so it is decided here (an empty one takes the default).
# The address is not: set in the environment it passes through, and unset (or set but
# empty: `SKALD_HOST= make run`, which would listen on every interface) it is left to
# skald.yml and then to the defaults, 127.0.0.1:8080. Exporting those defaults made
# `server.port` and `server.host` in skald.yml silently lose to them (operator probe).
SKALD_DATA_DIR := $(or $(SKALD_DATA_DIR),./data)
export SKALD_DATA_DIR
ifeq ($(strip $(SKALD_HOST)),)
unexport SKALD_HOST
endif
ifeq ($(strip $(SKALD_PORT)),)
unexport SKALD_PORT
endif

.PHONY: run test install install-test uninstall-old bench clean sandbox-image

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The host (`skald-host`) and its contract (`skald-hookspecs`, in skald_hookspecs/) are two
# distributions. A venv made before the split holds the old `skald` distribution, whose
# files overlap the new ones: remove it first, once, and its editable install's metadata
# left in the checkout (importlib.metadata still found a phantom 'skald' there).
uninstall-old: $(BIN)/python
	@if $(BIN)/python -m pip show --quiet skald >/dev/null 2>&1; then \
	  echo "Removing the old 'skald' distribution (now skald-host + skald-hookspecs)"; \
	  $(BIN)/python -m pip uninstall --quiet --yes skald; \
	fi
	@rm -rf skald.egg-info

# pip runs again only when what it installs from changed (a pyproject.toml, this Makefile),
# so a second `make run` starts at once; the installs are editable, so edits to the
# sources need none. Twice quiet: setuptools' build warnings are not for the person
# starting the server (errors still show).
INSTALL_INPUTS := pyproject.toml skald_hookspecs/pyproject.toml Makefile $(addsuffix /pyproject.toml,$(PLUGIN_DIRS))

$(VENV)/.installed: $(INSTALL_INPUTS) | uninstall-old
	@echo "Installing Skald and its plugins into $(VENV) (the first run, or the first after an update: about a minute)"
	$(BIN)/pip install --quiet --quiet -e ./skald_hookspecs -e . $(foreach d,$(PLUGIN_DIRS),-e ./$(d))
	@touch $@

$(VENV)/.installed-test: $(INSTALL_INPUTS) $(addsuffix /pyproject.toml,$(EXAMPLE_DIRS)) | uninstall-old
	$(BIN)/pip install --quiet --quiet -e ./skald_hookspecs -e '.[test]' $(foreach d,$(PLUGIN_DIRS) $(EXAMPLE_DIRS),-e ./$(d))
	@touch $@ $(VENV)/.installed

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test

## Install everything and start the server on embedded defaults (data under ./data).
run: install
	$(BIN)/skald serve

## Install the test extras and run the whole test suite, on TEST_WORKERS processes (a
## file's tests stay on one), then the sandbox tests on their own: they drive the
## machine's Docker engine and its limits, which two workers at once shared badly.
## TEST_WORKERS=0 runs everything in this one process, in order.
TEST_WORKERS ?= 2
test: install-test
ifeq ($(TEST_WORKERS),0)
	$(BIN)/python -m pytest tests $(PLUGIN_TESTS)
else
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --ignore=tests/sandbox tests $(PLUGIN_TESTS)
	$(BIN)/python -m pytest tests/sandbox
endif

## Build the sandbox image once: from the Dockerfile where debian:bookworm-slim can be
## pulled, else from a debootstrap root filesystem (no registry needed).
sandbox-image:
	docker image inspect $(SANDBOX_IMAGE) >/dev/null 2>&1 \
	  || docker build -t $(SANDBOX_IMAGE) sandbox/image \
	  || sandbox/image/build-rootfs.sh $(SANDBOX_IMAGE)

## Benchmarks: ratios against a baseline measured in the same run.
bench: install-test
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) build *.egg-info
