# slipstream: set-up, tests, demo and benchmarks.
#
#   make demo    set everything up, then stream a folder of JPEGs (DATA=folder, default: generated)
#   make test    set everything up, then run the test suite
#
# Both install what is missing: system packages with apt (Debian/Ubuntu), a
# virtual environment in .venv, PyTorch (CPU wheel, pinned) and the package.

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
DATA ?=
PYTEST_ARGS ?=
QUICK_TESTS ?= tests/test_params.py tests/test_compile_key.py tests/test_docs_operations.py tests/test_docstrings.py \
  tests/test_import_cycles.py tests/test_format.py tests/test_bindings.py $(wildcard tests/test_native_*.py)

BIN := $(VENV)/bin
STAMP := $(VENV)/.slipstream-installed
CORE_STAMP := $(VENV)/.slipstream-core-installed
SOURCES := pyproject.toml CMakeLists.txt $(shell find native/src native/include slipstream -type f \( -name '*.c' -o -name '*.h' -o -name '*.py' \) -not -path '*/__pycache__/*' 2>/dev/null)
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
JPEG_CFLAGS = $$(pkg-config --cflags --libs libjpeg)
VIDEO_CFLAGS = -DSLIP_HAVE_VIDEO=1 $$(pkg-config --cflags --libs libavformat libavcodec libavutil)
SANITIZE := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
ASAN_DIR := build/asan
FUZZ_SECONDS ?= 600
FUZZ_DIR := build/fuzz
CLANG ?= $(shell command -v clang || command -v clang-14 || echo clang)
FUZZ_FLAGS = -std=c11 -g -O1 -fno-sanitize-recover=undefined -fno-omit-frame-pointer -Inative/include

# The GPU check (benchmarks/gpu_check.py) runs in the GPU machine's own Python;
# what that Python lacks travels as wheels (GPU_WHEELS, for GPU_PYTHON_VERSION).
# scikit-image brings the photos the tests read (tests/real_photos.py reads its
# data folder without importing it, so it is installed without dependencies).
GPU_PYTHON ?= $(if $(wildcard $(BIN)/python),$(BIN)/python,python3)
GPU_PYTHON_VERSION ?= 3.12
GPU_WHEELS := build/gpu-wheels
GPU_EXTRA_WHEELS ?= tbb==2023.2.0 tcmlib==1.6.0 scikit-image==0.26.0
GPU_PHOTO_MB ?= 32
GPU_CHECK_ARGS ?=

.PHONY: help demo test test-quick bindings asan fuzz bench bench-peers system-deps wheel gpu-bundle gpu-check clean

help:
	@echo "make demo     set up, then stream JPEGs through the fused kernel (DATA=folder to use your own)"
	@echo "make test     set up, then run the tests"
	@echo "make test-quick  a quick subset of the tests, for the edit loop"
	@echo "make bindings regenerate slipstream/_native.py from native/include/slipstream.h"
	@echo "make asan     run the native tests under AddressSanitizer and UndefinedBehaviorSanitizer"
	@echo "make fuzz     run the libFuzzer harnesses, FUZZ_SECONDS each (default 600), sanitized"
	@echo "make bench    all benchmarks, then BENCHMARKS.md against FFCV, the DataLoader, DALI, SPDL, LitData and MosaicML streaming on the same bytes (IMAGES=folder)"
	@echo "make bench-peers  the peers' virtual environments under benchmarks/.venvs"
	@echo "make wheel    dist/: the sdist and a self-contained manylinux wheel, libjpeg-turbo and FFmpeg's decoders linked in (Linux x86-64)"
	@echo "make gpu-bundle  what make gpu-check needs on a GPU machine: dist/ (the wheel), build/gpu-wheels, build/gpu-photos"
	@echo "make gpu-check   on a GPU machine: CUDA tests, training-step and scaling benchmarks (one line and exit 0 without CUDA)"
	@echo "make clean    remove .venv, build/ and dist/"

