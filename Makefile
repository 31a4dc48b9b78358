# gpt2 trainer: see README.md. Host code (llmc/*.cpp, llmc/*/*.cpp) is built once into build/libllmc.a and
# shared by the tools, both trainers and the unit tests.
CXX      ?= g++
CXXFLAGS ?= -O3 -march=native
CXXFLAGS += -std=c++17 -Wall -Wextra -fopenmp -I. -MMD -MP
LDLIBS   += -lfmt -lpthread
include scripts/ccache.mk

# BUILD=DIR puts every object and binary under DIR (default build). NO_USE_MPI=1 (NO_MULTI_GPU=1
# implies it) builds without MPI into $(BUILD)/no-mpi/ (see the MPI section), also under a BUILD given
# on the command line: objects with and without MPI never share a folder, where an archive of both
# would change its members with each build.
ifeq ($(NO_MULTI_GPU),1)
NO_USE_MPI := 1
endif
LLMC_MPI_SRCS := llmc/dist/mpi_communicator.cpp llmc/dist/mpi_launch.cpp
BUILD     := build
ifeq ($(NO_USE_MPI),1)
override BUILD := $(BUILD)/no-mpi
endif
LLMC_SRCS := $(filter-out $(if $(filter 1,$(NO_USE_MPI)),$(LLMC_MPI_SRCS),llmc/dist/mpi_launch_absent.cpp),\
                          $(wildcard llmc/*.cpp llmc/*/*.cpp))
