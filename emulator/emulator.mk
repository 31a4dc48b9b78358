# ==== The emulated GPU (emulator/README.md, docs/cuda-emulator.md) ============================
# Included last by the top-level Makefile, whose variables it uses: BUILD, CUDA_PREC and
# CUDA_PREC_FLAGS, CUDA_VARIANT and CUDA_VARIANT_FLAGS, the dev/cuda benchmark list DEV_CUDA_BENCHES, MPI_CFLAGS and MPI_LDLIBS, the host
# libraries LIBLLMC and SANITIZE_LIB, the `archive` recipe and FORCE.
# The CUDA kernels compiled with g++ against emulator/runtime/ (LLMC_CUDA_EMULATOR) and run on the
# CPU, under a checker: EMU_SANITIZER=address (ASan + UBSan), thread (TSan), racecheck (the
# emulator's own shared-memory race check) or none; PRECISION as for the CUDA build. Everything goes
# to build/emu-<sanitizer>/.
#   make test-emu (the top Makefile)    every check of tests/emu: the emulator's tests, every kernel
#                                       family's dev/cuda checks under the three checkers, the trainer
#   make emu-benches EMU_SANITIZER=none the dev/cuda benchmarks as CPU binaries, build/emu-none/<prec>/
# Under TSan the emulator's own code is not instrumented (it would order every CUDA thread after
# every other): it says what barriers and shuffles order with __tsan_release/__tsan_acquire
# (LLMC_EMU_TSAN). The CPU references run serially there (no OpenMP: libgomp is not TSan-aware).
# Under ASan neither (it is no code under test; docs/cuda-emulator.md has what instrumenting it
# cost): it tells ASan of its fibers and poisons device and shared memory (LLMC_EMU_ASAN).
# The emulated NCCL carries its ranks over MPI (runtime/nccl_api.cpp), so the emulator builds with
# MPI: NO_USE_MPI=1 (and NO_MULTI_GPU=1, which implies it) is refused for its targets; NO_MULTI_GPU=1
# NO_USE_MPI=0 builds the trainer without NCCL on the emulated GPU.
ifeq ($(NO_USE_MPI),1)
ifneq ($(filter %-emu test-emu emu-%,$(MAKECMDGOALS))$(findstring /emu-,$(MAKECMDGOALS)),)
$(error the emulated GPU builds with MPI (its NCCL carries the ranks over MPI): add NO_USE_MPI=0, which \
  with NO_MULTI_GPU=1 still leaves NCCL out)
endif
endif
CUDA_HOME     ?= /usr/local/cuda
EMU_SANITIZER ?= address
EMU           := $(BUILD)/emu-$(EMU_SANITIZER)
EMU_CXXFLAGS  := -std=c++17 -g1 -fno-omit-frame-pointer -Wall -Wextra -Wno-unknown-pragmas -I. -I$(CUDA_HOME)/include
ifeq ($(EMU_SANITIZER),address)
EMU_SAN_FLAGS := -O1 -fsanitize=address,undefined -fno-sanitize-recover=all
# ASan's runtime linked in: its thread-local state is then read directly, not through
# __tls_get_addr, at each of the fiber switches it is told of (docs/testing.md has what it saved).
EMU_LINK_FLAGS := $(EMU_SAN_FLAGS) -static-libasan
EMU_RUNTIME_FLAGS := -O2 -DLLMC_EMU_ASAN
EMU_OPENMP    := -fopenmp
else ifeq ($(EMU_SANITIZER),thread)
EMU_SAN_FLAGS := -O1 -fsanitize=thread
EMU_RUNTIME_FLAGS := -O2 -DLLMC_EMU_TSAN
EMU_OPENMP    :=
else ifeq ($(EMU_SANITIZER),racecheck)
# The emulator's own shared-memory race check: TSan's instrumentation, with racecheck.cpp's hooks in
# place of TSan's runtime (no libtsan at the link).
EMU_SAN_FLAGS := -O1 -fsanitize=thread
EMU_LINK_FLAGS := -O1
EMU_RUNTIME_FLAGS := -O2
EMU_OPENMP    := -fopenmp
else ifeq ($(EMU_SANITIZER),none)
EMU_SAN_FLAGS := -O2
EMU_RUNTIME_FLAGS := -O2
EMU_OPENMP    := -fopenmp
else
$(error EMU_SANITIZER must be address, thread, racecheck or none, got '$(EMU_SANITIZER)')
endif
EMU_LINK_FLAGS ?= $(EMU_SAN_FLAGS)
# -fno-strict-aliasing: the kernels pun 16-byte vectors (Packed128 <-> int4) as CUDA code does.
# -ffp-contract=off: no product fused with a sum unless the kernel asks (fmaf), so that the
# IEEE-rounded intrinsics (__fmul_rn, emulator/runtime/device_functions.h) are rounded on their own.
EMU_KERNEL_FLAGS := $(EMU_CXXFLAGS) $(EMU_SAN_FLAGS) $(EMU_OPENMP) -fno-strict-aliasing -ffp-contract=off -DLLMC_CUDA_EMULATOR \
                    $(CUDA_PREC_FLAGS) -MMD -MP