# System packages: a C compiler, pkg-config, libjpeg-turbo headers, FFmpeg's libavformat and libavcodec headers
# (video) and its command-line tool (the tests make their clips with it), venv support.
system-deps:
	@missing=""; \
	command -v cc >/dev/null 2>&1 || missing="$$missing gcc libc6-dev"; \
	command -v pkg-config >/dev/null 2>&1 || missing="$$missing pkg-config"; \
	pkg-config --exists 'libjpeg >= 2.0' 2>/dev/null || missing="$$missing libjpeg-dev"; \
	pkg-config --exists 'libavformat >= 59' 'libavcodec >= 59' 2>/dev/null || \
	  missing="$$missing libavformat-dev libavcodec-dev"; \
	command -v ffmpeg >/dev/null 2>&1 || missing="$$missing ffmpeg"; \
	$(PYTHON) -c 'import venv, ensurepip' >/dev/null 2>&1 || missing="$$missing python3-venv"; \
	if [ -n "$$missing" ]; then \
	  if command -v apt-get >/dev/null 2>&1; then \
	    echo "installing system packages:$$missing"; \
	    $(SUDO) apt-get update -qq && \
	    $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	  else \
	    echo "missing:$$missing -- install them with your package manager (see README.md)"; exit 1; \
	  fi; \
	fi

$(BIN)/python: | system-deps
	$(PYTHON) -m venv $(VENV)

# The package and its own dependencies: all the demo needs.  torch goes in
# first and explicitly: a bare `torch` requirement with none installed would
# download the multi-GB CUDA build.
$(CORE_STAMP): $(SOURCES) | $(BIN)/python system-deps
	@$(BIN)/python -c 'import torch' >/dev/null 2>&1 || $(BIN)/python -m pip install $(TORCH)
	$(BIN)/python -m pip install . -C cmake.define.SLIPSTREAM_VIDEO=ON
	@touch $@

# What the tests need on top (Ray, datasets, SeaweedFS, ...).  LitData goes in
# without its dependencies: it requires torchvision, which would replace that torch.
$(STAMP): $(CORE_STAMP)
	$(BIN)/python -m pip install '.[s3,ray,test]'
	$(BIN)/python -m pip install --no-deps 'litdata>=0.2.50'
	@touch $@

demo: $(CORE_STAMP)
	$(BIN)/slipstream demo $(if $(DATA),--data "$(DATA)")

# The whole suite, on as many worker processes as the machine has cores (at most 4), each test file on one
# worker (its module fixtures are made once); the tests share one compile cache (tests/conftest.py).
# PYTHONFAULTHANDLER: a crash prints every thread's stack, as does a test past faulthandler_timeout; a test past
# pytest-timeout's limit fails.  The 30 slowest tests are listed.  Fewer tests collected than tests/COLLECTED
# fails the run: no test is lost unnoticed.
PYTEST_WORKERS ?= auto
test: $(STAMP)
	PYTHONFAULTHANDLER=1 $(BIN)/pytest -n $(PYTEST_WORKERS) --maxprocesses 4 --dist loadfile --durations=30 \
	  --collected-at-least $$(cat tests/COLLECTED) $(PYTEST_ARGS)

# A quick subset for the edit loop (a few minutes): the compiler, the parameters, the format and the native kernels.
test-quick: $(STAMP)
	PYTHONFAULTHANDLER=1 $(BIN)/pytest -n $(PYTEST_WORKERS) --maxprocesses 4 --dist loadfile -q $(QUICK_TESTS) $(PYTEST_ARGS)

bindings: | $(BIN)/python
	$(BIN)/python codegen/generate_bindings.py

