// Fused softmax + cross-entropy + gradient: versions checked against llmc/cpu/classifier.h, then timed.
//   v1  one block per row, scalar loads, three passes (max, sum, write) with two block reductions
//   v2  llmc/cuda/classifier.cuh: one block per row, 16-byte vectors, online max/sum in one pass
//   v3  v2 with fast math (LLMC_FAST_MATH=on): exp2f of the pre-scaled logits, __expf rescales
// Also checked: v2 with write_dlogits off (validation) gives the same losses and leaves logits alone.
#include "dev/cuda/common.cuh"
#include "llmc/cpu/classifier.h"
#include "llmc/cuda/classifier.cuh"
#include "llmc/cuda/reduce.cuh"

using llmc::floatX;

namespace {

struct Shape {
  int N, V, Vp;
};
constexpr float kLossScale = 0.5f;  // as with two accumulation micro-steps

__global__ void classifier_naive(floatX* logits, float* losses, const int* targets, int V_, int Vp_, float dloss) {
  LLMC_SHARED(float, scratch, [llmc::kMaxWarpsPerBlock]);
  floatX* x = logits + static_cast<long long>(blockIdx.x) * Vp_;
  const int target = targets[blockIdx.x];
  float m = -INFINITY;
  for (int j = threadIdx.x; j < V_; j += blockDim.x) m = fmaxf(m, float(x[j]));
  m = llmc::block_reduce<llmc::warp_reduce_max>(m, scratch, -INFINITY);
  __syncthreads();
  float sum = 0.0f;
  for (int j = threadIdx.x; j < V_; j += blockDim.x) sum += expf(float(x[j]) - m);
  sum = llmc::block_reduce_sum(sum, scratch);
  if (threadIdx.x == 0) losses[blockIdx.x] = logf(sum) + m - float(x[target]);
  __syncthreads();  // the target logit is read before anyone overwrites it
  for (int j = threadIdx.x; j < Vp_; j += blockDim.x) {
    const float p = expf(float(x[j]) - m) / sum;
    x[j] = j < V_ ? floatX(dloss * (p - (j == target ? 1.0f : 0.0f))) : floatX(0.0f);
  }
}

void launch(const std::string& v, const Shape& s, floatX* logits, float* losses, const int* targets,
            bool write_dlogits) {
  const int N = s.N, V = s.V, Vp = s.Vp;
  const float dloss = kLossScale / N;
  if (v == "v1") {
    llmc::launch<classifier_naive>(N, 256, 0, 0, logits, losses, targets, V, Vp, dloss);
    CUDA_CHECK_LAST();
  } else {
    const llmc::FastMath fast_math = v == "v3" ? llmc::FastMath::kOn : llmc::FastMath::kOff;
    llmc::fused_classifier(logits, losses, targets, N, V, Vp, dloss, write_dlogits, fast_math, 0);
  }
}

// Checks (and, when `timed`, times) every selected version at shape s.
bool run_shape(const bench::Args& args, const Shape& s, bool timed) {
  const int N = s.N, V = s.V, Vp = s.Vp;
  const std::string tag = timed ? "classifier " : fmt::format("classifier N={} V={} Vp={} ", N, V, Vp);
  bool ok = true;
  const size_t NV = static_cast<size_t>(N) * Vp;
  const auto logits = bench::round_through<floatX>(bench::random_vector(NV, 31, -4.0f, 4.0f));
  const std::vector<int> targets = bench::random_ints(N, V, 32);
  std::vector<float> losses_ref(N), dlogits_ref = logits;
  llmc::classifier_forward_backward(losses_ref.data(), dlogits_ref.data(), targets.data(), N, V, Vp, kLossScale / N);

  floatX* d_logits = bench::to_device<floatX>(logits);
  int* d_targets = bench::to_device_ints(targets);
  float* d_losses = bench::to_device<float>(std::vector<float>(N, 1.0f));
  auto reset_logits = [&] { bench::upload(d_logits, logits); };

  for (const std::string v : {"v1", "v2", "v3"}) {
    if (!bench::selected(args, v)) continue;
    reset_logits();
    bench::poison(d_losses, N * sizeof(float));
    launch(v, s, d_logits, d_losses, d_targets, true);
    ok &= bench::check(tag + v + " losses", bench::from_device(d_losses, N), losses_ref, 1e-5);
    ok &= bench::check(tag + v + " dlogits", bench::from_device(d_logits, NV), dlogits_ref, 1e-2);
  }
  for (const std::string v : {"v2", "v3"}) {
    if (!bench::selected(args, v)) continue;
    reset_logits();
    bench::poison(d_losses, N * sizeof(float));
    launch(v, s, d_logits, d_losses, d_targets, false);
    ok &= bench::check(tag + v + " forward-only losses", bench::from_device(d_losses, N), losses_ref, 1e-5);
    ok &= bench::check(tag + v + " forward-only logits untouched", bench::from_device(d_logits, NV), logits, 1e-12);
  }

  if (timed && !args.check_only && ok) {
    // Fewest bytes: logits read once and written once, targets read, losses written. After the
    // first launch the buffer holds dlogits (tiny but nonzero), which costs the same to process.
    const double bytes = 2.0 * NV * sizeof(floatX) + N * (sizeof(int) + sizeof(float));
    for (const std::string v : {"v1", "v2", "v3"}) {
      if (!bench::selected(args, v)) continue;
      reset_logits();
      bench::report(tag + v, bench::time_ms([&] { launch(v, s, d_logits, d_losses, d_targets, true); }), bytes,
                    0);
    }
  }

  bench::free_device({d_logits, d_targets, d_losses});
  return ok;
}

bool run(const bench::Args& args) {
  bool ok = args.small || run_shape(args, {8 * 1024, 50257, 50304}, true);
  // A 16-byte vector that is part real, part padding, then whole vectors of padding; fewer
  // vectors than threads, so most threads hold an empty max/sum. Rows are independent blocks, so
  // 12 of them check as much as more would (and keep TSan's run of make test-emu short).
  ok &= run_shape(args, {12, 1003, 1024}, false);
  return ok;
}

}  // namespace

int main(int argc, char** argv) { return bench::run_main(argc, argv, {"v1", "v2", "v3"}, run); }
