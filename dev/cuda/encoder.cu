// Encoder (token + position embedding) forward and backward: versions checked against
// llmc/cpu/encoder.h, then timed.
// The versions: kVersions at the end (or --help).
// Besides random tokens, a skewed batch where one token fills 7 positions of 8 (a frequent token's
// long chain, as "," or end-of-text make in real text), which random tokens never give.
#include <chrono>

#include "dev/cuda/common.cuh"
#include "llmc/cpu/encoder.h"
#include "llmc/cuda/encoder.cuh"

using llmc::floatX;

namespace {

struct Shape {
  int B, T, C, V, Vp;
  bool skewed = false;  // token 7 at 7 positions of every 8
};

std::vector<int> shape_tokens(const Shape& s) {
  std::vector<int> tokens = bench::random_ints(static_cast<size_t>(s.B) * s.T, s.V, 1);
  if (s.skewed)
    for (size_t i = 0; i < tokens.size(); ++i)
      if (i % 8 != 0) tokens[i] = 7;
  return tokens;
}

__global__ void encoder_forward_naive(floatX* out, const int* tokens, const floatX* wte, const floatX* wpe, int BT,
                                      int T_, int C_) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<long long>(BT) * C_) return;
  const int bt = static_cast<int>(i / C_), c = static_cast<int>(i % C_);
  out[i] = floatX(float(wte[static_cast<long long>(tokens[bt]) * C_ + c]) +
                  float(wpe[static_cast<long long>(bt % T_) * C_ + c]));
}

__global__ void encoder_backward_wte_naive(floatX* dwte, const floatX* dout, const int* buckets, int num_buckets,
                                           int C_) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<long long>(num_buckets) * C_) return;
  const int k = static_cast<int>(i / C_), c = static_cast<int>(i % C_);
  const int* offsets = buckets + num_buckets;
  const int* positions = offsets + num_buckets + 1;
  float acc = 0.0f;
  for (int j = offsets[k]; j < offsets[k + 1]; ++j) acc += float(dout[static_cast<long long>(positions[j]) * C_ + c]);
  floatX* w = dwte + static_cast<long long>(buckets[k]) * C_ + c;
  *w = floatX(float(*w) + acc);
}

__global__ void encoder_backward_wpe_naive(floatX* dwpe, const floatX* dout, int B_, int T_, int C_) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= T_ * C_) return;
  float acc = 0.0f;
  for (int b = 0; b < B_; ++b) acc += float(dout[static_cast<long long>(b) * T_ * C_ + i]);
  dwpe[i] = floatX(float(dwpe[i]) + acc);
}

void forward(const std::string& version, const Shape& s, floatX* out, const int* tokens, const floatX* wte,
             const floatX* wpe) {
  const int B = s.B, T = s.T, C = s.C;
  if (version == "fwd1") {
    llmc::launch<encoder_forward_naive>(llmc::ceil_div(static_cast<long long>(B) * T * C, 256), 256, 0, 0, out, tokens,
                                        wte, wpe, B * T, T, C);
    CUDA_CHECK_LAST();
  } else {
    llmc::encoder_forward(out, tokens, wte, wpe, B, T, C, 0);
  }
}

void backward(const std::string& version, const Shape& s, floatX* dwte, floatX* dwpe, float* piece_sums,
              const floatX* dout, const int* buckets, const llmc::EncoderBuckets& counts, unsigned seed) {
  const int num_buckets = counts.num_buckets;
  const int B = s.B, T = s.T, C = s.C;
  if (version == "bwd1") {
    llmc::launch<encoder_backward_wte_naive>(llmc::ceil_div(static_cast<long long>(num_buckets) * C, 256), 256, 0, 0,
                                             dwte, dout, buckets, num_buckets, C);
    CUDA_CHECK_LAST();
    llmc::launch<encoder_backward_wpe_naive>(llmc::ceil_div(T * C, 256), 256, 0, 0, dwpe, dout, B, T, C);
    CUDA_CHECK_LAST();
  } else {
    llmc::encoder_backward(dwte, dwpe, piece_sums, dout, buckets, counts, B, T, C, seed, 0);
  }
}