# The C test program and the Python native tests against a sanitized build of the library.
asan: $(STAMP)
	@mkdir -p $(ASAN_DIR)
	cc -std=c11 -O1 -g $(SANITIZE) -Inative/include native/src/*.c native/tests/test_native.c $(JPEG_CFLAGS) \
	  $(VIDEO_CFLAGS) -lpthread -lm -o $(ASAN_DIR)/test_native
	$(ASAN_DIR)/test_native
	cc -std=c11 -O1 -g -fPIC -shared $(SANITIZE) -Inative/include native/src/*.c $(JPEG_CFLAGS) $(VIDEO_CFLAGS) \
	  -lpthread -lm -o $(ASAN_DIR)/libslipstream.so
	SLIPSTREAM_LIBRARY=$(CURDIR)/$(ASAN_DIR)/libslipstream.so \
	LD_PRELOAD="$$(cc -print-file-name=libasan.so) $$(cc -print-file-name=libubsan.so)" \
	ASAN_OPTIONS=detect_leaks=0 \
	$(BIN)/pytest -p no:cacheprovider tests/test_native_decode.py tests/test_native_tiles.py tests/test_native_errors.py \
	  tests/test_native_pixels.py tests/test_native_encode_io.py tests/test_native_limits.py tests/test_native_crc32.py \
	  tests/test_native_guard.py tests/test_numba_intrinsics.py tests/test_native_warps_tones.py \
	  tests/test_native_steps_mixing.py tests/test_video.py

bench: $(STAMP) bench-peers
	$(BIN)/python -m pip install -q 'matplotlib>=3.7' imagecodecs
	$(BIN)/python benchmarks/kernels.py $(IMAGES)
	$(BIN)/python benchmarks/lossless.py $(IMAGES)
	$(BIN)/python benchmarks/compiler.py
	$(BIN)/python benchmarks/write.py $(IMAGES)
	$(BIN)/python benchmarks/check.py $(IMAGES)
	$(BIN)/python benchmarks/loader_io.py $(IMAGES)
	$(BIN)/python benchmarks/pipelines.py $(IMAGES)
	$(BIN)/python benchmarks/integrity.py $(IMAGES)
	$(BIN)/python benchmarks/remote.py $(IMAGES)
	$(BIN)/python benchmarks/compare.py $(IMAGES)

# libFuzzer harnesses (native/fuzz) under AddressSanitizer and UndefinedBehaviorSanitizer:
# C harnesses for the JPEG and planar kernels (the third differential: the
# writer's check against the decode it stands for) and for the video demuxers and decoders, and the file-format parsers through
# atheris (libFuzzer for Python) with the sanitized library preloaded.  Each
# runs FUZZ_SECONDS from the committed seeds plus what earlier runs found
# (build/fuzz/corpus); a crash stops make and leaves its input in build/fuzz.
fuzz: $(STAMP)
	@command -v $(CLANG) >/dev/null 2>&1 || { echo "installing clang"; $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends clang; }
	@mkdir -p $(FUZZ_DIR)/corpus/jpeg_info $(FUZZ_DIR)/corpus/decode_crop_resize $(FUZZ_DIR)/corpus/format \
	  $(FUZZ_DIR)/corpus/jpeg_check $(FUZZ_DIR)/corpus/planes $(FUZZ_DIR)/corpus/tiles $(FUZZ_DIR)/corpus/video
	@# clang links fuzzers only with its sanitizer runtime, a separate Debian package.
	@printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return 0; }\n' | \
	  $(CLANG) -x c -fsanitize=fuzzer,address,undefined - -o $(FUZZ_DIR)/probe >/dev/null 2>&1 || { \
	  runtime=libclang-rt-$$($(CLANG) -dumpversion | cut -d. -f1)-dev; echo "installing $$runtime"; \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$runtime; }
	@$(BIN)/python -c 'import atheris' 2>/dev/null || $(BIN)/python -m pip install -q atheris
	$(CLANG) $(FUZZ_FLAGS) -fsanitize=fuzzer,address,undefined native/src/*.c native/fuzz/fuzz_jpeg_info.c \
	  $(JPEG_CFLAGS) -lpthread -lm -o $(FUZZ_DIR)/fuzz_jpeg_info
	$(CLANG) $(FUZZ_FLAGS) -fsanitize=fuzzer,address,undefined native/src/*.c native/fuzz/fuzz_decode_crop_resize.c \
	  $(JPEG_CFLAGS) -lpthread -lm -o $(FUZZ_DIR)/fuzz_decode_crop_resize
	$(CLANG) $(FUZZ_FLAGS) -fsanitize=fuzzer,address,undefined native/src/*.c native/fuzz/fuzz_jpeg_check.c \
	  $(JPEG_CFLAGS) -lpthread -lm -o $(FUZZ_DIR)/fuzz_jpeg_check
	$(CLANG) $(FUZZ_FLAGS) -fsanitize=fuzzer,address,undefined native/src/*.c native/fuzz/fuzz_planes.c \
	  $(JPEG_CFLAGS) -lpthread -lm -o $(FUZZ_DIR)/fuzz_planes
	$(CLANG) $(FUZZ_FLAGS) -fsanitize=fuzzer,address,undefined native/src/*.c native/fuzz/fuzz_tiles.c \
	  $(JPEG_CFLAGS) -lpthread -lm -o $(FUZZ_DIR)/fuzz_tiles
	$(CLANG) $(FUZZ_FLAGS) -fsanitize=fuzzer,address,undefined native/src/*.c native/fuzz/fuzz_video.c \
	  $(JPEG_CFLAGS) $(VIDEO_CFLAGS) -lpthread -lm -o $(FUZZ_DIR)/fuzz_video
	$(CLANG) $(FUZZ_FLAGS) -fPIC -shared -fsanitize=fuzzer-no-link,address,undefined native/src/*.c \
	  $(JPEG_CFLAGS) -lpthread -lm -o $(FUZZ_DIR)/libslipstream.so
	cd $(FUZZ_DIR) && ./fuzz_jpeg_info -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	  corpus/jpeg_info $(CURDIR)/native/fuzz/corpus/jpeg_info
	cd $(FUZZ_DIR) && ./fuzz_decode_crop_resize -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	  corpus/decode_crop_resize $(CURDIR)/native/fuzz/corpus/decode_crop_resize
	cd $(FUZZ_DIR) && ./fuzz_jpeg_check -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	  corpus/jpeg_check $(CURDIR)/native/fuzz/corpus/jpeg_info
	cd $(FUZZ_DIR) && ./fuzz_planes -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	  corpus/planes $(CURDIR)/native/fuzz/corpus/decode_crop_resize
	cd $(FUZZ_DIR) && ./fuzz_tiles -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	  corpus/tiles $(CURDIR)/native/fuzz/corpus/jpeg_info
	cd $(FUZZ_DIR) && ./fuzz_video -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 -rss_limit_mb=4096 \
	  corpus/video $(CURDIR)/native/fuzz/corpus/video
	cd $(FUZZ_DIR) && SLIPSTREAM_LIBRARY=$(CURDIR)/$(FUZZ_DIR)/libslipstream.so ASAN_OPTIONS=detect_leaks=0 \
	  LD_PRELOAD="$$($(CURDIR)/$(BIN)/python -c 'import atheris; print(atheris.path())')/asan_with_fuzzer.so" \
	  $(CURDIR)/$(BIN)/python $(CURDIR)/native/fuzz/fuzz_format.py -max_total_time=$(FUZZ_SECONDS) \
	  -print_final_stats=1 -max_len=65536 corpus/format $(CURDIR)/native/fuzz/corpus/format

# The peers' own virtual environments under benchmarks/.venvs (FFCV, DataLoader + Pillow, DALI when it installs, SPDL, LitData, MosaicML streaming).
bench-peers:
	bash benchmarks/peers/install-ffcv.sh
	bash benchmarks/peers/install-dataloader.sh
	if [ -f benchmarks/peers/install-dali.sh ]; then bash benchmarks/peers/install-dali.sh; fi
	bash benchmarks/peers/install-spdl.sh
	bash benchmarks/peers/install-litdata.sh
	bash benchmarks/peers/install-mosaic.sh

# The tools it needs (Zig, auditwheel, nasm, libjpeg-turbo's and FFmpeg's sources) are fetched into build/wheel: see the script.
wheel:
	PYTHON=$(PYTHON) bash packaging/build-wheel.sh

# Everything make gpu-check needs that is not in the repository, for a machine
# that cannot fetch anything: the wheel, the wheels its Python lacks, and as
# many of the sample photos as fit in GPU_PHOTO_MB.  Carry the three folders.
gpu-bundle: wheel | $(BIN)/python
	rm -rf $(GPU_WHEELS) && mkdir -p $(GPU_WHEELS)
	$(BIN)/python -m pip download -q --no-deps --only-binary=:all: --python-version $(GPU_PYTHON_VERSION) \
	  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
	  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d $(GPU_WHEELS) $(GPU_EXTRA_WHEELS)
	$(BIN)/python benchmarks/gpu_data.py bundle --megabytes $(GPU_PHOTO_MB)
	@du -sh dist $(GPU_WHEELS) build/gpu-photos
	@echo "on the GPU machine, with dist, $(GPU_WHEELS) and build/gpu-photos carried: make gpu-check"

# On a GPU machine: installs dist/'s wheel and build/gpu-wheels into GPU_PYTHON,
# then checks and measures (benchmarks/gpu_check.py; output in $$OUT or build/gpu-check;
# GPU_CHECK_ARGS="--budget 540" gives it more time).
gpu-check:
	$(GPU_PYTHON) benchmarks/gpu_check.py $(GPU_CHECK_ARGS)

clean:
	rm -rf $(VENV) build dist
