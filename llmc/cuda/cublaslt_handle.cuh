// The cuBLAS/cuBLASLt state every matmul and the fallback attention share: the two library handles,
// the caller's workspace, and the algorithm chosen for each GEMM shape so that a training step runs
// no heuristic query after its first micro-step. How an algorithm is chosen (the heuristic's first,
// or the fastest by timing inside a tuning pass) is gemm_search.cuh's.
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>

#include "llmc/cuda/common.cuh"
#include "llmc/cuda/gemm_search.cuh"
#include "llmc/cuda/gemm_table.h"

namespace llmc {

// The largest power of two, at most 256 (cuBLASLt's default assumption), that divides both the
// address and the leading dimension in bytes: the alignment a kernel may rely on for this matrix.
inline uint32_t lt_alignment(const void* p, long long ld_bytes) {
  const uintptr_t bits = reinterpret_cast<uintptr_t>(p) | static_cast<uintptr_t>(ld_bytes) | 256u;
  return static_cast<uint32_t>(bits & (~bits + 1));
}

class BlasContext {
 public:
  // `workspace` (device memory, `workspace_bytes` long; 32 MiB is what Hopper kernels want) stays
  // owned by the caller and must outlive this object.
  BlasContext(void* workspace, size_t workspace_bytes) : workspace_(workspace), workspace_bytes_(workspace_bytes) {
    CUBLAS_CHECK(cublasLtCreate(&lt_));
    CUBLAS_CHECK(cublasCreate(&blas_));
  }
  ~BlasContext() {
    cublasDestroy(blas_);
    cublasLtDestroy(lt_);
  }
  BlasContext(const BlasContext&) = delete;
  BlasContext& operator=(const BlasContext&) = delete;

  cublasLtHandle_t lt() const { return lt_; }
  // cuBLAS proper (the fallback attention's batched GEMMs) on `stream`, with the same scratch as the
  // cuBLASLt matmuls. cublasSetStream resets the handle's workspace to cuBLAS's own pool (cuBLAS
  // documentation, cublasSetStream), memory outside the plan: ours is set again after every change
  // of stream (only then: the attention asks for the handle in every layer, on the same stream).
  cublasHandle_t blas(cudaStream_t stream) {
    if (blas_stream_ != stream) {
      CUBLAS_CHECK(cublasSetStream(blas_, stream));
      CUBLAS_CHECK(cublasSetWorkspace(blas_, workspace_, workspace_bytes_));
      blas_stream_ = stream;
    }
    return blas_;
  }
  void* workspace() const { return workspace_; }
  size_t workspace_bytes() const { return workspace_bytes_; }

  // The algorithm for the GEMM `key` (described by `descs`): the one chosen for the key before, else
  // one chosen now: inside a search (begin_search) the fastest of the heuristic's, each timed through
  // `launch` (which runs the GEMM with a given algorithm on `stream`), else the heuristic's first.
  // Null when cuBLASLt has no algorithm for it (e.g. an epilogue it does not offer for these types).
  // `launch` is any callable: the std::function the search takes is built only for a shape not yet
  // chosen, so that a training step's GEMMs allocate nothing on the host.
  template <class Launch>
  const cublasLtMatmulAlgo_t* algorithm(const GemmKey& key, const LtGemmDescs& descs, const Launch& launch,
                                        cudaStream_t stream) {
    auto it = algos_.find(key);
    if (it == algos_.end()) it = algos_.emplace(key, choose(key, descs, GemmLaunch(launch), stream)).first;
    return it->second ? &*it->second : nullptr;
  }
  size_t cached_algorithms() const { return algos_.size(); }

  // The timed search (LLMC_GEMM_SEARCH=timed): between begin_search and end_search every shape met
  // gets the fastest of up to kGemmSearchCandidates of the heuristic's algorithms, its candidates
  // run on the GEMM's own buffers (why that is safe only in a tuning pass: gemm_search.cuh).
  // begin_search forgets every choice made so far, so that each shape of the pass is timed.
  void begin_search() {
    algos_.clear();
    searched_ = GemmTable{cublasLtGetVersion(), {}};
    searching_ = true;
  }
  void end_search() { searching_ = false; }
  // The algorithms the last search chose, or that load() set.
  const GemmTable& searched() const { return searched_; }
  // Runs `table`'s algorithms from now on (other shapes: the heuristic's first); throws
  // std::runtime_error when another cuBLASLt version chose them, as the algorithms are valid only
  // with the library that chose them.
  void load(const GemmTable& table) {
    if (table.library_version != cublasLtGetVersion())
      throw std::runtime_error("LLMC_GEMM_SEARCH=timed: the GEMM algorithm table was chosen by cuBLASLt " +
                               std::to_string(table.library_version) + ", this process runs " +
                               std::to_string(cublasLtGetVersion()) +
                               ": its algorithms are valid only with the library that chose them (resume with "
                               "that library, or with LLMC_GEMM_SEARCH=heuristic)");
    algos_.clear();
    for (const auto& [key, words] : table.algos) algos_.emplace(key, algo_from_words(words));
    searched_ = table;
  }

 private:
  std::optional<cublasLtMatmulAlgo_t> choose(const GemmKey& key, const LtGemmDescs& descs, const GemmLaunch& launch,
                                             cudaStream_t stream) {
    const std::vector<cublasLtMatmulAlgo_t> algos =
        heuristic_algorithms(lt_, key, descs, workspace_bytes_, searching_ ? kGemmSearchCandidates : 1);
    if (algos.empty()) return std::nullopt;
    if (!searching_) return algos[0];
    const cublasLtMatmulAlgo_t best = fastest_algorithm(key, algos, launch, timer_, stream);
    searched_.algos[key] = algo_words(best);
    return best;
  }

  cublasLtHandle_t lt_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  std::optional<cudaStream_t> blas_stream_;  // the stream blas_ was last set to (none yet)
  void* workspace_;
  size_t workspace_bytes_;
  std::map<GemmKey, std::optional<cublasLtMatmulAlgo_t>> algos_;
  bool searching_ = false;
  GemmTable searched_;
  GemmTimer timer_;
};

}  // namespace llmc