// Checks (and, when `timed`, times) every selected version at shape s.
bool run_shape(const bench::Args& args, const Shape& s, bool timed) {
  const int B = s.B, T = s.T, C = s.C, V = s.V, Vp = s.Vp;
  const std::string tag = fmt::format("encoder B={} T={} C={} V={}{} ", B, T, C, V, s.skewed ? " skewed" : "");
  bool ok = true;
  const size_t BTC = static_cast<size_t>(B) * T * C;

  const std::vector<int> tokens = shape_tokens(s);
  const auto wte = bench::round_through<floatX>(bench::random_vector(static_cast<size_t>(Vp) * C, 2));
  const auto wpe = bench::round_through<floatX>(bench::random_vector(static_cast<size_t>(T) * C, 3));
  const auto dout = bench::round_through<floatX>(bench::random_vector(BTC, 4));
  const auto dwte0 = bench::round_through<floatX>(bench::random_vector(static_cast<size_t>(Vp) * C, 5));
  const auto dwpe0 = bench::round_through<floatX>(bench::random_vector(static_cast<size_t>(T) * C, 6));

  std::vector<float> out_ref(BTC);
  llmc::encoder_forward(out_ref.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
  std::vector<float> dwte_ref = dwte0, dwpe_ref = dwpe0;
  llmc::encoder_backward(dwte_ref.data(), dwpe_ref.data(), dout.data(), tokens.data(), B, T, C);

  const auto start = std::chrono::steady_clock::now();
  const llmc::EncoderBuckets buckets = llmc::build_encoder_buckets(tokens.data(), B * T, Vp);
  const double bucket_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const llmc::EncoderBuckets pieces =
      llmc::build_encoder_buckets(tokens.data(), B * T, Vp, llmc::EncoderBackward::kPieces);
  const auto buckets_of = [&](const std::string& v) -> const llmc::EncoderBuckets& {
    return v == "bwd3" ? pieces : buckets;
  };

  int* d_tokens = bench::to_device_ints(tokens);
  int* d_buckets = bench::to_device_ints(buckets.packed);
  int* d_pieces = bench::to_device_ints(pieces.packed);
  const auto device_buckets_of = [&](const std::string& v) { return v == "bwd3" ? d_pieces : d_buckets; };
  float* d_piece_sums =
      bench::to_device<float>(std::vector<float>(llmc::encoder_piece_sums_floats(size_t(B) * T, size_t(C)) + 1, 0.0f));
  floatX* d_wte = bench::to_device<floatX>(wte);
  floatX* d_wpe = bench::to_device<floatX>(wpe);
  floatX* d_dout = bench::to_device<floatX>(dout);
  floatX* d_out = bench::to_device<floatX>(std::vector<float>(BTC, 1.0f));
  floatX* d_dwte = bench::to_device<floatX>(dwte0);
  floatX* d_dwpe = bench::to_device<floatX>(dwpe0);
  const size_t wpe_bytes = static_cast<size_t>(T) * C * sizeof(floatX);
  auto reset_grads = [&] {
    bench::upload(d_dwte, dwte0);
    bench::upload(d_dwpe, dwpe0);
  };

  for (const std::string v : {"fwd1", "fwd2"}) {
    if (!bench::selected(args, v)) continue;
    bench::poison(d_out, BTC * sizeof(floatX));
    forward(v, s, d_out, d_tokens, d_wte, d_wpe);
    ok &= bench::check(tag + v + " out", bench::from_device(d_out, BTC), out_ref, 1e-2);
  }
  for (const std::string v : {"bwd1", "bwd2", "bwd3"}) {
    if (!bench::selected(args, v)) continue;
    reset_grads();
    backward(v, s, d_dwte, d_dwpe, d_piece_sums, d_dout, device_buckets_of(v), buckets_of(v), 77);
    const auto dwte_got = bench::from_device(d_dwte, dwte0.size());
    const auto dwpe_got = bench::from_device(d_dwpe, dwpe0.size());
    ok &= bench::check(tag + v + " dwte", dwte_got, dwte_ref, 1e-2);
    ok &= bench::check(tag + v + " dwpe", dwpe_got, dwpe_ref, 1e-2);
    if (s.skewed) {  // the long chain's row alone, which the whole table's error could hide
      const auto row = [&](const std::vector<float>& w) {
        return std::vector<float>(w.begin() + 7 * C, w.begin() + 8 * C);
      };
      ok &= bench::check(tag + v + " dwte row 7 (the long chain)", row(dwte_got), row(dwte_ref), 1e-2);
    }
    reset_grads();
    backward(v, s, d_dwte, d_dwpe, d_piece_sums, d_dout, device_buckets_of(v), buckets_of(v), 77);
    ok &= bench::check_identical(tag + v + " dwte", bench::from_device(d_dwte, dwte0.size()), dwte_got);
  }
  // The skewed batch must have been cut (a check that it exercises the pieces at all).
  if (s.skewed && pieces.num_cut == 0) {
    fmt::print("FAIL {}: the skewed batch left no token cut into pieces\n", tag);
    ok = false;
  }

  if (timed && !args.check_only && ok) {
    fmt::print("B={} T={} C={}{}: {} distinct tokens, {} cut into {} pieces; host bucket build {:.3f} ms (not in the "
               "timings)\n",
               B, T, C, s.skewed ? " skewed" : "", buckets.num_buckets, pieces.num_cut, pieces.num_pieces, bucket_ms);
    // Bytes: every output row written once; per position one wte row read, wpe read once.
    const double fwd_bytes = 2.0 * BTC * sizeof(floatX) + wpe_bytes + B * T * sizeof(int);
    // Bytes: dout read once, touched dwte rows and all of dwpe read and written, buckets read.
    const double bwd_bytes = BTC * sizeof(floatX) + 2.0 * buckets.num_buckets * C * sizeof(floatX) + 2.0 * wpe_bytes +
                             buckets.packed.size() * sizeof(int);
    for (const std::string v : {"fwd1", "fwd2"})
      if (bench::selected(args, v))
        bench::report(tag + v, bench::time_ms([&] { forward(v, s, d_out, d_tokens, d_wte, d_wpe); }), fwd_bytes,
                      0);
    for (const std::string v : {"bwd1", "bwd2", "bwd3"})
      if (bench::selected(args, v))
        bench::report(tag + v, bench::time_ms([&] {
                        backward(v, s, d_dwte, d_dwpe, d_piece_sums, d_dout, device_buckets_of(v), buckets_of(v), 77);
                      }),
                      bwd_bytes, 0);
  }

  bench::free_device({d_tokens, d_buckets, d_pieces, d_piece_sums, d_wte, d_wpe, d_dout, d_out, d_dwte, d_dwpe});
  return ok;
}

bool run(const bench::Args& args) {
  const Shape timed{int(args.dim("-B")), int(args.dim("-T")), int(args.dim("-C")), int(args.dim("-V")),
                    int(args.dim("-Vp"))};
  if (!args.small && timed.Vp < timed.V)
    throw std::invalid_argument(fmt::format("-Vp {} is smaller than -V {}", timed.Vp, timed.V));
  if (!args.small && timed.V <= 7) throw std::invalid_argument(fmt::format("-V {} leaves no token 7", timed.V));
  bool ok = args.small || run_shape(args, timed, true);
  // The same with one token in 7 of 8 positions: at GPT-2 124M's shape a chain of 7168 positions,
  // 112 pieces (where the chain is too short to be cut, the shape is left out).
  Shape skewed = timed;
  skewed.skewed = true;
  if (static_cast<long long>(timed.B) * timed.T * 7 / 8 > llmc::kEncoderPieceRows)
    ok &= args.small || run_shape(args, skewed, true);
  if (args.shape_given) return ok;  // a shape of one's own: that shape alone
  // A small vocabulary repeats tokens, so buckets hold many positions: with C=96 (12 vectors) the
  // block splits them over 21 groups; C=1600 (200 vectors) is GPT-2 1.5B's width.
  ok &= run_shape(args, {3, 50, 96, 500, 504}, false);
  ok &= run_shape(args, {2, 64, 1600, 300, 304}, false);
  // Long chains at small shapes: 280 of 320 positions one token (5 pieces, the last of 24 rows), and
  // 140 of 160 at C=1600's 200 vectors (3 pieces); every other token a short, uncut bucket.
  ok &= run_shape(args, {4, 80, 96, 500, 504, true}, false);
  ok &= run_shape(args, {2, 80, 1600, 300, 304, true}, false);
  return ok;
}

}  // namespace