# `ar` keeps one member per file name: two llmc/ sources with the same name would silently drop one.
LLMC_SAME_NAMES := $(shell printf '%s\n' $(notdir $(LLMC_SRCS)) | sort | uniq -d)
ifneq ($(LLMC_SAME_NAMES),)
$(error llmc/ has several sources named $(LLMC_SAME_NAMES): give each a distinct file name)
endif
LLMC_OBJS := $(LLMC_SRCS:%.cpp=$(BUILD)/%.o)
UNIT_SRCS := $(wildcard tests/unit/*.cpp)
UNIT_OBJS := $(UNIT_SRCS:%.cpp=$(BUILD)/%.o)
LIBLLMC   := $(BUILD)/libllmc.a

.PHONY: all setup data run test test-quick bench-tokenize clean
all: tokenize train_gpt2 test_gpt2 hf_convert

setup:
	@bash scripts/setup.sh

$(BUILD)/%.o: %.cpp
	@mkdir -p $(dir $@)
	$(CCACHE) $(CXX) $(CXXFLAGS) -c $< -o $@

# The recipe of the three host libraries: a new archive each time, as `ar r` into the old one would
# keep the members of sources that are gone.
define archive
@rm -f $@
ar rcs $@ $^
endef

$(LIBLLMC): $(LLMC_OBJS)
	$(archive)

tokenize: $(BUILD)/tokenize.o $(LIBLLMC)
	$(CXX) $(CXXFLAGS) $^ -o $@ $(LDLIBS)

train_gpt2: $(BUILD)/train_gpt2.o $(LIBLLMC)
	$(CXX) $(CXXFLAGS) $^ -o $@ $(LDLIBS)

test_gpt2: $(BUILD)/test_gpt2.o $(LIBLLMC)
	$(CXX) $(CXXFLAGS) $^ -o $@ $(LDLIBS)

hf_convert: $(BUILD)/hf_convert.o $(LIBLLMC)
	$(CXX) $(CXXFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/unit_tests: $(UNIT_OBJS) $(LIBLLMC)
	$(CXX) $(CXXFLAGS) $^ -o $@ $(LDLIBS)

# Targets that need installed packages run `setup` first, then build in a sub-make, so that a
# parallel build on a fresh machine never compiles before the headers and libraries are there.
data: setup
	@$(MAKE) --no-print-directory tokenize
	@bash scripts/prepare_corpus.sh

run: data
	@$(MAKE) --no-print-directory train_gpt2
	@bash scripts/run.sh

# make test: every check (tests/run_all.sh); make test-cpu, test-dist, test-emu, test-text, test-tools
# and test-gpu-tools (tests/gpu: the CUDA build, the GPU bundle and the GPU session's scripts, all
# without a GPU): one area's checks; make test-quick: the edit loop's few minutes (tests/quick.sh).
TEST_AREA_TARGETS := test-cpu test-dist test-emu test-text test-tools test-gpu-tools
.PHONY: $(TEST_AREA_TARGETS)
test $(TEST_AREA_TARGETS): setup
	@$(MAKE) --no-print-directory tokenize train_gpt2 test_gpt2 hf_convert
	@TEST_AREAS="$(patsubst test-%,%,$(patsubst test-gpu-tools,gpu,$(filter-out test,$@)))" bash tests/run_all.sh

test-quick: setup
	@$(MAKE) --no-print-directory tokenize train_gpt2 test_gpt2 hf_convert
	@bash tests/quick.sh

bench-tokenize: setup
	@$(MAKE) --no-print-directory tokenize
	@bash scripts/bench_tokenize.sh

clean:
	rm -rf $(BUILD) tokenize train_gpt2 test_gpt2 hf_convert

-include $(LLMC_OBJS:.o=.d) $(UNIT_OBJS:.o=.d) $(BUILD)/tokenize.d $(BUILD)/train_gpt2.d $(BUILD)/test_gpt2.d $(BUILD)/hf_convert.d

# ==== CUDA trainer (docs/cuda-trainer.md) ======================================================
# make train_gpt2cu / test_gpt2cu [PRECISION=BF16|FP32] [USE_CUDNN=0] [NO_MULTI_GPU=1], make test-gpu,
# make bench, make gpu-dist, make gpu-session.
# Objects go to build/cuda-<precision>[-nocudnn][-nonccl]/; the host library for the CUDA binaries is
# compiled for x86-64-v3 (not -march=native) into build/cuda-host/, so the same binaries run on the
# GPU machine. scripts/check_gpu_build.sh runs before anything of it is compiled: it names what the
# machine lacks (nvcc, cuBLAS, cuDNN, NCCL, MPI, fmt) and how to get it or leave it out.
# USE_CUDNN=0: no cuDNN (the attention runs on our own kernels, llmc/cuda/attention.cuh); NO_MULTI_GPU=1:
# no NCCL (one GPU, or ranks that sum through host memory; the MPI section's part is its own).
# FMT_INCLUDE=DIR builds with header-only fmt from DIR (for a GPU machine without libfmt).
# CUDA_LIB_INCLUDES, CUBLAS_LIBS, CUDNN_LIBS, NCCL_LIBS: where cuBLAS, cuDNN or NCCL are only Python
# wheels, their include folders and versioned libraries by path (scripts/cuda_wheels.sh prints them).
NVCC       ?= /usr/local/cuda/bin/nvcc
include scripts/nvcc_compress.mk
CUBLAS_LIBS ?= -lcublasLt -lcublas
CUDNN_LIBS  ?= -lcudnn
NCCL_LIBS   ?= -lnccl
PRECISION  ?= BF16
# The GPUs the binaries hold code for (README, "GPU machine"): sm_80 (A100 and later Ampere/Ada, as
# SASS), sm_90a (H100/H200), and compute_80 as PTX, which the driver compiles at start-up for any
# newer GPU (Blackwell sm_100/sm_120): nvcc takes that PTX from the sm_80 pass, at no extra cost. The
# PTX must be a plain architecture: an "a" one (compute_90a) runs on that exact GPU only.
CUDA_ARCHS ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_80,code=compute_80 \
              -gencode arch=compute_90a,code=sm_90a
# What CUDA_ARCHS names after code= (sm_80 compute_80 sm_90a), for the start-up error on a GPU that
# none of them fits (llmc/cuda/device_platform.cuh); CUDA_ARCHS itself where it names none that way.
cuda_comma := ,
CUDA_CODES := $(or $(filter sm_% compute_%,$(patsubst code=%,%,$(subst $(cuda_comma), ,$(subst [, ,$(subst ], ,\
              $(subst \,,$(subst ",,$(CUDA_ARCHS)))))))),$(CUDA_ARCHS))
ifeq ($(PRECISION),BF16)
CUDA_PREC       := bf16
CUDA_PREC_FLAGS :=
else ifeq ($(PRECISION),FP32)
CUDA_PREC       := fp32
CUDA_PREC_FLAGS := -DENABLE_FP32
else
$(error PRECISION must be BF16 or FP32, got '$(PRECISION)')
endif
ifneq ($(FMT_INCLUDE),)
CUDA_FMT_FLAGS := -DFMT_HEADER_ONLY -I$(FMT_INCLUDE)
CUDA_FMT_LIBS  :=
else
CUDA_FMT_LIBS  := -lfmt
endif
USE_CUDNN ?= 1
ifeq ($(filter 0 1,$(USE_CUDNN)),)
$(error USE_CUDNN must be 0 (no cuDNN: our own attention kernels) or 1, got '$(USE_CUDNN)')
endif
ifneq ($(filter-out 0 1,$(NO_MULTI_GPU)),)
$(error NO_MULTI_GPU must be 1 (no NCCL or MPI: one GPU) or 0, got '$(NO_MULTI_GPU)')
endif
CUDA_NO_CUDNN  := $(filter 0,$(USE_CUDNN))
CUDA_NO_NCCL   := $(filter 1,$(NO_MULTI_GPU))
CUDA_VARIANT   := $(if $(CUDA_NO_CUDNN),-nocudnn)$(if $(CUDA_NO_NCCL),-nonccl)
# CUDA_WERROR=1 (tests/gpu/check_cuda_build.sh and check_gpu_dist.sh): warnings are errors, in folders
# of their own (-werror), so that every object there compiled clean whatever was built elsewhere.
CUDA_WERROR_DIR := $(if $(filter 1,$(CUDA_WERROR)),-werror)
CUDA_DIR       := $(BUILD)/cuda-$(CUDA_PREC)$(CUDA_VARIANT)$(CUDA_WERROR_DIR)
CUDA_HOST      := $(BUILD)/cuda-host$(CUDA_WERROR_DIR)
CUDA_HOST_OBJS := $(LLMC_SRCS:%.cpp=$(CUDA_HOST)/%.o)
CUDA_HOST_LIB  := $(CUDA_HOST)/libllmc.a
CUDA_LIB_OBJS  := $(addprefix $(CUDA_DIR)/llmc/,cuda/cuda_backend.o cuda/cuda_backend_state.o cuda/cuda_backend_fp8.o cuda/forward_backward.o cuda/cuda_device.o \
                  $(if $(CUDA_NO_NCCL),,dist/nccl_communicator.o) $(if $(CUDA_PREC_FLAGS)$(CUDA_NO_CUDNN),,cuda/cudnn_attention.o))
# What the sources ask (llmc/cuda/device_platform.cuh): whether cuDNN and NCCL exist.
CUDA_VARIANT_FLAGS := $(if $(CUDA_NO_CUDNN),-DLLMC_NO_CUDNN) $(if $(CUDA_NO_NCCL),-DLLMC_NO_NCCL)
CUDA_CXXFLAGS  := -std=c++17 -O3 -march=x86-64-v3 -Wall -Wextra -fopenmp -I. -MMD -MP $(CUDA_FMT_FLAGS) \
                  $(CUDA_LIB_INCLUDES)
CUDA_NVCCFLAGS := -std=c++17 -O3 $(CUDA_ARCHS) -I. $(CUDA_FMT_FLAGS) $(CUDA_LIB_INCLUDES) $(CUDA_PREC_FLAGS) \
                  $(CUDA_VARIANT_FLAGS) -DLLMC_CUDA_CODES='"$(CUDA_CODES)"' -Xcompiler -Wall,-Wextra,-fopenmp
ifeq ($(CUDA_WERROR),1)
CUDA_CXXFLAGS  += -Werror
CUDA_NVCCFLAGS += -Werror=all-warnings -Xcompiler -Werror
endif
# RUNPATH $ORIGIN: a bundle's libfmt/libgomp next to the binary win over missing system ones.
CUDA_LDFLAGS   := -Xlinker -rpath -Xlinker '$$ORIGIN'
# libnccl: the GPU machine's (218 MB, not bundled); libmpi: appended in the MPI section.
CUDA_LDLIBS    := $(CUDA_FMT_LIBS) $(CUBLAS_LIBS) $(if $(CUDA_NO_CUDNN),,$(CUDNN_LIBS)) $(if $(CUDA_NO_NCCL),,$(NCCL_LIBS)) \
                  -lgomp -lpthread
GPU_DIST       := $(BUILD)/gpu-dist
DEV_CUDA_BENCHES := $(filter-out compile_fp32,$(basename $(notdir $(wildcard dev/cuda/*.cu))))

.PHONY: test-gpu bench gpu-session gpu-dist cuda-binaries dev-cuda gpu-build-check FORCE

# Every object of the CUDA binaries waits for it (order-only: it never makes one out of date).
gpu-build-check:
	@NVCC='$(NVCC)' CXX='$(CXX)' CUBLAS_LIBS='$(CUBLAS_LIBS)' CUDNN_LIBS='$(CUDNN_LIBS)' NCCL_LIBS='$(NCCL_LIBS)' \
	  CUDA_LIB_INCLUDES='$(CUDA_LIB_INCLUDES)' FMT_INCLUDE='$(FMT_INCLUDE)' MPI_INCLUDE='$(MPI_INCLUDE)' \
	  MPI_LIBDIR='$(MPI_LIBDIR)' USE_CUDNN='$(USE_CUDNN)' NO_MULTI_GPU='$(NO_MULTI_GPU)' NO_USE_MPI='$(NO_USE_MPI)' \
	  bash scripts/check_gpu_build.sh

$(CUDA_HOST)/%.o: %.cpp | gpu-build-check
	@mkdir -p $(dir $@)
	$(CCACHE) $(CXX) $(CUDA_CXXFLAGS) -c $< -o $@

$(CUDA_HOST_LIB): $(CUDA_HOST_OBJS)
	$(archive)

$(CUDA_DIR)/%.o: %.cu | gpu-build-check
	@mkdir -p $(dir $@)
	$(CCACHE) $(NVCC) $(CUDA_NVCCFLAGS) $(NVCC_COMPRESS) -MMD -MP -MF $(@:.o=.d) -c $< -o $@

# The two mains hold no device code (they reach the GPU through llmc/cuda/cuda_backend.h, a plain
# C++ header): nvcc compiles them as C++, without a device pass per architecture over every header.
$(CUDA_DIR)/train_gpt2.o $(CUDA_DIR)/test_gpt2.o: CUDA_NVCCFLAGS += -x c++

$(CUDA_DIR)/train_gpt2cu: $(CUDA_DIR)/train_gpt2.o $(CUDA_LIB_OBJS) $(CUDA_HOST_LIB)
	$(NVCC) $(CUDA_ARCHS) $^ -o $@ $(CUDA_LDFLAGS) $(CUDA_LDLIBS)

$(CUDA_DIR)/test_gpt2cu: $(CUDA_DIR)/test_gpt2.o $(CUDA_LIB_OBJS) $(CUDA_HOST_LIB)
	$(NVCC) $(CUDA_ARCHS) $^ -o $@ $(CUDA_LDFLAGS) $(CUDA_LDLIBS)

# A program that takes part of the GPU's memory for the GPU session's reliability step: the CUDA
# runtime only, no kernels.
$(CUDA_DIR)/hold_gpu_memory: tests/gpu/hold_gpu_memory.cpp | gpu-build-check
	@mkdir -p $(dir $@)
	$(NVCC) $(CUDA_NVCCFLAGS) -x c++ $< -o $@

# The top-level binaries are copies of the PRECISION just asked for.
train_gpt2cu test_gpt2cu: %: $(CUDA_DIR)/% FORCE
	cp -f $< $@

cuda-binaries: $(CUDA_DIR)/train_gpt2cu $(CUDA_DIR)/test_gpt2cu $(CUDA_DIR)/hold_gpu_memory

# The dev/cuda benchmarks (dev/cuda/Makefile) as gpu-dist carries them: their objects in
# $(BUILD)/dev_cuda[-werror], linked with the CPU references that the trainers' host library holds.
DEV_CUDA_REF_OBJS := $(filter $(CUDA_HOST)/llmc/cpu/%,$(CUDA_HOST_OBJS))
dev-cuda: $(DEV_CUDA_REF_OBJS) | gpu-build-check
	@$(MAKE) --no-print-directory -C dev/cuda OBJDIR=$(abspath $(BUILD))/dev_cuda$(CUDA_WERROR_DIR) \
	  REF_OBJS="$(abspath $(DEV_CUDA_REF_OBJS))" $(if $(CUDA_WERROR_DIR),WERROR=1)

test-gpu:
	@bash scripts/test_gpu.sh

bench:
	@bash scripts/bench_gpu.sh

# make gpu-session: check and benchmark this GPU in one command (scripts/gpu_session.sh), with
# GPU_SESSION_BUDGET=540 (seconds), GPU_SESSION_OUT=out/gpu-session (the summary and the logs) and
# LLMC_DIR=~/llm.c (an llm.c checkout to compare with; else its snapshots, when there are any).
gpu-session:
	@GPU_SESSION_BUDGET="$(GPU_SESSION_BUDGET)" GPU_SESSION_OUT="$(GPU_SESSION_OUT)" LLMC_DIR="$(LLMC_DIR)" \
	  bash scripts/gpu_session.sh

# Every GPU binary (host code for x86-64-v3) with the libfmt/libgomp it loads, this machine's Open
# MPI runtime (scripts/bundle_openmpi.sh: build/gpu-dist/openmpi, started by build/gpu-dist/bin/mpirun;
# bin/libmpi.so.40 links to its libmpi), fmt's and MPI's headers for a build from source there, the
# corpus shards (corpus/, `make data`), llm.c's train_gpt2cu built from the snapshots in
# LLMC_SNAPSHOTS (default ../shared/external) when there are any (llmc/, with its COMMIT;
# scripts/llmc_snapshot.sh) and our commit
# (PROJECT_COMMIT), in build/gpu-dist, at most GPU_DIST_MAX_MIB: a bundle to copy, with the
# working tree, to a GPU machine without a toolchain (docs/cuda-trainer.md).
GPU_DIST_MAX_MIB := 60
gpu-dist: gpu-build-check data
	@$(MAKE) --no-print-directory PRECISION=BF16 cuda-binaries
	@$(MAKE) --no-print-directory PRECISION=FP32 cuda-binaries
	@$(MAKE) --no-print-directory dev-cuda
	@rm -rf $(GPU_DIST) && mkdir -p $(GPU_DIST)/bin $(GPU_DIST)/include
	@for p in bf16 fp32; do for b in train_gpt2cu test_gpt2cu; do \
	  cp $(BUILD)/cuda-$$p$(CUDA_VARIANT)$(CUDA_WERROR_DIR)/$$b $(GPU_DIST)/bin/$$b-$$p; done; done
	@cp $(BUILD)/cuda-bf16$(CUDA_VARIANT)$(CUDA_WERROR_DIR)/hold_gpu_memory $(GPU_DIST)/bin/
	@cp $(addprefix dev/cuda/,$(DEV_CUDA_BENCHES) run_all.sh) $(GPU_DIST)/bin/
	@cp -L $$(ldd $(GPU_DIST)/bin/*-bf16 $(GPU_DIST)/bin/*-fp32 $(addprefix $(GPU_DIST)/bin/,$(DEV_CUDA_BENCHES)) \
	  | awk '/libfmt|libgomp/ {print $$3}' | sort -u) $(GPU_DIST)/bin/
	@bash scripts/bundle_openmpi.sh $(GPU_DIST)
	@ln -sf ../openmpi/lib/libmpi.so.40 $(GPU_DIST)/bin/libmpi.so.40
	@cp -r $$(dirname $$(echo '#include <fmt/format.h>' | $(CXX) -M -x c++ - | tr ' ' '\n' | grep '/fmt/format.h$$')) \
	  $(GPU_DIST)/include/
	@mkdir -p $(GPU_DIST)/include/mpi && cp $$(mpicc --showme:incdirs | cut -d' ' -f1)/*.h $(GPU_DIST)/include/mpi/
	@ln -sf libmpi.so.40 $(GPU_DIST)/openmpi/lib/libmpi.so
	@echo "$(DEV_CUDA_BENCHES)" > $(GPU_DIST)/dev_cuda_benches.txt
	@mkdir -p $(GPU_DIST)/corpus && cp data/corpus/corpus_*.bin $(GPU_DIST)/corpus/
	@snapshots=$${LLMC_SNAPSHOTS:-../shared/external}; external=$${LLMC_EXTERNAL:-external}; \
	  if [ -d $$external/llm.c ] || ls $$snapshots/llm.c-*.tar.gz >/dev/null 2>&1; then \
	    bash scripts/llmc_snapshot.sh $(GPU_DIST)/llmc; \
	  else echo "gpu-dist: no llm.c snapshot in $$snapshots (LLMC_SNAPSHOTS) or $$external/: the bundle has no llm.c;" \
	    "there, make gpu-session LLMC_DIR=~/llm.c builds one from a checkout"; fi
	@git describe --always --dirty --abbrev=12 > $(GPU_DIST)/PROJECT_COMMIT 2>/dev/null || echo unknown > $(GPU_DIST)/PROJECT_COMMIT
	@size=$$(du -sm $(GPU_DIST) | cut -f1); \
	  if [ $$size -gt $(GPU_DIST_MAX_MIB) ]; then \
	    echo "gpu-dist: $(GPU_DIST) is $$size MiB, over the bundle's limit of $(GPU_DIST_MAX_MIB) MiB (GPU_DIST_MAX_MIB):"; \
	    du -sm $(GPU_DIST)/* | sort -rn; exit 1; fi; \
	  echo "gpu-dist: $(GPU_DIST) ($$size MiB of at most $(GPU_DIST_MAX_MIB)); copy it with the working tree to the GPU machine, there: make gpu-session"
	@echo "  ranks there: $(GPU_DIST)/bin/mpirun -np N ... (Open MPI bundled in $(GPU_DIST)/openmpi)"

-include $(CUDA_HOST_OBJS:.o=.d) $(wildcard $(BUILD)/cuda-*/*.d $(BUILD)/cuda-*/llmc/*/*.d)
# ==== end of the CUDA trainer section ==========================================================

# ==== MPI (docs/multi-gpu.md) ==================================================================
# Every binary links libmpi: llmc/dist/process_group.cpp initialises MPI only under a launcher (mpirun,
# srun) with -pi mpi (the default), so the same binary also runs as a single process and with
# -pi tcp|fs. The CUDA host library needs mpi.h too.
# OMPI_SKIP_MPICXX: only MPI's C API (the deprecated C++ bindings would need libmpi_cxx).
# make mpi-tests: the MPI test programs (tests/dist/*.cpp -> build/mpi_tests/*), run by
# tests/dist/check_mpi.sh, check_streaming.sh and check_nompi.sh; make nccl-communicator: compiles
# (only) the NCCL communicator with nvcc.
# MPI_INCLUDE=DIR MPI_LIBDIR=DIR: a machine without OpenMPI's compiler wrappers (the GPU machine)
# builds against the headers and libmpi that `make gpu-dist` bundles.
# NO_USE_MPI=1 (llm.c's name; NO_MULTI_GPU=1 implies it): no mpi.h, no libmpi. The sources of
# LLMC_MPI_SRCS are left out and llmc/dist/mpi_launch_absent.cpp stands in for mpi_launch.cpp
# (the top of this file), ranks start with -pi tcp|fs only. Its objects and binaries go to
# build/no-mpi/ (BUILD), never mixed with the MPI build's: `make NO_USE_MPI=1` builds
# build/no-mpi/{tokenize,train_gpt2,test_gpt2,hf_convert}; the top-level ./train_gpt2 and the
# others stay the MPI build's.
ifeq ($(NO_USE_MPI),1)
NO_MPI_BINARIES := $(addprefix $(BUILD)/,tokenize train_gpt2 test_gpt2 hf_convert)
ifneq ($(filter all tokenize train_gpt2 test_gpt2 hf_convert test mpi-tests,$(MAKECMDGOALS)),)
$(error NO_USE_MPI=1 builds into $(BUILD)/: run `make NO_USE_MPI=1` (or name $(NO_MPI_BINARIES)); \
  the top-level binaries, the tests and mpi-tests are the MPI build's)
endif
.DEFAULT_GOAL := no-mpi
.PHONY: no-mpi
no-mpi: $(NO_MPI_BINARIES)
$(NO_MPI_BINARIES): $(BUILD)/%: $(BUILD)/%.o $(LIBLLMC)
	$(CXX) $(CXXFLAGS) $^ -o $@ $(LDLIBS)
else
ifneq ($(MPI_INCLUDE),)
MPI_CFLAGS := -I$(MPI_INCLUDE) -DOMPI_SKIP_MPICXX
MPI_LDLIBS := -L$(MPI_LIBDIR) -lmpi
else
MPI_CFLAGS := $(shell mpicc --showme:compile 2>/dev/null) -DOMPI_SKIP_MPICXX
MPI_LDLIBS := $(shell mpicc --showme:link 2>/dev/null)
endif
# The same for nvcc's link line: -Wl,... and -pthread in the forms nvcc passes on.
comma := ,
MPI_NVCC_LDLIBS := $(patsubst -Wl$(comma)%,-Xlinker %,$(patsubst -pthread,-Xcompiler -pthread,$(MPI_LDLIBS)))
CXXFLAGS      += $(MPI_CFLAGS)
LDLIBS        += $(MPI_LDLIBS)
CUDA_CXXFLAGS += $(MPI_CFLAGS)
CUDA_LDLIBS   += $(MPI_NVCC_LDLIBS)
MPI_TESTS := $(patsubst tests/dist/%.cpp,$(BUILD)/mpi_tests/%,$(wildcard tests/dist/*.cpp))

.PHONY: mpi-tests
mpi-tests: $(MPI_TESTS)

# The streaming test counts the data loader's reads by wrapping pread (see the test).
$(BUILD)/mpi_tests/test_streaming: MPI_TEST_LDFLAGS := -Wl,--wrap=pread
$(BUILD)/mpi_tests/%: $(BUILD)/tests/dist/%.o $(LIBLLMC)
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) $^ -o $@ $(LDLIBS) $(MPI_TEST_LDFLAGS)

-include $(MPI_TESTS:$(BUILD)/mpi_tests/%=$(BUILD)/tests/dist/%.d)
endif

.PHONY: nccl-communicator
nccl-communicator: $(CUDA_DIR)/llmc/dist/nccl_communicator.o
# ==== end of the MPI section ===================================================================

# ==== AddressSanitizer + UndefinedBehaviorSanitizer (tests/cpu/check_sanitize.sh) ===================
# make sanitize: the host code (llmc/*.cpp, llmc/*/*.cpp), the unit tests and the CPU trainer built with ASan
# and UBSan into build/sanitize/ (unit_tests, train_gpt2), run by tests/cpu/check_sanitize.sh.
# -O1 keeps the build and the instrumented runs cheap; -g1 (line tables only) gives reports the
# same file:line stacks as -g in a quarter less build time; -fno-omit-frame-pointer gives whole
# stacks; -fno-sanitize-recover=all makes undefined behaviour fatal, as ASan's findings already are.
# The flags come after CXXFLAGS, so -O1 wins over its -O3; -march=native and MPI's flags stay, so
# the same SIMD kernels are checked, and the binaries link libmpi and run as single processes.
# The unit tests link the normal build's doctest runner (tests/unit/main.o): it holds none of our
# code, and it is the costliest file to compile.
SANITIZE       := $(BUILD)/sanitize
SANITIZE_FLAGS := -O1 -g1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
SANITIZE_LIB   := $(SANITIZE)/libllmc.a
SANITIZE_OBJS  := $(LLMC_SRCS:%.cpp=$(SANITIZE)/%.o)
SANITIZE_UNIT_OBJS := $(filter-out $(SANITIZE)/tests/unit/main.o,$(UNIT_SRCS:%.cpp=$(SANITIZE)/%.o))

