// LLMC_PROFILE=on's timer (llmc/cuda/launch_profile.h): a CUDA event pair around every timed region
// (each launch<>, cuBLAS(Lt) GEMM and cuDNN call: TimedRegion, llmc/cuda/device_platform.cuh), from
// a pool made at start-up, so that timing makes no allocation per call. The pairs are read back
// (the host waits for them) when a training step begins, when the pool is full, and for the table;
// their milliseconds are summed per name. Only training steps are timed, after the warm-up.
#pragma once
#include <algorithm>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "llmc/cuda/common.cuh"
#include "llmc/cuda/launch_profile.h"

namespace llmc {

class LaunchProfiler final : public LaunchTimer {
 public:
  LaunchProfiler() : pool_(kProfileEventPairs) {
    for (Region& r : pool_) {
      CUDA_CHECK(cudaEventCreate(&r.start));
      CUDA_CHECK(cudaEventCreate(&r.stop));
    }
  }
  ~LaunchProfiler() override {
    for (Region& r : pool_) {
      cudaEventDestroy(r.start);
      cudaEventDestroy(r.stop);
    }
  }
  LaunchProfiler(const LaunchProfiler&) = delete;
  LaunchProfiler& operator=(const LaunchProfiler&) = delete;

  void begin(const std::string& name, cudaStream_t stream) override {
    if (!recording_) {
      open_.push_back(-1);
      return;
    }
    if (used_ == pool_.size()) {
      if (!open_.empty()) throw std::logic_error("LLMC_PROFILE: the event pool filled up inside a timed region");
      read_back();
    }
    auto [id, fresh] = ids_.try_emplace(name, int(rows_.size()));
    if (fresh) rows_.push_back({name, 0, 0.0});
    Region& r = pool_[used_];
    r.name = id->second;
    CUDA_CHECK(cudaEventRecord(r.start, stream));
    open_.push_back(int(used_++));
  }

  void end(cudaStream_t stream) override {
    const int region = open_.back();
    open_.pop_back();
    if (region >= 0) CUDA_CHECK(cudaEventRecord(pool_[size_t(region)].stop, stream));
  }

  // A training step begins (CudaBackend::zero_grad): the previous one's pairs are read back, and
  // this step is timed once the warm-up steps are over.
  void begin_step() {
    read_back();
    ++steps_begun_;
    recording_ = steps_begun_ > kProfileWarmupSteps;
  }
  // Work outside training steps follows (evaluation, sampling, checkpoints): untimed until the next step.
  void pause() { recording_ = false; }

  // The table of the timed steps (profile_table), once their pairs are read back.
  std::vector<std::string> table() {
    read_back();
    return profile_table(rows_, std::max(0, steps_begun_ - kProfileWarmupSteps), kProfileWarmupSteps);
  }

 private:
  struct Region {
    int name = 0;
    cudaEvent_t start = nullptr, stop = nullptr;
  };

  // Waits for every recorded pair and adds its time to its name's row; the pool is free again.
  void read_back() {
    if (!open_.empty()) throw std::logic_error("LLMC_PROFILE: reading the events inside a timed region");
    for (size_t i = 0; i < used_; ++i) {
      Region& r = pool_[i];
      CUDA_CHECK(cudaEventSynchronize(r.stop));
      float ms = 0.0f;
      CUDA_CHECK(cudaEventElapsedTime(&ms, r.start, r.stop));
      ProfileRow& row = rows_[size_t(r.name)];
      ++row.calls;
      row.ms += ms;
    }
    used_ = 0;
  }

  std::vector<Region> pool_;
  size_t used_ = 0;        // pool_[0, used_) recorded since the last read_back
  std::vector<int> open_;  // the regions begun and not yet ended: pool indices, -1 when not recorded
  std::unordered_map<std::string, int> ids_;  // name -> its row
  std::vector<ProfileRow> rows_;
  int steps_begun_ = 0;
  bool recording_ = false;
};

}  // namespace llmc
