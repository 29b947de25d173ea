# The README's two commands: `make demo` and `make test`. Both install what is missing, build, then run;
# run again with nothing changed, they only check and take seconds.
VENV  := .venv
BUILD := build/native
# CI (CI=true) builds the native code with warnings as errors.
WERROR := $(if $(filter true,$(CI)),ON,OFF)

.PHONY: demo test build deps native clean

demo: build
	@scripts/demo.sh

test: build
	@$(VENV)/bin/python -m pytest -q

build: deps $(VENV)/.installed native

deps:
	@scripts/install-deps.sh

$(VENV)/.installed: pyproject.toml constraints.txt scripts/install-python.sh
	@scripts/install-python.sh $(VENV)

native: deps
	@test -f $(BUILD)/build.ninja || cmake -S native -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIOLOOM_WERROR=$(WERROR) >/dev/null
	@cmake --build $(BUILD) -j2

clean:
	rm -rf build
