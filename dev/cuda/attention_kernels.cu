// The hand-written kernels of the plain attention path (llmc/cuda/attention.cuh), each checked alone
// against a host loop written here, then timed (attention.cu checks them together with the cuBLAS
// GEMMs between them).
// The versions: kVersions at the end (or --help).
#include <cmath>
#include <type_traits>

#include "dev/cuda/common.cuh"
#include "llmc/cuda/attention.cuh"

using llmc::floatX;

namespace {

constexpr double kTol = std::is_same<floatX, float>::value ? 1e-5 : 1e-2;

struct Shape {
  int B, T, NH, HS;
  size_t tokens() const { return size_t(B) * T * NH * HS; }  // elements of one (B, T, C) tensor
  size_t scores() const { return size_t(B) * NH * T * T; }
  int rows() const { return B * NH * T; }
};

// Offset of (b, t, h, d) in the head-major (B, NH, T, HS) layout.
size_t head_major(const Shape& s, int b, int t, int h, int d) {
  return ((size_t(b) * s.NH + h) * s.T + t) * s.HS + d;
}

bool run_shape(const bench::Args& args, const Shape& s, bool timed) {
  const std::string tag = fmt::format("attention_kernels B={} T={} NH={} HS={} ", s.B, s.T, s.NH, s.HS);
  const int C = s.NH * s.HS;
  const size_t n = s.tokens();
  bool ok = true;

  // Host references: the three permutes are index maps, checked exactly.
  const auto qkv = bench::round_through<floatX>(bench::random_vector(3 * n, 61));
  std::vector<float> q_ref(n), k_ref(n), v_ref(n);
  for (int b = 0; b < s.B; ++b)
    for (int t = 0; t < s.T; ++t)
      for (int h = 0; h < s.NH; ++h)
        for (int d = 0; d < s.HS; ++d) {
          const size_t from = (size_t(b) * s.T + t) * 3 * C + h * s.HS + d;
          const size_t to = head_major(s, b, t, h, d);
          q_ref[to] = qkv[from];
          k_ref[to] = qkv[from + C];
          v_ref[to] = qkv[from + 2 * C];
        }
  const auto tokens = bench::round_through<floatX>(bench::random_vector(n, 62));
  std::vector<float> heads_ref(n);
  for (int b = 0; b < s.B; ++b)
    for (int t = 0; t < s.T; ++t)
      for (int h = 0; h < s.NH; ++h)
        for (int d = 0; d < s.HS; ++d)
          heads_ref[head_major(s, b, t, h, d)] = tokens[(size_t(b) * s.T + t) * C + h * s.HS + d];

  // Softmax references in double from the rounded inputs: att[j] = exp(x_j - m) / sum for j <= t.
  const float scale = 1.0f / std::sqrt(float(s.HS));
  const auto preatt = bench::round_through<floatX>(bench::random_vector(s.scores(), 63, -4.0f, 4.0f));
  const auto datt = bench::round_through<floatX>(bench::random_vector(s.scores(), 64));
  std::vector<float> att_ref(s.scores()), dpreatt_ref(s.scores());
  for (int row = 0; row < s.rows(); ++row) {
    const int t = row % s.T;
    const size_t base = size_t(row) * s.T;
    double m = -INFINITY, sum = 0.0;
    for (int j = 0; j <= t; ++j) m = std::max(m, double(scale) * preatt[base + j]);
    for (int j = 0; j <= t; ++j) sum += std::exp(double(scale) * preatt[base + j] - m);
    for (int j = 0; j < s.T; ++j)
      att_ref[base + j] = j <= t ? float(std::exp(double(scale) * preatt[base + j] - m) / sum) : 0.0f;
  }
  // The backward reads att as the forward stored it, in floatX.
  const auto att_stored = bench::round_through<floatX>(att_ref);
  for (int row = 0; row < s.rows(); ++row) {
    const int t = row % s.T;
    const size_t base = size_t(row) * s.T;
    double dot = 0.0;
    for (int j = 0; j <= t; ++j) dot += double(att_stored[base + j]) * datt[base + j];
    for (int j = 0; j < s.T; ++j)
      dpreatt_ref[base + j] = j <= t ? float(scale * att_stored[base + j] * (datt[base + j] - dot)) : 0.0f;
  }

  floatX* d_qkv = bench::to_device<floatX>(qkv);
  floatX* d_q = bench::to_device<floatX>(std::vector<float>(n, 1.0f));
  floatX* d_k = bench::to_device<floatX>(std::vector<float>(n, 1.0f));
  floatX* d_v = bench::to_device<floatX>(std::vector<float>(n, 1.0f));
  floatX* d_tokens = bench::to_device<floatX>(tokens);
  floatX* d_preatt = bench::to_device<floatX>(preatt);
  floatX* d_att = bench::to_device<floatX>(att_stored);
  floatX* d_scores = bench::to_device<floatX>(std::vector<float>(s.scores(), 1.0f));

  if (bench::selected(args, "permute_qkv")) {
    for (floatX* p : {d_q, d_k, d_v}) bench::poison(p, n * sizeof(floatX));
    llmc::permute_qkv(d_q, d_k, d_v, d_qkv, s.B, s.T, s.NH, s.HS, 0);
    ok &= bench::check(tag + "permute_qkv q", bench::from_device(d_q, n), q_ref, 1e-12);
    ok &= bench::check(tag + "permute_qkv k", bench::from_device(d_k, n), k_ref, 1e-12);
    ok &= bench::check(tag + "permute_qkv v", bench::from_device(d_v, n), v_ref, 1e-12);
  }
  if (bench::selected(args, "unpermute_dqkv")) {
    floatX* d_dq = bench::to_device<floatX>(q_ref);
    floatX* d_dk = bench::to_device<floatX>(k_ref);
    floatX* d_dv = bench::to_device<floatX>(v_ref);
    floatX* d_dqkv = bench::to_device<floatX>(std::vector<float>(3 * n, 1.0f));
    bench::poison(d_dqkv, 3 * n * sizeof(floatX));
    llmc::unpermute_dqkv(d_dqkv, d_dq, d_dk, d_dv, s.B, s.T, s.NH, s.HS, 0);
    ok &= bench::check(tag + "unpermute_dqkv dqkv", bench::from_device(d_dqkv, 3 * n), qkv, 1e-12);
    bench::free_device({d_dq, d_dk, d_dv, d_dqkv});
  }
  if (bench::selected(args, "permute_heads")) {
    bench::poison(d_q, n * sizeof(floatX));
    llmc::permute_heads(d_q, d_tokens, s.B, s.T, s.NH, s.HS, true, 0);
    ok &= bench::check(tag + "permute_heads to heads", bench::from_device(d_q, n), heads_ref, 1e-12);
    floatX* d_back = bench::to_device<floatX>(std::vector<float>(n, 1.0f));
    bench::poison(d_back, n * sizeof(floatX));
    llmc::permute_heads(d_q, d_back, s.B, s.T, s.NH, s.HS, false, 0);
    ok &= bench::check(tag + "permute_heads to tokens", bench::from_device(d_back, n), tokens, 1e-12);
    CUDA_CHECK(cudaFree(d_back));
  }
  for (const std::string v : {"softmax_fwd", "softmax_fwd_fast"}) {
    if (!bench::selected(args, v)) continue;
    const llmc::FastMath fast_math = v == "softmax_fwd_fast" ? llmc::FastMath::kOn : llmc::FastMath::kOff;
    bench::poison(d_scores, s.scores() * sizeof(floatX));
    llmc::causal_softmax_forward(d_scores, d_preatt, s.rows(), s.T, scale, fast_math, 0);
    ok &= bench::check(tag + v + " att", bench::from_device(d_scores, s.scores()), att_ref, kTol);
  }
  if (bench::selected(args, "softmax_bwd")) {
    bench::upload(d_scores, datt);
    llmc::causal_softmax_backward(d_scores, d_scores, d_att, s.rows(), s.T, scale, 0);
    ok &= bench::check(tag + "softmax_bwd dpreatt (in place)", bench::from_device(d_scores, s.scores()), dpreatt_ref,
                       kTol);
  }

  if (timed && !args.check_only && ok) {
    // Each permute reads and writes its elements once; the softmax reads the lower triangle and
    // writes the whole row, the backward reads two triangles and writes the row.
    const double x = sizeof(floatX);
    const double scores = double(s.scores()) * x;
    auto time = [&](const std::string& v, double bytes, auto&& launch) {
      if (bench::selected(args, v)) bench::report(tag + v, bench::time_ms(launch), bytes, 0);
    };
    time("permute_qkv", 6.0 * n * x, [&] { llmc::permute_qkv(d_q, d_k, d_v, d_qkv, s.B, s.T, s.NH, s.HS, 0); });
    time("unpermute_dqkv", 6.0 * n * x, [&] { llmc::unpermute_dqkv(d_qkv, d_q, d_k, d_v, s.B, s.T, s.NH, s.HS, 0); });
    time("permute_heads", 2.0 * n * x, [&] { llmc::permute_heads(d_q, d_tokens, s.B, s.T, s.NH, s.HS, true, 0); });
    time("softmax_fwd", 1.5 * scores,
         [&] { llmc::causal_softmax_forward(d_scores, d_preatt, s.rows(), s.T, scale, llmc::FastMath::kOff, 0); });
    time("softmax_fwd_fast", 1.5 * scores,
         [&] { llmc::causal_softmax_forward(d_scores, d_preatt, s.rows(), s.T, scale, llmc::FastMath::kOn, 0); });
    time("softmax_bwd", 2.0 * scores,
         [&] { llmc::causal_softmax_backward(d_scores, d_scores, d_att, s.rows(), s.T, scale, 0); });
  }

  bench::free_device({d_qkv, d_q, d_k, d_v, d_tokens, d_preatt, d_att, d_scores});
  return ok;
}

bool run(const bench::Args& args) {
  const Shape timed{int(args.dim("-B")), int(args.dim("-T")), int(args.dim("-NH")), int(args.dim("-HS"))};
  bool ok = args.small || run_shape(args, timed, true);
  if (args.shape_given) return ok;  // a shape of one's own: that shape alone
  // Three heads of 32 with T not a multiple of the softmax's 32 lanes; then 1.5B's 25 heads of 64.
  ok &= run_shape(args, {2, 100, 3, 32}, false);
  ok &= run_shape(args, {1, 37, 25, 64}, false);
  return ok;
}

}  // namespace

const std::vector<bench::VersionInfo> kVersions = {
    {"permute_qkv", "qkv (B, T, 3C) -> Q, K, V (B, NH, T, HS)"},
    {"unpermute_dqkv", "dQ, dK, dV -> dqkv, its inverse"},
    {"permute_heads", "(B, T, C) <-> (B, NH, T, HS), both directions"},
    {"softmax_fwd", "causal softmax of the scores, a warp per row"},
    {"softmax_fwd_fast", "softmax_fwd with fast math (LLMC_FAST_MATH=on): scale carries log2(e), exp2f"},
    {"softmax_bwd", "its backward, in place over the score gradients (as attention_backward runs it)"},
};

int main(int argc, char** argv) {
  // GPT-2 124M's heads at B=4, T=1024.
  const std::vector<bench::Dim> shape = {{"-B", "batch", 4},
                                         {"-T", "sequence length", 1024},
                                         {"-NH", "heads", 12},
                                         {"-HS", "head size", 64, llmc::Packed128<floatX>::size}};
  return bench::run_main(argc, argv, shape, kVersions, run);
}
