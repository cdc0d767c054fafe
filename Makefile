# omnishard build. `make` builds build/omnishard and the C unit tests; `make test` runs `make layering` and every test;
# `make asan` builds the unit tests with ASan+UBSan into build-asan/ and runs them. `make fuzz` builds the fuzz
# targets with clang's libFuzzer into build-fuzz/fuzz/ (tests/fuzz/README.md).
# BUILD=dir puts every output under another folder (parallel builds of different people do not collide).
# `make install PREFIX=DIR` installs the binary, tools and docs; `make PORTABLE=1` builds for any x86-64 (below).
# `make CUDA=1` builds the CUDA backend (src/cuda/) beside the CPU one into build-cuda/ (BUILD= another folder):
# nvcc from CUDA_HOME, else the PyPI toolkit tools/setup-cuda.sh puts in .cuda/, else /usr/local/cuda.
ifeq ($(CUDA),1)
BUILD  ?= build-cuda
endif
BUILD  ?= build
CC     := mpicc
# -march=native: this machine's instruction set (the binary may not start on an older CPU). PORTABLE=1 builds for
# any x86-64 since 2009 (x86-64-v2: SSE4.2, POPCNT); MARCH=x86-64-v3 (AVX2, FMA: Haswell and later) or another
# -march value chooses another floor. OpenBLAS and oneDNN pick their kernels for the CPU they run on either way.
ifeq ($(PORTABLE),1)
MARCH  ?= x86-64-v2
endif
MARCH  ?= native
OPT    ?= -O3 -march=$(MARCH)
# make install PREFIX=DIR: DIR/bin/omnishard, DIR/share/omnishard/{tools,docs,README.md,LICENSE}
PREFIX ?= /usr/local
SAN    ?=
# -fno-math-errno: libm calls need not set errno (nothing reads it after a math call), so loops calling sqrtf & co.
# vectorise (k_adamw's was scalar: the errno check beside each vsqrtss kept it out of SIMD, 5x the time); results
# are the same (correctly rounded sqrt either way; -std=c11 keeps FP contraction off, no reassociation).
CFLAGS := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror=implicit-function-declaration -fopenmp -fno-math-errno $(OPT) $(SAN) -g -Isrc -MMD -MP
LDLIBS := -lopenblas -ldnnl -lcjson -lpcre2-8 -lsndfile -lz -lm -ldl
LDFLAGS := -fopenmp $(SAN)
FUZZ_CC ?= clang-14

