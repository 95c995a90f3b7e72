# kernels/cuda/cuda.mk — build rules of the CUDA backend, kept out of PGXS's
# OBJS: build/llm_cuda.so is its own shared object that the engine dlopen()s
# (engine/backend_loader.c), so neither the extension nor the CLI links
# against CUDA.  Included by the top-level Makefile; also usable alone where
# PostgreSQL is absent (the GPU machine: bench/gpu-check):
#
#   make -f kernels/cuda/cuda.mk build/llm_cuda.so
#
# Variables: CUDA_HOME (/usr/local/cuda), NVCC, CUDA_ARCH_FLAGS.

CUDA_HOME ?= /usr/local/cuda
NVCC ?= $(CUDA_HOME)/bin/nvcc
# sm_90 machine code for H100/H200 plus compute_90 PTX for newer GPUs.
CUDA_ARCH_FLAGS ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
# Host code warnings are errors; symbols hidden except the exported create functions.
CUDA_HOST_FLAGS := -fPIC,-fvisibility=hidden,-Wall,-Wextra,-Wno-unused-parameter,-Werror
NVCC_FLAGS ?= -O3 -lineinfo
NVCC_FLAGS += -std=c++17 $(CUDA_ARCH_FLAGS) -Xcompiler $(CUDA_HOST_FLAGS) -Werror all-warnings \
	-I. -Ikernels/cuda
CUDA_CC ?= $(or $(CC),cc)

CUDA_SRCS := $(wildcard kernels/cuda/*.cu)
CUDA_OBJS := $(patsubst %.cu,build/%.o,$(CUDA_SRCS)) build/kernels/cuda/quant_types.o \
	build/kernels/cuda/elementwise.o build/kernels/cuda/quant.o build/kernels/cuda/dequant_more.o
CUDA_LIB  := build/llm_cuda.so

build/kernels/cuda/%.o: kernels/cuda/%.cu kernels/cuda/cuda_internal.h kernels/cuda/backend_cuda.h \
		kernels/cuda/dequant_more.cuh kernels/backend.h kernels/quant_types.h
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -c $< -o $@

# quant_types.c linked into the library (hidden) so that it needs nothing from its host program.
build/kernels/cuda/quant_types.o: kernels/quant_types.c kernels/quant_types.h
	@mkdir -p $(dir $@)
	$(CUDA_CC) -O2 -std=gnu11 -fPIC -fvisibility=hidden -Wall -Wextra -Werror -I. -c $< -o $@

# The CPU backend's GELU table (elementwise.c, with quant.c's fp16 conversion) built in the same way,
# so that gelu_mul uses the very table the CPU backend uses.
build/kernels/cuda/elementwise.o: kernels/cpu/elementwise.c kernels/cpu/elementwise.h kernels/cpu/quant.h
	@mkdir -p $(dir $@)
	$(CUDA_CC) -O2 -std=gnu11 -fPIC -fvisibility=hidden -Wall -Wextra -Werror -Wno-unused-parameter \
		-I. -c $< -o $@

build/kernels/cuda/quant.o: kernels/cpu/quant.c kernels/cpu/quant.h kernels/quant_types.h
	@mkdir -p $(dir $@)
	$(CUDA_CC) -O2 -std=gnu11 -fPIC -fvisibility=hidden -Wall -Wextra -Werror -Wno-unused-parameter \
		-ffp-contract=off -I. -c $< -o $@

# the dequantization of the quant_more.h types, which quant.c's llm_dequantize_row hands on
build/kernels/cuda/dequant_more.o: kernels/cpu/dequant_more.c kernels/cpu/quant_more.h kernels/cpu/quant.h
	@mkdir -p $(dir $@)
	$(CUDA_CC) -O2 -std=gnu11 -fPIC -fvisibility=hidden -Wall -Wextra -Werror -Wno-unused-parameter \
		-ffp-contract=off -I. -c $< -o $@

# cudart linked statically (nvcc's default); cuBLAS from CUDA_HOME, found through the rpath.
$(CUDA_LIB): $(CUDA_OBJS)
	@mkdir -p $(dir $@)
	$(NVCC) -shared $(CUDA_ARCH_FLAGS) -o $@ $(CUDA_OBJS) -cudart static -lcublas \
		-Xlinker -rpath,$(CUDA_HOME)/lib64 -Xlinker --no-undefined
