# Entry points. Each target installs what is missing, configures and builds.
#   make demo   - run flashlight on the shipped examples
#   make test   - build and run every test (lit + Catch2 + docs, the pip
#                 package) through ctest
#   make docs   - regenerate docs/generated from ODS
#   make fuzz   - install clang-22, build the libFuzzer targets (build-fuzz/)
#                 and run each for FUZZ_RUNS executions

BUILD ?= build
LLVM_DIR ?= /usr/lib/llvm-22
JOBS ?= $(shell nproc)

.PHONY: all deps configure build test demo docs fuzz clean

all: build

deps:
	./scripts/install-deps.sh

$(BUILD)/build.ninja:
	$(MAKE) deps
	cmake -G Ninja -S . -B $(BUILD) \
	  -DCMAKE_BUILD_TYPE=Release \
	  -DMLIR_DIR=$(LLVM_DIR)/lib/cmake/mlir \
	  -DLLVM_EXTERNAL_LIT=$(LLVM_DIR)/bin/lit \
	  -DFLASHLIGHT_STATIC_COMPILER=ON

configure: $(BUILD)/build.ninja

build: configure
	ninja -C $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

demo: build
	./scripts/demo.sh $(BUILD)

docs: build
	mkdir -p docs/generated
	cp $(BUILD)/docs/*.md docs/generated/

FUZZ_RUNS ?= 100000
fuzz:
	./scripts/install-deps.sh --fuzz
	./scripts/fuzz.sh $(FUZZ_RUNS)

clean:
	rm -rf $(BUILD)
