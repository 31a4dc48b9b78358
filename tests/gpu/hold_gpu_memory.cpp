// hold_gpu_memory MIB: takes MIB MiB of the current GPU's memory and holds it until a signal ends
// the process (the driver then frees it), as another program sharing the GPU would. The GPU
// session's reliability step (scripts/gpu_reliability_lib.sh) starts it before a training run, to
// see the trainer's memory plan count only the memory left free. It prints one line,
// "holding N MiB, M MiB left free", once the memory is taken, and exits 2 with the CUDA error when
// it cannot take it.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include <unistd.h>

int main(int argc, char** argv) {
  char* end = nullptr;
  const long long mib = argc == 2 ? std::strtoll(argv[1], &end, 10) : -1;
  if (argc != 2 || *end != '\0' || mib < 1) {
    std::fprintf(stderr, "usage: hold_gpu_memory MIB (a whole number of MiB to take, at least 1)\n");
    return 2;
  }
  // In pieces of at most 1 GiB: a single huge cudaMalloc may fail where the same memory in pieces
  // fits between what others hold.
  for (long long left = mib; left > 0;) {
    const long long piece = left < 1024 ? left : 1024;
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, size_t(piece) << 20);
    if (e != cudaSuccess) {
      std::fprintf(stderr, "hold_gpu_memory: cudaMalloc of %lld MiB after %lld MiB: %s\n", piece, mib - left,
                   cudaGetErrorString(e));
      return 2;
    }
    left -= piece;
  }
  size_t free_bytes = 0, total_bytes = 0;
  cudaMemGetInfo(&free_bytes, &total_bytes);
  std::printf("holding %lld MiB, %zu MiB left free\n", mib, free_bytes >> 20);
  std::fflush(stdout);
  for (;;) pause();
}
