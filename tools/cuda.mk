# make CUDA=1 (included by the Makefile): the CUDA backend's objects and flags. docs/design.md "The CUDA backend".
# The toolkit: CUDA_HOME (bin/nvcc, include/ with cuda_runtime.h and cublasLt.h, lib/ or lib64/ with
# libcudart_static.a); by default the PyPI one of tools/setup-cuda.sh (.cuda/nvidia/cu13), else the nvcc on PATH,
# else /usr/local/cuda. CUBLAS_INC / NCCL_INC: other folders holding cublasLt.h / nccl.h (e.g. a pip-installed
# nvidia-cublas and nvidia-nccl-cu13 beside a toolkit without them).
.DEFAULT_GOAL := all   # (the targets below come before the Makefile's all)
CUDA_HOME ?= $(firstword $(wildcard $(CURDIR)/.cuda/nvidia/cu13) $(patsubst %/bin/nvcc,%,$(shell command -v nvcc 2>/dev/null)) /usr/local/cuda)
NVCC      ?= $(CUDA_HOME)/bin/nvcc
CUBLAS_INC ?= $(CUDA_HOME)/include
NCCL_INC  ?= $(firstword $(wildcard $(CURDIR)/.cuda/nvidia/nccl/include) $(CUDA_HOME)/include)
CUDART_A  := $(firstword $(wildcard $(CUDA_HOME)/lib64/libcudart_static.a $(CUDA_HOME)/lib/libcudart_static.a $(CUDA_HOME)/targets/x86_64-linux/lib/libcudart_static.a))
ifeq ($(wildcard $(NVCC)),)
$(error make CUDA=1: no nvcc at $(NVCC): run tools/setup-cuda.sh (the PyPI toolkit into .cuda/) or set CUDA_HOME)
endif
ifeq ($(wildcard $(CUBLAS_INC)/cublasLt.h),)
$(error make CUDA=1: no cublasLt.h in $(CUBLAS_INC): run tools/setup-cuda.sh or set CUBLAS_INC)
endif
ifeq ($(CUDART_A),)
$(error make CUDA=1: no libcudart_static.a under $(CUDA_HOME)/lib64 or lib)
endif
# compute capability 8.0 (A100) and 9.0 (H100, H200) as machine code, and 9.0 as PTX for newer GPUs
CUDA_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
CUDA_INCS := -I$(CUDA_HOME)/include -I$(CUBLAS_INC) -I$(NCCL_INC)
NVFLAGS   ?= -std=c++17 -O3 -lineinfo $(CUDA_ARCH) -Xcompiler -Wall,-Wextra -Werror all-warnings -Isrc $(CUDA_INCS) -MMD -MP
CU_SRC    := $(wildcard src/cuda/*.cu)
CU_OBJ    := $(CU_SRC:%.cu=$(BUILD)/obj/%.cu.o)
# libcudart linked in (cudart static): the binary needs only the driver (libcuda.so.1, opened by cudart) and, for
# --device cuda, libcublasLt.so.13 (dlopen); without a driver it runs on the CPU and says so for --device cuda
CUDA_LDLIBS := $(CUDART_A) -lstdc++ -lrt -lpthread -ldl

$(CUDA_C:%.c=$(BUILD)/obj/%.o): CFLAGS += $(CUDA_INCS)

# Every other object is the plain build's, compiled with the same flags: taken from (or made in) CPU_BUILD, so a
# CUDA build after a plain one compiles src/cuda/ only (CI: about a minute instead of the whole library again)
CPU_BUILD ?= build
ifneq ($(abspath $(CPU_BUILD)),$(abspath $(BUILD)))
LIB_OBJ := $(patsubst %.c,$(CPU_BUILD)/obj/%.o,$(filter-out $(CUDA_C),$(LIB_SRC))) $(CUDA_C:%.c=$(BUILD)/obj/%.o)
$(CPU_BUILD)/obj/src/core/version.o: $(CPU_BUILD)/gen/os_version.h
$(CPU_BUILD)/obj/%.o: %.c Makefile
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@
endif

$(BUILD)/obj/%.cu.o: %.cu Makefile tools/cuda.mk
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -c $< -o $@

# unit tests of the CUDA backend that need no GPU (tests/cuda/test_*.c), run by tests/test_device_flag.py
CUDA_TEST_SRC := $(wildcard tests/cuda/test_*.c)
CUDA_TEST_BIN := $(CUDA_TEST_SRC:tests/cuda/%.c=$(BUILD)/tests/cuda/%)
$(BUILD)/tests/cuda/%: $(BUILD)/obj/tests/cuda/%.o $(CU_OBJ) $(BUILD)/libomnishard.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS) $(CUDA_LDLIBS)
$(CUDA_TEST_SRC:%.c=$(BUILD)/obj/%.o): CFLAGS += $(CUDA_INCS)

# `make CUDA=1 cuda`: what CI builds (the binary, the no-GPU tests of the backend and the device check's op_compare;
# the unit tests are the plain build's)
cuda: $(BUILD)/omnishard $(CUDA_TEST_BIN) $(BUILD)/op_compare
.PHONY: cuda
