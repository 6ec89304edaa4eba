# The two commands: `make demo` and `make test`. Both set up what is missing, then build.
BUILD ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= $(shell nproc)
PYTHON := $(CURDIR)/.venv/bin/python

.PHONY: all setup configure build test pytest opinfo demo bench bench-kernels bench-models tsan ubsan cuda-check device-pack cuda-only bench-distributed clean

all: build

setup:
	@bash scripts/setup.sh $(BUILD)

configure: setup
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DPython3_EXECUTABLE=$(PYTHON) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	@$(MAKE) --no-print-directory pytest

# The Python tests alone. They record the first launch of each generated kernel (the model set's,
# the OpInfo samples'), and the CUDA check compiles every 8th with NVRTC and replays them all, as
# cuda.generated_kernels does for the unit tests' (docs/testing.md).
pytest: build
	rm -rf $(BUILD)/launches-python
	EMBER_CACHE_DIR=$(CURDIR)/$(BUILD)/test-cache EMBER_RECORD_LAUNCHES=$(CURDIR)/$(BUILD)/launches-python \
		$(PYTHON) -m pytest -q tests/python
	$(PYTHON) -m pytest -q tests/cuda  # its own run: each folder's conftest is imported as "conftest"
	./$(BUILD)/tests/ember_cuda_check $(BUILD)/launches-python --compile-sample 8

# PyTorch's whole OpInfo database through ember (about an hour; the short form is in pytest):
# writes benchmarks/results/opinfo.md. EMBER_OPINFO_SAMPLES: samples per op, dtype and mode.
opinfo: build
	EMBER_CACHE_DIR=$(CURDIR)/$(BUILD)/test-cache nice -n 10 $(PYTHON) tests/python/opinfo_full.py

demo: build
	./$(BUILD)/benchmarks/ember_demo
	$(PYTHON) benchmarks/demo_models.py

# Real models against eager and torch.compile (installs matplotlib for the chart).
bench-models: build
	@$(PYTHON) -c "import matplotlib" 2>/dev/null || $(PYTHON) -m pip install -q matplotlib
	$(PYTHON) benchmarks/models.py

# Training steps under DDP with 1 and 2 processes: eager, ember, torch.compile.
bench-distributed: build
	$(PYTHON) benchmarks/distributed.py

bench: build
	./$(BUILD)/benchmarks/ember_bench_overhead

# Generated kernels against the interpreter (C++), then against PyTorch eager and torch.compile
# in one process (Python, through the bridge).
bench-kernels: build
	./$(BUILD)/benchmarks/ember_bench_kernels --threads 1
	$(PYTHON) benchmarks/torch_kernels.py --threads 1
	$(PYTHON) benchmarks/torch_compute.py --threads 1
	./$(BUILD)/benchmarks/ember_bench_kernels
	$(PYTHON) benchmarks/torch_kernels.py
	$(PYTHON) benchmarks/torch_compute.py

# Every CUDA kernel that the unit tests' generated kernels make, compiled with NVRTC for sm_80
# and sm_90 and assembled by ptxas (make test compiles every 8th; both replay them all emulated).
cuda-check: test
	./$(BUILD)/tests/ember_cuda_check $(BUILD)/launches
	./$(BUILD)/tests/ember_cuda_check $(BUILD)/launches-python

# What tests/cuda/device_check.sh needs on a GPU machine (records of the tests' launches, and
# oneDNN and OpenBLAS as Debian packages), into .records and .debs (docs/cuda.md).
device-pack: test
	bash scripts/device_pack.sh $(BUILD)

# The CUDA-only configuration of GPU machines (no MLIR/LLVM, no Catch2), built here to show it
# builds and its Python package runs: CPU work on the interpreter and library kernels.
cuda-only: setup
	@cmake -S . -B $(BUILD)-cuda-only -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DEMBER_CPU_CODEGEN=OFF \
		-DEMBER_BUILD_UNIT_TESTS=OFF -DEMBER_BUILD_BENCHMARKS=OFF -DPython3_EXECUTABLE=$(PYTHON) >/dev/null
	@cmake --build $(BUILD)-cuda-only -j $(JOBS)
	PYTHONPATH=$(CURDIR)/$(BUILD)-cuda-only/python $(PYTHON) -m pytest -q tests/cuda
	PYTHONPATH=$(CURDIR)/$(BUILD)-cuda-only/python $(PYTHON) -m pytest -q tests/python/test_cuda_runtime.py

# The compile tests (8 threads with mixed shapes among them) under ThreadSanitizer, in their own build.
tsan: setup
	@cmake -S . -B $(BUILD)-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS=-fsanitize=thread \
		-DEMBER_BUILD_BENCHMARKS=OFF -DEMBER_BUILD_PYTHON=OFF >/dev/null
	@cmake --build $(BUILD)-tsan -j $(JOBS) --target ember_unit_tests
	./$(BUILD)-tsan/tests/ember_unit_tests "~[sweep]"

# The huge-size sweep and the compile tests under UndefinedBehaviorSanitizer, in their own build:
# a size computation that overflows int64 anywhere stops the run with its file and line.
ubsan: setup
	@cmake -S . -B $(BUILD)-ubsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DCMAKE_CXX_FLAGS="-fsanitize=undefined -fno-sanitize-recover=undefined" \
		-DEMBER_BUILD_BENCHMARKS=OFF -DEMBER_BUILD_PYTHON=OFF >/dev/null
	@cmake --build $(BUILD)-ubsan -j $(JOBS) --target ember_huge_sizes ember_unit_tests
	./$(BUILD)-ubsan/tests/ember_huge_sizes
	./$(BUILD)-ubsan/tests/ember_unit_tests "[compile]"

clean:
	rm -rf $(BUILD) $(BUILD)-tsan $(BUILD)-ubsan
