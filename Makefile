# Harrier — the two commands a fresh Debian 12 machine needs: `make run` and `make test`.
#
#   make deps        install Debian packages, ONNX Runtime 1.29.0 and llama.cpp v0.4.0 (built once
#                    into ~/.cache/harrier-deps; idempotent; tools/deps.sh)
#   make build       configure and build build/harrier (Ninja, ccache, -Werror)
#   make models      generate the example repository's models (examples/models)
#   make run         deps + build + models, then serve examples/models on port 8000
#   make test        deps + build + models, then every test (unit + integration) via CTest; the
#                    unit tests include fuzz_replay_<target>, each fuzz target over its committed
#                    corpus (tests/fuzz/corpus/, docs/fuzzing.md)
#   make test-sanitize  unit tests, corpus replays included, under AddressSanitizer + UBSan, then
#                    the attack suites against an ASan + UBSan harrier (ASAN_SUITES; docs/testing.md)
#   make test-tsan   unit tests under ThreadSanitizer, then the integration suites that drive the
#                    server's threads hardest against a ThreadSanitizer harrier (TSAN_SUITES)
#   make bench       micro-benchmarks, instructions per request (valgrind), then the shared kit
#                    (../shared/bench/compare.sh)
#   make fuzz        build the libFuzzer targets (clang, ASan + UBSan) and fuzz each for FUZZ_SECONDS (60);
#                    FUZZ_TARGETS="http2_frames ..." picks some (docs/fuzzing.md)
#   make install     install build/harrier and ONNX Runtime into PREFIX (/usr/local): bin/harrier
#                    with run path $ORIGIN/../lib, lib/libonnxruntime.so.1; any user can run it
#                    (docs/deployment.md). DESTDIR is honoured.
#   make image       an OCI image with buildah (--storage-driver vfs), from scratch: make install's
#                    files, the binary's library closure, a non-root user, the example repository;
#                    IMAGE (harrier:VERSION) names it (tools/image.sh, docs/deployment.md)
#   make format      clang-format every source file
BUILD ?= build
BUILD_TYPE ?= RelWithDebInfo
PY := /usr/bin/python3
HTTP_PORT ?= 8000
CMAKE_FLAGS := -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DHARRIER_WERROR=ON
DEPS_STAMP := $(BUILD)/.deps-ok
JOBS ?= $(shell nproc)
PREFIX ?= /usr/local

.PHONY: all deps build models run install image test test-unit test-integration test-sanitize test-tsan bench fuzz format clean

all: build

$(DEPS_STAMP): tools/deps.sh tools/llama_source.sh
	bash tools/deps.sh
	@mkdir -p $(BUILD) && touch $@

deps:
	bash tools/deps.sh

build: $(DEPS_STAMP)
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

models: $(DEPS_STAMP)
	$(PY) tools/make_example_models.py examples/models

run: build models
	$(BUILD)/harrier serve --model-repository examples/models --http-port $(HTTP_PORT)

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

image: build models
	bash tools/image.sh $(BUILD) $(IMAGE)

test: build models
	cd $(BUILD) && ctest --output-on-failure -j 2

test-unit: build
	cd $(BUILD) && ctest --output-on-failure -L unit -j 2

test-integration: build models
	cd $(BUILD) && ctest --output-on-failure -L integration

test-sanitize: $(DEPS_STAMP) models
	cmake -S . -B $(BUILD)-sanitize $(CMAKE_FLAGS) -DCMAKE_BUILD_TYPE=Debug -DHARRIER_SANITIZE=ON -DHARRIER_BUILD_BENCH=OFF >/dev/null
	cmake --build $(BUILD)-sanitize -j $(JOBS)
	bash tools/sanitized_run.sh address $(BUILD)-sanitize

test-tsan: $(DEPS_STAMP) models
	@# -Werror off: gcc 12's stringop-overflow warnings misfire on instrumented code (the main
	@# build holds the warnings).
	cmake -S . -B $(BUILD)-tsan $(CMAKE_FLAGS) -DHARRIER_WERROR=OFF -DHARRIER_TSAN=ON -DHARRIER_BUILD_BENCH=OFF >/dev/null
	cmake --build $(BUILD)-tsan -j $(JOBS)
	bash tools/sanitized_run.sh thread $(BUILD)-tsan

bench: build
	bash bench/run.sh $(BUILD)

fuzz: $(DEPS_STAMP)
	JOBS=$(JOBS) bash tools/fuzz.sh $(or $(FUZZ_SECONDS),60) $(FUZZ_TARGETS)

format:
	find include src tests bench -name '*.h' -o -name '*.cc' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(BUILD)-sanitize $(BUILD)-tsan build-fuzz
