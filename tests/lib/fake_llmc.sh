# shellcheck shell=bash
# fake_llmc_checkout CHECKOUT FRONTEND: a stand-in for an llm.c checkout (not llm.c) and for the
# cudnn-frontend headers, for the checks of dev/bench/vs_llmc.sh's build (check_vs_llmc.sh,
# check_gpu_session.sh): a Makefile with llm.c's make variables, link line and frontend search
# (./cudnn-frontend/include or ~/cudnn-frontend/include, else "cuDNN not found"), and a
# train_gpt2.cu that makes llm.c's CUDA 12 cudaMemAdvise call, shuffles its train loader as llm.c
# does and references cuBLAS, cuDNN, NVRTC and the driver API. nvcc builds it in seconds.
fake_llmc_checkout() {
  local checkout=$1 frontend=$2
  mkdir -p "$checkout/llmc" "$frontend/include"
  cat >"$checkout/Makefile" <<'EOF'
# A stand-in with llm.c's make variables and link line (the script overrides NVCC and NVCC_LDLIBS).
NVCC := $(shell which nvcc 2>/dev/null)
NVCC_FLAGS = -std=c++17 -O1
NVCC_LDFLAGS = -lcublas -lcublasLt -lnvidia-ml
NVCC_INCLUDES =
NVCC_LDLIBS =
USE_CUDNN ?= 0
ifeq ($(USE_CUDNN), 1)
  # llm.c's search: only these two places count, whatever CUDNN_FRONTEND_PATH says.
  ifeq ($(shell [ -d $(HOME)/cudnn-frontend/include ] && echo "exists"), exists)
    CUDNN_FRONTEND_PATH ?= $(HOME)/cudnn-frontend/include
  else ifeq ($(shell [ -d cudnn-frontend/include ] && echo "exists"), exists)
    CUDNN_FRONTEND_PATH ?= cudnn-frontend/include
  else
    $(error cuDNN not found)
  endif
  NVCC_INCLUDES += -I$(CUDNN_FRONTEND_PATH)
  NVCC_LDFLAGS += -lcudnn
  NVCC_FLAGS += -DENABLE_CUDNN
endif
ifneq ($(GPU_COMPUTE_CAPABILITY),)
  NVCC_FLAGS += --generate-code arch=compute_$(GPU_COMPUTE_CAPABILITY),code=[compute_$(GPU_COMPUTE_CAPABILITY),sm_$(GPU_COMPUTE_CAPABILITY)]
endif
ifneq ($(NO_MULTI_GPU), 1)
  NVCC_FLAGS += -DMULTI_GPU
  NVCC_LDLIBS += -lnccl
endif
train_gpt2cu: train_gpt2.cu
	$(NVCC) $(NVCC_FLAGS) $^ $(NVCC_LDFLAGS) $(NVCC_INCLUDES) $(NVCC_LDLIBS) -o $@
EOF
  cat >"$checkout/llmc/cuda_utils.cuh" <<'EOF'
#include <cuda_runtime.h>
// llm.c's fallback to managed memory, in the CUDA 12 form.
inline int malloc_conditionally_managed(void** out, size_t bytes) {
  if (cudaMalloc(out, bytes) == cudaSuccess) return 0;
  cudaMallocManaged(out, bytes);
  cudaMemAdvise(*out, bytes, cudaMemAdviseSetPreferredLocation, cudaCpuDeviceId);
  return 1;
}
EOF
  cat >"$checkout/train_gpt2.cu" <<'EOF'
#include <cublas_v2.h>
#include <cuda.h>
#include <nvrtc.h>
#include <cudnn_frontend.h>
#include <cstdio>
#include "llmc/cuda_utils.cuh"
#ifndef ENABLE_CUDNN
#error built without USE_CUDNN=1
#endif
#ifdef MULTI_GPU
#error built with NCCL
#endif
int main(int argc, char** argv) {
  std::printf("%s\n", argv[0]);  // which binary ran: tests/gpu/check_gpu_session.sh looks for it in the log
  int overfit_single_batch = argc > 5;
  int permute_train_loader = (overfit_single_batch == 1) ? 0 : 1;
  // Referenced, never called here: the link must resolve cuBLAS, cuDNN, NVRTC and the driver API.
  if (argc > 2) {
    cublasHandle_t h;
    int v = 0;
    return int(cublasCreate(&h)) + int(cudnnGetVersion()) + int(nvrtcVersion(&v, &v)) + int(cuDriverGetVersion(&v));
  }
  void* p = nullptr;
  return argc > 1 ? malloc_conditionally_managed(&p, 16) : permute_train_loader;
}
EOF
  echo '#include <cudnn.h>' >"$frontend/include/cudnn_frontend.h"
}
