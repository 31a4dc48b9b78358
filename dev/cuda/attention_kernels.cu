// The hand-written kernels of the plain attention path (llmc/cuda/attention.cuh), each checked alone
// against a host loop written here, then timed (attention.cu checks them together with the cuBLAS
// GEMMs between them).
// The versions: kVersions below (or --help).
#include <cmath>
#include <type_traits>

#include "dev/cuda/versions.cuh"
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

// The inputs, outputs and host references at one shape.
struct Data {
  Shape s;
  float scale;  // 1/sqrt(HS)
  floatX *qkv, *q, *k, *v, *dqkv, *tokens, *preatt, *att, *scores;
  std::vector<float> qkv0, q_ref, k_ref, v_ref, tokens0, heads_ref, datt, att_ref, dpreatt_ref;
};

void permute_qkv(Data& d, int) { llmc::permute_qkv(d.q, d.k, d.v, d.qkv, d.s.B, d.s.T, d.s.NH, d.s.HS, true, 0); }
void unpermute_dqkv(Data& d, int) {
  llmc::permute_qkv(d.q, d.k, d.v, d.dqkv, d.s.B, d.s.T, d.s.NH, d.s.HS, false, 0);
}
void permute_heads(Data& d, int) { llmc::permute_heads(d.q, d.tokens, d.s.B, d.s.T, d.s.NH, d.s.HS, true, 0); }
void softmax_fwd(Data& d, int) { llmc::causal_softmax_forward(d.scores, d.preatt, d.s.rows(), d.s.T, d.scale, 0); }
void softmax_bwd(Data& d, int) {
  llmc::causal_softmax_backward(d.scores, d.scores, d.att, d.s.rows(), d.s.T, d.scale, 0);
}

// Bytes in floatX: each permute reads and writes its elements once (qkv's three tensors, or one);
// the softmax reads the lower triangle of the scores and writes whole rows; its backward reads two
// triangles and writes whole rows.
double tensor_bytes(const Data& d) { return double(d.s.tokens()) * sizeof(floatX); }
double score_bytes(const Data& d) { return double(d.s.scores()) * sizeof(floatX); }
bench::Cost qkv_cost(const Data& d) { return {6.0 * tensor_bytes(d)}; }
bench::Cost heads_cost(const Data& d) { return {2.0 * tensor_bytes(d)}; }
bench::Cost softmax_cost(const Data& d) { return {1.5 * score_bytes(d)}; }
bench::Cost softmax_bwd_cost(const Data& d) { return {2.0 * score_bytes(d)}; }

using Version = bench::Version<Data>;

bool check_permute_qkv(Data& d, const Version& v, const std::string& tag, int block) {
  const size_t n = d.s.tokens();
  for (floatX* p : {d.q, d.k, d.v}) bench::poison(p, n * sizeof(floatX));
  v.launch(d, block);
  bool ok = bench::check(tag + " q", bench::from_device(d.q, n), d.q_ref, 1e-12);
  ok &= bench::check(tag + " k", bench::from_device(d.k, n), d.k_ref, 1e-12);
  ok &= bench::check(tag + " v", bench::from_device(d.v, n), d.v_ref, 1e-12);
  return ok;
}

// From the permuted tensors back to qkv's layout.
bool check_unpermute_dqkv(Data& d, const Version& v, const std::string& tag, int block) {
  const size_t n = d.s.tokens();
  bench::upload(d.q, d.q_ref);
  bench::upload(d.k, d.k_ref);
  bench::upload(d.v, d.v_ref);
  bench::poison(d.dqkv, 3 * n * sizeof(floatX));
  v.launch(d, block);
  return bench::check(tag + " dqkv", bench::from_device(d.dqkv, 3 * n), d.qkv0, 1e-12);
}

// To heads, then the other direction back to tokens.
bool check_permute_heads(Data& d, const Version& v, const std::string& tag, int block) {
  const size_t n = d.s.tokens();
  bench::poison(d.q, n * sizeof(floatX));
  v.launch(d, block);
  bool ok = bench::check(tag + " to heads", bench::from_device(d.q, n), d.heads_ref, 1e-12);
  floatX* back = bench::to_device<floatX>(std::vector<float>(n, 1.0f));
  bench::poison(back, n * sizeof(floatX));
  llmc::permute_heads(d.q, back, d.s.B, d.s.T, d.s.NH, d.s.HS, false, 0);
  ok &= bench::check(tag + " to tokens", bench::from_device(back, n), d.tokens0, 1e-12);
  CUDA_CHECK(cudaFree(back));
  return ok;
}

bool check_softmax_fwd(Data& d, const Version& v, const std::string& tag, int block) {
  bench::poison(d.scores, d.s.scores() * sizeof(floatX));
  v.launch(d, block);
  return bench::check(tag + " att", bench::from_device(d.scores, d.s.scores()), d.att_ref, kTol);
}

// In place over the score gradients, as attention_backward runs it.
bool check_softmax_bwd(Data& d, const Version& v, const std::string& tag, int block) {
  bench::upload(d.scores, d.datt);
  v.launch(d, block);
  return bench::check(tag + " dpreatt (in place)", bench::from_device(d.scores, d.s.scores()), d.dpreatt_ref, kTol);
}