const std::vector<bench::VersionInfo> kVersions = {
    {"fwd1", "a thread per element, scalar loads"},
    {"fwd2", "llmc/cuda/encoder.cuh: a thread per 16-byte vector"},
    {"bwd1", "host buckets; a thread per (token, channel), scalar, positions summed serially"},
    {"bwd2", "llmc/cuda/encoder.cuh (LLMC_ENCODER_BACKWARD=chains): a block per token, 16-byte vectors, "
             "positions split over groups"},
    {"bwd3", "llmc/cuda/encoder.cuh (LLMC_ENCODER_BACKWARD=pieces): tokens with more than kEncoderPieceRows "
             "positions cut into pieces summed by a block each, then added in order"},
};

int main(int argc, char** argv) {
  // GPT-2 124M at B=8, T=1024; channels and the padded vocabulary in whole 16-byte vectors.
  const int vector = llmc::Packed128<floatX>::size;
  const std::vector<bench::Dim> shape = {{"-B", "batch", 8},
                                         {"-T", "sequence length", 1024},
                                         {"-C", "channels", 768, vector},
                                         {"-V", "vocabulary", 50257},
                                         {"-Vp", "padded vocabulary (>= V)", 50304, vector}};
  return bench::run_main(argc, argv, shape, kVersions, run);
}