EMU_RUNTIME_SRCS := $(filter-out $(if $(filter racecheck,$(EMU_SANITIZER)),,%/racecheck.cpp),\
                    $(wildcard emulator/runtime/*.cpp))
EMU_RUNTIME_LIB  := $(EMU)/libemulator.a
EMU_REF_LIB      := $(EMU)/libcpu_reference.a
EMU_LDLIBS       := -lfmt -lpthread
# Every dev/cuda benchmark the nvcc build has (attention without its cuDNN versions), so that a new
# kernel family is checked here with no list to edit. TSan leaves out global_norm: v1's fixed grid
# of 1024 blocks of 512 threads, every thread at 11 warp operations and a barrier, takes TSan
# minutes per precision (docs/cuda-emulator.md); and matmul, whose CPU reference needs OpenMP,
# which the TSan build has not. Racecheck carries both.
EMU_TSAN_LEFT_OUT := global_norm matmul
EMU_BENCHES   := $(filter-out $(if $(filter thread,$(EMU_SANITIZER)),$(EMU_TSAN_LEFT_OUT)),$(DEV_CUDA_BENCHES))
EMU_TESTS     := $(basename $(notdir $(wildcard emulator/tests/*.cu)))

.PHONY: emu-benches emu-tests print-emu-benches emu-switch-cost
print-emu-benches:
	@echo $(EMU_BENCHES)

# Kept, so that an unchanged kernel is not recompiled.
.SECONDARY: $(EMU_BENCHES:%=$(EMU)/$(CUDA_PREC)/%.o) $(EMU_TESTS:%=$(EMU)/emulator/tests/%.o)
emu-benches: $(addprefix $(EMU)/$(CUDA_PREC)/,$(EMU_BENCHES))
emu-tests: $(addprefix $(EMU)/tests/,$(EMU_TESTS))

# The fibers' switch against ucontext's (docs/cuda-emulator.md), without sanitizers.
emu-switch-cost: $(BUILD)/emu-none/switch_cost
	@$<

$(BUILD)/emu-none/switch_cost: emulator/bench/switch_cost.cpp emulator/runtime/fiber.cpp emulator/runtime/fiber.h
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_CXXFLAGS) -O2 $(filter %.cpp,$^) -o $@

$(EMU)/emulator/runtime/%.o: emulator/runtime/%.cpp
	@mkdir -p $(dir $@)
	$(CCACHE) $(CXX) $(EMU_CXXFLAGS) $(EMU_RUNTIME_FLAGS) $(MPI_CFLAGS) -MMD -MP -c $< -o $@

# The GEMMs under the emulated cuBLAS: optimised, uninstrumented (they read only the emulator's own
# fp32 copies of checked operands), parallel on the emulator's worker threads.
$(EMU)/emulator/runtime/gemm.o: EMU_RUNTIME_FLAGS := -O3 -march=native

$(EMU_RUNTIME_LIB): $(EMU_RUNTIME_SRCS:%.cpp=$(EMU)/%.o)
	$(archive)

$(EMU)/ref/%.o: llmc/cpu/%.cpp
	@mkdir -p $(dir $@)
	$(CCACHE) $(CXX) $(EMU_CXXFLAGS) -O2 $(EMU_OPENMP) $(if $(filter address,$(EMU_SANITIZER)),$(EMU_SAN_FLAGS)) -MMD -MP \
	  -c $< -o $@

$(EMU_REF_LIB): $(patsubst llmc/cpu/%.cpp,$(EMU)/ref/%.o,$(wildcard llmc/cpu/*.cpp))
	$(archive)

$(EMU)/$(CUDA_PREC)/%.o: dev/cuda/%.cu
	@mkdir -p $(dir $@)
	$(CCACHE) $(CXX) $(EMU_KERNEL_FLAGS) -x c++ -c $< -o $@

$(EMU)/$(CUDA_PREC)/%: $(EMU)/$(CUDA_PREC)/%.o $(EMU_REF_LIB) $(EMU_RUNTIME_LIB)
	$(CXX) $(EMU_LINK_FLAGS) $(EMU_OPENMP) $^ -o $@ $(EMU_LDLIBS)

$(EMU)/emulator/tests/%.o: emulator/tests/%.cu
	@mkdir -p $(dir $@)
	$(CCACHE) $(CXX) $(EMU_KERNEL_FLAGS) -x c++ -c $< -o $@

$(EMU)/tests/%: $(EMU)/emulator/tests/%.o $(EMU_RUNTIME_LIB)
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_LINK_FLAGS) $(EMU_OPENMP) $^ -o $@ $(EMU_LDLIBS)

# ---- The CUDA trainer and its parity test on the emulated GPU ----
# make train_gpt2cu-emu / test_gpt2cu-emu [PRECISION=FP32] [EMU_SANITIZER=address|none] [USE_CUDNN=0]
# [NO_MULTI_GPU=1]: the same sources as train_gpt2cu / test_gpt2cu (the backend, the NCCL communicator,
# the two mains), compiled with g++ against the emulator and linked with the host library built with
# the same checker (build/sanitize/libllmc.a under ASan + UBSan, build/libllmc.a without); the GPU
# build's variants as there (CUDA_VARIANT, CUDA_VARIANT_FLAGS), each in its own folder.
EMU_TRAINER      := $(EMU)/$(CUDA_PREC)$(CUDA_VARIANT)/trainer
EMU_TRAINER_OBJS := $(addprefix $(EMU_TRAINER)/,llmc/cuda/cuda_backend.o llmc/cuda/cuda_backend_state.o llmc/cuda/cuda_backend_fp8.o llmc/cuda/forward_backward.o \
                    llmc/cuda/cuda_device.o $(if $(CUDA_NO_NCCL),,llmc/dist/nccl_communicator.o))
ifeq ($(EMU_SANITIZER),address)
EMU_HOST_LIB := $(SANITIZE_LIB)
else ifeq ($(EMU_SANITIZER),none)
EMU_HOST_LIB := $(LIBLLMC)
else
# A target that stops with the reason, only when a trainer is asked for under this checker.
EMU_HOST_LIB := emu-trainer-checker
.PHONY: emu-trainer-checker
emu-trainer-checker:
	$(error the trainer on the emulated GPU builds with EMU_SANITIZER=address or none)
endif

.PHONY: train_gpt2cu-emu test_gpt2cu-emu
train_gpt2cu-emu test_gpt2cu-emu: %-emu: $(EMU_TRAINER)/% FORCE
	cp -f $< $@

# make fp8-convergence: --fp8 1 against bf16 over 200 steps of a small model, and a stale amax that
# the check must catch (scripts/fp8_convergence.sh; about 45 minutes, not part of make test).
.PHONY: fp8-convergence
fp8-convergence:
	$(MAKE) EMU_SANITIZER=none PRECISION=BF16 $(BUILD)/emu-none/bf16/trainer/train_gpt2cu
	bash scripts/fp8_convergence.sh

$(EMU_TRAINER)/%.o: %.cu
	@mkdir -p $(dir $@)
	$(CCACHE) $(CXX) $(EMU_KERNEL_FLAGS) $(CUDA_VARIANT_FLAGS) $(MPI_CFLAGS) -x c++ -c $< -o $@

# As for the sanitizer's binaries: the main's object first on the link line, the libraries last.
$(EMU_TRAINER)/train_gpt2cu: $(EMU_TRAINER)/train_gpt2.o $(EMU_TRAINER_OBJS) $(EMU_HOST_LIB) $(EMU_RUNTIME_LIB)
$(EMU_TRAINER)/test_gpt2cu: $(EMU_TRAINER)/test_gpt2.o $(EMU_TRAINER_OBJS) $(EMU_HOST_LIB) $(EMU_RUNTIME_LIB)
$(EMU_TRAINER)/train_gpt2cu $(EMU_TRAINER)/test_gpt2cu:
	$(CXX) $(EMU_LINK_FLAGS) $(EMU_OPENMP) $^ -o $@ $(EMU_LDLIBS) $(MPI_LDLIBS)

-include $(wildcard $(BUILD)/emu-*/*/*.d $(BUILD)/emu-*/emulator/*/*.d $(BUILD)/emu-*/*/trainer/*.d \
  $(BUILD)/emu-*/*/trainer/llmc/*/*.d)