.PHONY: sanitize
sanitize: $(SANITIZE)/unit_tests $(SANITIZE)/train_gpt2

$(SANITIZE)/%.o: %.cpp
	@mkdir -p $(dir $@)
	$(CCACHE) $(CXX) $(CXXFLAGS) $(SANITIZE_FLAGS) -c $< -o $@

$(SANITIZE_LIB): $(SANITIZE_OBJS)
	$(archive)

# One link recipe for both. Its rule names no prerequisites: make puts those of the rule with the
# recipe first in $^, and the objects must come before the library on the link line.
$(SANITIZE)/unit_tests: $(BUILD)/tests/unit/main.o $(SANITIZE_UNIT_OBJS) $(SANITIZE_LIB)
$(SANITIZE)/train_gpt2: $(SANITIZE)/train_gpt2.o $(SANITIZE_LIB)
$(SANITIZE)/unit_tests $(SANITIZE)/train_gpt2:
	$(CXX) $(CXXFLAGS) $(SANITIZE_FLAGS) $^ -o $@ $(LDLIBS)

-include $(SANITIZE_OBJS:.o=.d) $(SANITIZE_UNIT_OBJS:.o=.d) $(SANITIZE)/train_gpt2.d
# ==== end of the sanitizer section =============================================================

# ==== The emulated GPU (emulator/README.md) ====================================================
# make test-emu, emu-benches, emu-tests, emu-switch-cost, train_gpt2cu-emu, test_gpt2cu-emu: the
# emulator's own makefile. Last, as it builds on the variables of the sections above.
include emulator/emulator.mk
