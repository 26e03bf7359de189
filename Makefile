# Thin front end over CMake. The two set-up commands of README.md:
#   make demo   install missing Debian packages, build, run the main job on the embedded default
#   make test   install missing Debian packages, build, run the whole suite (ctest),
#               then rebuild with AddressSanitizer + UBSan and run the unit tests again
# Other targets: make (build only), make install PREFIX=..., make check (suite, no ASan),
# make test-mpich (docs/testing.md), make bench, make clean.
PREFIX ?= /usr/local
BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
DEMO_OUT ?= demo-out
# Warnings are errors in CI (CI=true) and whenever DD_WERROR=ON is given.
DD_WERROR ?= $(if $(filter true,$(CI)),ON,OFF)
export OPENBLAS_NUM_THREADS ?= 1

.PHONY: all build deps demo test check asan-test install bench clean

all: build

deps:
	@bash scripts/install-deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDD_WERROR=$(DD_WERROR) -DCMAKE_INSTALL_PREFIX=$(PREFIX)

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

demo: deps
	$(MAKE) build
	$(BUILD)/distdpd demo --out $(DEMO_OUT)

check: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 1800

asan-test:
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DDD_SANITIZE=ON -DDD_WERROR=$(DD_WERROR)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) -L unit --timeout 1800

test: deps
	$(MAKE) check
	$(MAKE) asan-test

# The mpi label against MPICH (mpicc.mpich, mpiexec.mpich; Open MPI stays the default
# MPI): docs/testing.md, "MPICH".
MPICH_BUILD ?= build-mpich
.PHONY: test-mpich
test-mpich:
	cmake -S . -B $(MPICH_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDD_WERROR=$(DD_WERROR) \
	  -DMPI_C_COMPILER=mpicc.mpich -DMPIEXEC_EXECUTABLE=/usr/bin/mpiexec.mpich
	cmake --build $(MPICH_BUILD) -j $(JOBS)
	cd $(MPICH_BUILD) && ctest --output-on-failure -L mpi -LE slow --timeout 1800

# Re-configure with the prefix so that the RPATH and distdpd.pc point at it.
install: $(BUILD)/CMakeCache.txt
	cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX)
	cmake --build $(BUILD) -j $(JOBS)
	cmake --install $(BUILD)

bench: build
	@if [ -f bench/run.sh ]; then bash bench/run.sh $(BUILD); else echo "no benchmarks yet"; fi

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(MPICH_BUILD)
