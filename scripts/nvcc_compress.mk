# Included by the top Makefile and dev/cuda/Makefile (both define NVCC first).
# CUDA 13's nvcc compresses the device code it embeds in each object (--compress-mode=size: the
# kernels of every architecture take about a third of their bytes); any driver that runs CUDA 13
# code (580 and later) reads it, at load time. An older nvcc embeds it as it always did, as some
# of CUDA 12's drivers could not read that compression. Recursive (=): nvcc is asked only when an
# object is compiled.
NVCC_MAJOR   = $(shell $(NVCC) --version 2>/dev/null | sed -n 's/.*release \([0-9]*\)\..*/\1/p' | head -n 1)
NVCC_COMPRESS = $(if $(filter-out 1 2 3 4 5 6 7 8 9 10 11 12,$(NVCC_MAJOR)),--compress-mode=size)
