// Fused softmax + cross-entropy + gradient: versions checked against llmc/cpu/classifier.h, then
// timed. The versions: kVersions below (or --help). Also checked: the trainer's kernel (v10) with
// write_dlogits off (validation) gives the same losses and leaves the logits alone. (v2 to v9 and
// v11 were the trainer's variants that a GPU measured and the trainer dropped: docs/gpu-runs.md.)
#include "dev/cuda/versions.cuh"
#include "llmc/cpu/classifier.h"
#include "llmc/cuda/classifier.cuh"
#include "llmc/cuda/reduce.cuh"

using llmc::floatX;

namespace {

struct Shape {
  int N, V, Vp;
};
constexpr float kLossScale = 0.5f;  // as with two accumulation micro-steps
constexpr float kFarBelow = 20.0f, kLargeLogitStep = 0.0625f;

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

// The logits (overwritten in place by dlogits), the targets and the CPU's answers at one shape.
struct Data {
  Shape s;
  floatX* logits;
  int* targets;
  float* losses;
  std::vector<float> logits0, losses_ref, dlogits_ref;
};

float dloss_of(const Shape& s) { return kLossScale / s.N; }

void v1(Data& d, int block) {
  llmc::launch<classifier_naive>(d.s.N, block ? block : 256, 0, 0, d.logits, d.losses, d.targets, d.s.V, d.s.Vp,
                                 dloss_of(d.s));
}

// The trainer's kernel: a block per row (llmc::classifier_block), no block-size parameter.
void v10(Data& d, int) {
  llmc::fused_classifier(d.logits, d.losses, d.targets, d.s.N, d.s.V, d.s.Vp, dloss_of(d.s), true, 0);
}

// Fewest bytes: logits read once and written once, targets read, losses written. (Timed repeats
// process dlogits, tiny but nonzero, which costs the same.)
bench::Cost cost(const Data& d) {
  return {2.0 * d.s.N * d.s.Vp * sizeof(floatX) + d.s.N * (sizeof(int) + sizeof(float))};
}

using Version = bench::Version<Data>;

// Losses, then dlogits, of one launch on fresh logits (the losses poisoned first); the logits reset
// afterwards, for the next version or timing.
std::vector<float> outputs_of(Data& d, const std::function<void(Data&, int)>& launch, int block) {
  const size_t NV = static_cast<size_t>(d.s.N) * d.s.Vp;
  bench::upload(d.logits, d.logits0);
  bench::poison(d.losses, d.s.N * sizeof(float));
  launch(d, block);
  std::vector<float> out = bench::from_device(d.losses, d.s.N);
  const std::vector<float> dlogits = bench::from_device(d.logits, NV);
  out.insert(out.end(), dlogits.begin(), dlogits.end());
  bench::upload(d.logits, d.logits0);
  return out;
}

// outputs_of's losses and dlogits against the CPU's.
bool check_outputs(const Data& d, const std::vector<float>& out, const std::string& tag) {
  const std::vector<float> losses(out.begin(), out.begin() + d.s.N), dlogits(out.begin() + d.s.N, out.end());
  bool ok = bench::check(tag + " losses", losses, d.losses_ref, 1e-5);
  ok &= bench::check(tag + " dlogits", dlogits, d.dlogits_ref, 1e-2);
  return ok;
}

bool check_losses_and_dlogits(Data& d, const Version& v, const std::string& tag, int block) {
  return check_outputs(d, outputs_of(d, v.launch, block), tag);
}

// The trainer's kernel in the validation form (write_dlogits off): the same losses, logits left
// alone.
bool check_forward_only(Data& d, const std::string& tag) {
  const size_t NV = static_cast<size_t>(d.s.N) * d.s.Vp;
  bench::poison(d.losses, d.s.N * sizeof(float));
  llmc::fused_classifier(d.logits, d.losses, d.targets, d.s.N, d.s.V, d.s.Vp, dloss_of(d.s), false, 0);
  bool ok = bench::check(tag + " forward-only losses", bench::from_device(d.losses, d.s.N), d.losses_ref, 1e-5);
  ok &= bench::check(tag + " forward-only logits untouched", bench::from_device(d.logits, NV), d.logits0, 1e-12);
  return ok;
}

bool check_trainer(Data& d, const Version& v, const std::string& tag, int block) {
  bool ok = check_losses_and_dlogits(d, v, tag, block);
  ok &= check_forward_only(d, tag);
  return ok;
}

const std::vector<Version> kVersions = {
    {"v1", "a block per row, scalar loads, three passes (max, sum, write) with two block reductions",
     {256, 128, 512, 1024}, v1, check_losses_and_dlogits, cost},
    {"v10", "llmc/cuda/classifier.cuh, the trainer's: a block per row, 16-byte vectors, online max/sum in one "
            "pass, the row read twice, fast exponentials; a vector of real columns only (and, writing the gradient, "
            "not the target's) computed without per-column checks",
     {}, v10, check_trainer, cost},
};

// Checks (and, when `timed`, times) every selected version at shape s.
bool run_shape(const bench::Args& args, const Shape& s, bool timed) {
  const int N = s.N, V = s.V, Vp = s.Vp;
  Data d{};
  d.s = s;
  const size_t NV = static_cast<size_t>(N) * Vp;
  std::vector<float> logits = bench::random_vector(NV, 31, -4.0f, 4.0f);
  std::vector<int> targets = bench::random_ints(N, V, 32);
  // In odd rows the logits lie far below 0 but for the first thread's vectors (0, block, 2 block,
  // ...): 0 (the target, the max), -0.0625, -0.125, ... The row's sum of exponentials is then mostly
  // that thread's, so any of its vectors lost or counted twice shows in the loss, log(sum) + 0 - 0;
  // the target's vector, of real columns only, takes the checked path where the others skip it.
  constexpr int S = llmc::Packed128<floatX>::size;
  const int stride = llmc::classifier_block(Vp) * S;
  for (int n = 1; n < N; n += 2) {
    targets[n] = 0;
    for (int j = 0; j < Vp; ++j) logits[size_t(n) * Vp + j] -= kFarBelow;
    for (int k = 0; k * stride < V; ++k)
      for (int e = 0; e < S && k * stride + e < V; ++e)
        logits[size_t(n) * Vp + size_t(k) * stride + e] = -kLargeLogitStep * (k * S + e);
  }
  d.logits0 = bench::round_through<floatX>(logits);
  d.losses_ref.resize(N);
  d.dlogits_ref = d.logits0;
  llmc::classifier_forward_backward(d.losses_ref.data(), d.dlogits_ref.data(), targets.data(), N, V, Vp,
                                    kLossScale / N);

  d.logits = bench::to_device<floatX>(d.logits0);
  d.targets = bench::to_device_ints(targets);
  d.losses = bench::to_device<float>(std::vector<float>(N, 1.0f));
  const bool ok = bench::run_versions(args, kVersions, d, fmt::format("classifier N={} V={} Vp={} ", N, V, Vp), timed);
  bench::free_device({d.logits, d.targets, d.losses});
  return ok;
}

bool run(const bench::Args& args) {
  const Shape timed{int(args.dim("-N")), int(args.dim("-V")), int(args.dim("-Vp"))};
  if (!args.small && timed.Vp < timed.V)
    throw std::invalid_argument(fmt::format("-Vp {} is smaller than -V {}", timed.Vp, timed.V));
  bool ok = args.small || run_shape(args, timed, true);
  if (args.shape_given) return ok;  // a shape of one's own: that shape alone
  // A 16-byte vector that is part real, part padding, then whole vectors of padding; fewer
  // vectors than 1024, so a smaller block (llmc::classifier_block), whose last warp has threads
  // without a vector, holding an empty max/sum. Rows are independent blocks, so 12 of them check
  // as much as more would (and keep TSan's run of make test-emu short).
  ok &= run_shape(args, {12, 1003, 1040}, false);
  // An odd number of vectors, more than threads: some threads hold two (bf16) or three (fp32).
  ok &= run_shape(args, {2, 9001, 9016}, false);
  // Five vectors for some threads, four for the others (bf16).
  ok &= run_shape(args, {2, 40001, 40008}, false);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  // GPT-2 124M at B=8, T=1024; the padded vocabulary in whole 16-byte vectors.
  const std::vector<bench::Dim> shape = {{"-N", "rows (B*T)", 8 * 1024},
                                         {"-V", "vocabulary", 50257},
                                         {"-Vp", "padded vocabulary (>= V)", 50304, llmc::Packed128<floatX>::size}};
  return bench::run_main(argc, argv, shape, bench::infos(kVersions), run);
}