# src/cuda/: cuda_none.c in the plain build (--device cuda names make CUDA=1), the backend's files in a CUDA one
CUDA_C   := $(filter-out src/cuda/cuda_none.c,$(wildcard src/cuda/*.c))
ifeq ($(CUDA),1)
LIB_SRC  := $(filter-out src/cli/main.c src/cuda/cuda_none.c,$(wildcard src/*/*.c))
else
LIB_SRC  := $(filter-out src/cli/main.c $(CUDA_C),$(wildcard src/*/*.c))
endif
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
TEST_SRC := $(wildcard tests/unit/test_*.c)
TEST_BIN := $(TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)
# each fuzz target tests/fuzz/fuzz_NAME.c: replayed over tests/fuzz/corpus/NAME/ as the unit test test_fuzz_NAME
FUZZ_NAMES := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_REPLAY := $(FUZZ_NAMES:%=$(BUILD)/tests/test_fuzz_%)
PY       ?= .venv/bin/python
# end-to-end tests also run against the sanitizer build (the step, the runtime, checkpoints, error paths)
ASAN_PYTESTS ?= tests/test_train_oracle.py tests/test_errors.py tests/test_export_transformers.py tests/test_zero_runtime.py \
                tests/test_freeze.py tests/test_lora.py tests/test_outputs.py tests/test_head_balance.py

ifeq ($(CUDA),1)
include tools/cuda.mk
endif

# the CUDA kernels of cuda/cu_ops.h run on the CPU as tests/cuda_emu/test_cu_emu: C++ against the stand-in runtime
# tests/cuda_emu/cuda_runtime.h, each launch `k<<<grid, block, smem, stream>>>(args)` rewritten by sed into
# `cu_emu::launch(k, grid, block, smem, stream)(args)`. Not in sanitizer builds (their fibers switch stacks).
# Every src/cuda/cu_*.cu is in it: a new kernel file compiles for the emulator too.
CU_EMU_KERNELS := $(patsubst src/cuda/cu_%.cu,%,$(wildcard src/cuda/cu_*.cu))
CU_EMU_OBJ := $(CU_EMU_KERNELS:%=$(BUILD)/obj/cu_emu/cu_%.o) $(BUILD)/obj/cu_emu/test_cu_emu.o
CU_EMU_CXX := mpicxx -std=c++17 -O1 -g -Wall -Wextra -ffp-contract=off -U_FORTIFY_SOURCE -Wno-unknown-pragmas -Itests/cuda_emu -Isrc/cuda -Isrc -MMD -MP
CU_EMU_BIN := $(if $(SAN),,$(BUILD)/tests/test_cu_emu)

# the version and the git commit baked into the binary (core/version.h): BUILD/gen/os_version.h, rewritten only when
# its text changes (so core/version.c alone is rebuilt after a commit); the commit only when this folder is the
# top of a git checkout (sources unpacked inside another repository's tree are "outside git")
OS_VERSION := 0.1.0
GIT_COMMIT := $(shell [ "$$(git rev-parse --show-toplevel 2>/dev/null)" = "$$(pwd -P)" ] && git rev-parse --short=12 HEAD)
GIT_DIRTY  := $(if $(GIT_COMMIT),$(shell git status --porcelain --untracked-files=no 2>/dev/null | head -c1))
GIT_TEXT   := $(if $(GIT_COMMIT),$(GIT_COMMIT)$(if $(GIT_DIRTY), (modified)),none (built outside a git checkout))

all: $(BUILD)/omnishard $(TEST_BIN) $(FUZZ_REPLAY) $(CUDA_TEST_BIN) $(BUILD)/op_compare $(CU_EMU_BIN)

# (any build folder's: make CUDA=1 takes core/version.o from the plain build's folder, tools/cuda.mk)
%/gen/os_version.h: FORCE
	@mkdir -p $(dir $@)
	@printf '#define OS_VERSION "%s"\n#define OS_GIT_COMMIT "%s"\n' '$(OS_VERSION)' '$(GIT_TEXT)' > $@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi
$(BUILD)/obj/src/core/version.o: $(BUILD)/gen/os_version.h
%/obj/src/core/version.o: CFLAGS += -I$(patsubst %/obj/src/core,%,$(@D))/gen
.PHONY: FORCE
FORCE:

$(BUILD)/obj/%.o: %.c Makefile   # a flag changed here rebuilds every object
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/cu_emu/%.o: src/cuda/%.cu Makefile
	@mkdir -p $(dir $@)
	sed -E 's/([A-Za-z_][A-Za-z_0-9]*)<<<(.*)>>>/cu_emu::launch(\1, \2)/' $< > $(@:.o=.cpp)
	$(CU_EMU_CXX) -c $(@:.o=.cpp) -o $@

$(BUILD)/obj/cu_emu/test_cu_emu.o: tests/cuda_emu/test_cu_emu.cpp Makefile
	@mkdir -p $(dir $@)
	$(CU_EMU_CXX) -c $< -o $@

$(BUILD)/tests/test_cu_emu: $(CU_EMU_OBJ) $(BUILD)/libomnishard.a
	@mkdir -p $(dir $@)
	mpicxx $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/libomnishard.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# CU_OBJ (make CUDA=1): the kernels, linked as objects (ops_cuda.c refers to them weakly, which takes nothing
# out of an archive)
$(BUILD)/omnishard: $(BUILD)/obj/src/cli/main.o $(CU_OBJ) $(BUILD)/libomnishard.a
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS) $(CUDA_LDLIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(BUILD)/libomnishard.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS) $(CUDA_LDLIBS)

# the device check's op-by-op comparison of a backend against the CPU's (tests/device/op_compare.c,
# tools/device-check.sh); built with every build so that a change of the seam keeps it compiling
$(BUILD)/op_compare: $(BUILD)/obj/tests/device/op_compare.o $(CU_OBJ) $(BUILD)/libomnishard.a
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS) $(CUDA_LDLIBS)

$(BUILD)/tests/test_fuzz_%: $(BUILD)/obj/tests/fuzz/fuzz_%.o $(BUILD)/obj/tests/fuzz/replay.o \
                           $(BUILD)/obj/tests/fuzz/scratch.o $(BUILD)/libomnishard.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/fuzz/fuzz_%: $(BUILD)/obj/tests/fuzz/fuzz_%.o $(BUILD)/obj/tests/fuzz/scratch.o $(BUILD)/libomnishard.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -fsanitize=fuzzer $^ -o $@ $(LDLIBS)

.PRECIOUS: $(BUILD)/obj/tests/fuzz/%.o

fuzz-targets: $(FUZZ_NAMES:%=$(BUILD)/fuzz/fuzz_%)

# libFuzzer needs clang (Debian: clang-14 libclang-rt-14-dev libomp-14-dev); mpicc runs it through OMPI_CC
fuzz:
	OMPI_CC=$(FUZZ_CC) $(MAKE) BUILD=build-fuzz OPT="-O1 -g -march=native -fno-omit-frame-pointer -Wno-pass-failed" \
	    SAN="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined" fuzz-targets

# every #include "..." of src/ against the folder order in tools/check_layering.py, and no cycle between modules
layering:
	python3 tools/check_layering.py

# -rs: the summary ends with each skipped test and why it was skipped (what it needs, how to run it)
PYTEST_FLAGS := -q -rs
test: all layering
	$(PY) -m pytest $(PYTEST_FLAGS) tests

# gcc's -fsanitize=undefined leaves out float-cast-overflow (a double beyond the integer type: undefined in C)
ASAN_SAN := -fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=undefined,float-cast-overflow
asan:
	$(MAKE) BUILD=build-asan OPT="-O1 -fno-omit-frame-pointer" SAN="$(ASAN_SAN)" all
	@set -e; for t in build-asan/tests/test_*; do echo "== $$t"; ASAN_OPTIONS=detect_leaks=0 $$t; done; echo "asan: all unit tests passed"
	OMNISHARD_BUILD=build-asan ASAN_OPTIONS=detect_leaks=0 $(PY) -m pytest $(PYTEST_FLAGS) $(ASAN_PYTESTS)

# the binary finds tools/convert_parquet.py (omnishard convert) in ../share/omnishard/tools from its own folder
install: $(BUILD)/omnishard
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/omnishard/tools $(DESTDIR)$(PREFIX)/share/omnishard/docs/spec
	install -m 755 $(BUILD)/omnishard $(DESTDIR)$(PREFIX)/bin/omnishard
	install -m 644 tools/*.py $(DESTDIR)$(PREFIX)/share/omnishard/tools/
	install -m 755 tools/*.sh $(DESTDIR)$(PREFIX)/share/omnishard/tools/
	install -m 644 docs/*.md $(DESTDIR)$(PREFIX)/share/omnishard/docs/
	install -m 644 docs/spec/*.md $(DESTDIR)$(PREFIX)/share/omnishard/docs/spec/
	install -m 644 README.md LICENSE $(DESTDIR)$(PREFIX)/share/omnishard/

clean:
	rm -rf $(BUILD) build-asan build-fuzz build-cuda

.PHONY: all test asan clean layering fuzz fuzz-targets install
-include $(LIB_OBJ:.o=.d) $(CU_OBJ:.o=.d) $(BUILD)/obj/src/cli/main.d $(BUILD)/obj/tests/device/op_compare.d \
         $(TEST_BIN:$(BUILD)/tests/%=$(BUILD)/obj/tests/unit/%.d) \
         $(wildcard $(BUILD)/obj/tests/fuzz/*.d) $(CU_EMU_OBJ:.o=.d)