const std::vector<Version> kVersions = {
    {"permute_qkv", "qkv (B, T, 3C) -> Q, K, V (B, NH, T, HS)", {}, permute_qkv, check_permute_qkv, qkv_cost},
    {"unpermute_dqkv", "dQ, dK, dV -> dqkv, its inverse (the same kernel the other way)", {}, unpermute_dqkv,
     check_unpermute_dqkv, qkv_cost},
    {"permute_heads", "(B, T, C) <-> (B, NH, T, HS), both directions (timed: to heads)", {}, permute_heads,
     check_permute_heads, heads_cost},
    {"softmax_fwd_fast", "causal softmax of the scores, a warp per row: scale carries log2(e), exp2f", {}, softmax_fwd,
     check_softmax_fwd, softmax_cost},
    {"softmax_bwd", "its backward, in place over the score gradients (as attention_backward runs it)", {},
     softmax_bwd, check_softmax_bwd, softmax_bwd_cost},
};

bool run_shape(const bench::Args& args, const Shape& s, bool timed) {
  const int C = s.NH * s.HS;
  const size_t n = s.tokens();
  Data d{};
  d.s = s;

  // Host references: the three permutes are index maps, checked exactly.
  d.qkv0 = bench::round_through<floatX>(bench::random_vector(3 * n, 61));
  d.q_ref.resize(n);
  d.k_ref.resize(n);
  d.v_ref.resize(n);
  for (int b = 0; b < s.B; ++b)
    for (int t = 0; t < s.T; ++t)
      for (int h = 0; h < s.NH; ++h)
        for (int i = 0; i < s.HS; ++i) {
          const size_t from = (size_t(b) * s.T + t) * 3 * C + h * s.HS + i;
          const size_t to = head_major(s, b, t, h, i);
          d.q_ref[to] = d.qkv0[from];
          d.k_ref[to] = d.qkv0[from + C];
          d.v_ref[to] = d.qkv0[from + 2 * C];
        }
  d.tokens0 = bench::round_through<floatX>(bench::random_vector(n, 62));
  d.heads_ref.resize(n);
  for (int b = 0; b < s.B; ++b)
    for (int t = 0; t < s.T; ++t)
      for (int h = 0; h < s.NH; ++h)
        for (int i = 0; i < s.HS; ++i)
          d.heads_ref[head_major(s, b, t, h, i)] = d.tokens0[(size_t(b) * s.T + t) * C + h * s.HS + i];

  // Softmax references in double from the rounded inputs: att[j] = exp(x_j - m) / sum for j <= t.
  d.scale = 1.0f / std::sqrt(float(s.HS));
  const float scale = d.scale;
  const auto preatt = bench::round_through<floatX>(bench::random_vector(s.scores(), 63, -4.0f, 4.0f));
  d.datt = bench::round_through<floatX>(bench::random_vector(s.scores(), 64));
  d.att_ref.resize(s.scores());
  d.dpreatt_ref.resize(s.scores());
  for (int row = 0; row < s.rows(); ++row) {
    const int t = row % s.T;
    const size_t base = size_t(row) * s.T;
    double m = -INFINITY, sum = 0.0;
    for (int j = 0; j <= t; ++j) m = std::max(m, double(scale) * preatt[base + j]);
    for (int j = 0; j <= t; ++j) sum += std::exp(double(scale) * preatt[base + j] - m);
    for (int j = 0; j < s.T; ++j)
      d.att_ref[base + j] = j <= t ? float(std::exp(double(scale) * preatt[base + j] - m) / sum) : 0.0f;
  }
  // The backward reads att as the forward stored it, in floatX.
  const auto att_stored = bench::round_through<floatX>(d.att_ref);
  for (int row = 0; row < s.rows(); ++row) {
    const int t = row % s.T;
    const size_t base = size_t(row) * s.T;
    double dot = 0.0;
    for (int j = 0; j <= t; ++j) dot += double(att_stored[base + j]) * d.datt[base + j];
    for (int j = 0; j < s.T; ++j)
      d.dpreatt_ref[base + j] = j <= t ? float(scale * att_stored[base + j] * (d.datt[base + j] - dot)) : 0.0f;
  }

  d.qkv = bench::to_device<floatX>(d.qkv0);
  d.q = bench::to_device<floatX>(std::vector<float>(n, 1.0f));
  d.k = bench::to_device<floatX>(std::vector<float>(n, 1.0f));
  d.v = bench::to_device<floatX>(std::vector<float>(n, 1.0f));
  d.dqkv = bench::to_device<floatX>(std::vector<float>(3 * n, 1.0f));
  d.tokens = bench::to_device<floatX>(d.tokens0);
  d.preatt = bench::to_device<floatX>(preatt);
  d.att = bench::to_device<floatX>(att_stored);
  d.scores = bench::to_device<floatX>(std::vector<float>(s.scores(), 1.0f));
  const bool ok = bench::run_versions(
      args, kVersions, d, fmt::format("attention_kernels B={} T={} NH={} HS={} ", s.B, s.T, s.NH, s.HS), timed);
  bench::free_device({d.qkv, d.q, d.k, d.v, d.dqkv, d.tokens, d.preatt, d.att, d.scores});
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

int main(int argc, char** argv) {
  // GPT-2 124M's heads at B=4, T=1024.
  const std::vector<bench::Dim> shape = {{"-B", "batch", 4},
                                         {"-T", "sequence length", 1024},
                                         {"-NH", "heads", 12},
                                         {"-HS", "head size", 64, llmc::Packed128<floatX>::size}};
  return bench::run_main(argc, argv, shape, bench::infos(kVersions), run);
}
