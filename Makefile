# Megaton — the two commands that do everything on a fresh Debian 12 machine:
#   make test   install dependencies, build (Release, precompiled headers), run unit + multi-rank tests
#   make demo   build, fetch the GPT-2 tokenizer, preprocess the bundled corpus, train a tiny GPT on 4 MPI ranks
#               (TP=2, PP=2), save, resume, generate
# Other targets: deps, build, install PREFIX=..., gpu (on the GPU machine), check (repository hygiene), format, clean,
# fuzz (the libFuzzer targets of tests/fuzz, FUZZ_SECONDS each, under ASan/UBSan: a clang build of their sources only).
# deps: libopenblas0-openmp makes Debian's libtorch use OpenBLAS instead of the reference BLAS (9x faster CPU GEMMs;
# the alternatives system switches libblas.so.3 on install). A Node.js that already brings its own npm (e.g. NodeSource's nodejs, which conflicts with Debian's npm) is
# taken as is; only packages that are missing are installed.

BUILD ?= build
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
PREFIX ?= /usr/local
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
GENERATOR := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")

DEBIAN_PACKAGES := build-essential cmake ninja-build pkg-config git ca-certificates \
  libtorch-dev libopenblas0-openmp libopenmpi-dev openmpi-bin libhdf5-openmpi-dev hdf5-tools libboost-program-options-dev \
  nlohmann-json3-dev libsimdjson-dev libpcre2-dev zlib1g-dev libisal-dev liblzma-dev libcpp-httplib-dev \
  libgtest-dev libgmock-dev libbenchmark-dev nodejs npm fortunes-min fortunes python3 python3-numpy python3-matplotlib \
  python3-torch \
  slurm-wlm munge lmod clang libclang-rt-14-dev

.PHONY: all deps build test demo install gpu check format clean tokenizer fuzz

all: build

deps:
	@missing=""; for p in $(DEBIAN_PACKAGES); do \
	  case $$p in nodejs|npm) command -v $$p >/dev/null 2>&1 && continue ;; esac; \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "make deps: installing$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	else echo "make deps: all Debian packages present"; fi

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) $(GENERATOR) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

tokenizer:
	@bash data/fetch_gpt2_tokenizer.sh

test: build tokenizer
	cd $(BUILD) && OMP_NUM_THREADS=1 ctest --output-on-failure -j $(JOBS)

fuzz: deps
	CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD) $(GENERATOR) -DMEGATON_FUZZ=ON -DMEGATON_PCH=OFF
	cmake --build $(FUZZ_BUILD) -j $(JOBS)
	bash tests/fuzz/run_fuzzers.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

demo: build tokenizer
	bash scripts/demo.sh $(BUILD)

# install PREFIX=...: the binary, the SLURM templates and the docs (cmake --install), then the Lmod and Tcl
# modulefiles for `module use $(PREFIX)/modules; module load megaton` (docs/install.md).
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)
	bash modules/install-modulefiles.sh $(PREFIX)

gpu:
	JOBS=$(JOBS) bash perf/gpu/setup.sh

check:
	bash scripts/check_hygiene.sh

format:
	find src tests perf kernels dev -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(FUZZ_BUILD)
