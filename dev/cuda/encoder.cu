// Encoder (token + position embedding) forward and backward: versions checked against
// llmc/cpu/encoder.h, then timed.
// The versions: kVersions below (or --help).
// Besides random tokens, a skewed batch where one token fills 7 positions of 8 (a frequent token's
// long chain, as "," or end-of-text make in real text), which random tokens never give: the small
// random batches leave every token whole (a block each), the skewed ones have the chain cut into
// pieces, so that the trainer's backward (bwd3) runs both of its paths.
#include <chrono>

#include "dev/cuda/versions.cuh"
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

// A thread per 16-byte vector.
__global__ void encoder_forward_vectors(floatX* out, const int* tokens, const floatX* wte, const floatX* wpe, int BT,
                                        int T_, int C_) {
  constexpr int S = llmc::Packed128<floatX>::size;
  const long long i = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) * S;
  if (i >= static_cast<long long>(BT) * C_) return;
  const int bt = static_cast<int>(i / C_), c = static_cast<int>(i % C_);
  // Embedding rows are reused by repeated tokens and by every b: keep them cacheable.
  const llmc::Packed128<floatX> e = llmc::load128(wte + static_cast<long long>(tokens[bt]) * C_ + c);
  const llmc::Packed128<floatX> p = llmc::load128(wpe + static_cast<long long>(bt % T_) * C_ + c);
  llmc::Packed128<floatX> o;
  for (int k = 0; k < S; ++k) o[k] = floatX(float(e[k]) + float(p[k]));
  llmc::store128cs(out + i, o);
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

// One shape's inputs, outputs and CPU answers; the bucket table the backward versions read (bwd1
// its tokens, offsets and positions alone, not the piece ends).
struct Data {
  Shape s;
  llmc::EncoderBuckets buckets;
  int *tokens, *buckets_dev;
  float* piece_sums;
  floatX *wte, *wpe, *dout, *out, *dwte, *dwpe;
  std::vector<float> dwte0, dwpe0, out_ref, dwte_ref, dwpe_ref;
};

void fwd1(Data& d, int) {
  const int B = d.s.B, T = d.s.T, C = d.s.C;
  llmc::launch<encoder_forward_naive>(llmc::ceil_div(static_cast<long long>(B) * T * C, 256), 256, 0, 0, d.out,
                                      d.tokens, d.wte, d.wpe, B * T, T, C);
}

void fwd2(Data& d, int) {
  const int B = d.s.B, T = d.s.T, C = d.s.C;
  const long long vectors = static_cast<long long>(B) * T * C / llmc::Packed128<floatX>::size;
  llmc::launch<encoder_forward_vectors>(llmc::ceil_div(vectors, 256), 256, 0, 0, d.out, d.tokens, d.wte, d.wpe, B * T,
                                        T, C);
}

void bwd1(Data& d, int) {
  const int num_buckets = d.buckets.num_buckets;
  const int B = d.s.B, T = d.s.T, C = d.s.C;
  llmc::launch<encoder_backward_wte_naive>(llmc::ceil_div(static_cast<long long>(num_buckets) * C, 256), 256, 0, 0,
                                           d.dwte, d.dout, d.buckets_dev, num_buckets, C);
  llmc::launch<encoder_backward_wpe_naive>(llmc::ceil_div(T * C, 256), 256, 0, 0, d.dwpe, d.dout, B, T, C);
}

// The trainer's backward: a second pass adds the pieces' sums where a bucket is cut (num_cut).
void bwd3(Data& d, int) {
  llmc::encoder_backward(d.dwte, d.dwpe, d.piece_sums, d.dout, d.buckets_dev, d.buckets, d.s.B, d.s.T, d.s.C, 77, 0);
}

// Bytes: every output row written once; per position one wte row read, wpe read once.
bench::Cost forward_cost(const Data& d) {
  const double BTC = double(d.s.B) * d.s.T * d.s.C;
  return {2.0 * BTC * sizeof(floatX) + double(d.s.T) * d.s.C * sizeof(floatX) + d.s.B * d.s.T * sizeof(int)};
}
// Bytes: dout read once, touched dwte rows and all of dwpe read and written, buckets read.
bench::Cost backward_cost(const Data& d) {
  const double BTC = double(d.s.B) * d.s.T * d.s.C;
  return {BTC * sizeof(floatX) + 2.0 * d.buckets.num_buckets * d.s.C * sizeof(floatX) +
          2.0 * double(d.s.T) * d.s.C * sizeof(floatX) + d.buckets.packed.size() * sizeof(int)};
}

using Version = bench::Version<Data>;

bool check_forward(Data& d, const Version& v, const std::string& tag, int block) {
  bench::poison(d.out, d.out_ref.size() * sizeof(floatX));
  v.launch(d, block);
  return bench::check(tag + " out", bench::from_device(d.out, d.out_ref.size()), d.out_ref, 1e-2);
}

// dwte and dwpe accumulated onto the random initial gradients, then dwte bitwise equal over a
// second run from the same start.
bool check_backward(Data& d, const Version& v, const std::string& tag, int block) {
  const auto run_from_start = [&] {
    bench::upload(d.dwte, d.dwte0);
    bench::upload(d.dwpe, d.dwpe0);
    v.launch(d, block);
  };
  run_from_start();
  const auto dwte_got = bench::from_device(d.dwte, d.dwte0.size());
  const auto dwpe_got = bench::from_device(d.dwpe, d.dwpe0.size());
  bool ok = bench::check(tag + " dwte", dwte_got, d.dwte_ref, 1e-2);
  ok &= bench::check(tag + " dwpe", dwpe_got, d.dwpe_ref, 1e-2);
  if (d.s.skewed) {  // the long chain's row alone, which the whole table's error could hide
    const int C = d.s.C;
    const auto row = [&](const std::vector<float>& w) {
      return std::vector<float>(w.begin() + 7 * C, w.begin() + 8 * C);
    };
    ok &= bench::check(tag + " dwte row 7 (the long chain)", row(dwte_got), row(d.dwte_ref), 1e-2);
  }
  run_from_start();
  ok &= bench::check_identical(tag + " dwte", bench::from_device(d.dwte, d.dwte0.size()), dwte_got);
  return ok;
}

const std::vector<Version> kVersions = {
    {"fwd1", "a thread per element, scalar loads", {}, fwd1, check_forward, forward_cost},
    {"fwd2", "a thread per 16-byte vector (the trainer's before layer 0's LayerNorm took the add: layernorm enc2)", {},
     fwd2, check_forward, forward_cost},
    {"bwd1", "host buckets; a thread per (token, channel), scalar, positions summed serially", {}, bwd1,
     check_backward, backward_cost},
    {"bwd3",
     "llmc/cuda/encoder.cuh: a block per token, 16-byte vectors, positions split over groups; tokens with more than "
     "kEncoderPieceRows positions cut into pieces summed by a block each, then added in order",
     {}, bwd3, check_backward, backward_cost},
};

// Checks (and, when `timed`, times) every selected version at shape s.
bool run_shape(const bench::Args& args, const Shape& s, bool timed) {
  const int B = s.B, T = s.T, C = s.C, V = s.V, Vp = s.Vp;
  const std::string tag = fmt::format("encoder B={} T={} C={} V={}{} ", B, T, C, V, s.skewed ? " skewed" : "");
  const size_t BTC = static_cast<size_t>(B) * T * C;
  Data d{};
  d.s = s;

  const std::vector<int> tokens = shape_tokens(s);
  const auto wte = bench::round_through<floatX>(bench::random_vector(static_cast<size_t>(Vp) * C, 2));
  const auto wpe = bench::round_through<floatX>(bench::random_vector(static_cast<size_t>(T) * C, 3));
  const auto dout = bench::round_through<floatX>(bench::random_vector(BTC, 4));
  d.dwte0 = bench::round_through<floatX>(bench::random_vector(static_cast<size_t>(Vp) * C, 5));
  d.dwpe0 = bench::round_through<floatX>(bench::random_vector(static_cast<size_t>(T) * C, 6));

  d.out_ref.resize(BTC);
  llmc::encoder_forward(d.out_ref.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
  d.dwte_ref = d.dwte0;
  d.dwpe_ref = d.dwpe0;
  llmc::encoder_backward(d.dwte_ref.data(), d.dwpe_ref.data(), dout.data(), tokens.data(), B, T, C);

  const auto start = std::chrono::steady_clock::now();
  d.buckets = llmc::build_encoder_buckets(tokens.data(), B * T, Vp);
  const double bucket_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  d.tokens = bench::to_device_ints(tokens);
  d.buckets_dev = bench::to_device_ints(d.buckets.packed);
  d.piece_sums =
      bench::to_device<float>(std::vector<float>(llmc::encoder_piece_sums_floats(size_t(B) * T, size_t(C)) + 1, 0.0f));
  d.wte = bench::to_device<floatX>(wte);
  d.wpe = bench::to_device<floatX>(wpe);
  d.dout = bench::to_device<floatX>(dout);
  d.out = bench::to_device<floatX>(std::vector<float>(BTC, 1.0f));
  d.dwte = bench::to_device<floatX>(d.dwte0);
  d.dwpe = bench::to_device<floatX>(d.dwpe0);

  bool ok = bench::check_versions(args, kVersions, d, tag);
  // A check that bwd3 runs both paths at all: the skewed batch cut into pieces, the small random
  // ones left whole (the timed shapes may be either).
  if (s.skewed && d.buckets.num_cut == 0) {
    fmt::print("FAIL {}: the skewed batch left no token cut into pieces\n", tag);
    ok = false;
  }
  if (!s.skewed && !timed && d.buckets.num_cut != 0) {
    fmt::print("FAIL {}: the random batch has a token cut into pieces\n", tag);
    ok = false;
  }
  if (timed && !args.check_only && ok) {
    fmt::print("B={} T={} C={}{}: {} distinct tokens, {} cut into {} pieces; host bucket build {:.3f} ms (not in the "
               "timings)\n",
               B, T, C, s.skewed ? " skewed" : "", d.buckets.num_buckets, d.buckets.num_cut, d.buckets.num_pieces,
               bucket_ms);
    bench::time_versions(args, kVersions, d, tag);
  }

  bench::free_device({d.tokens, d.buckets_dev, d.piece_sums, d.wte, d.wpe, d.dout, d.out, d.dwte, d.dwpe});
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

int main(int argc, char** argv) {
  // GPT-2 124M at B=8, T=1024; channels and the padded vocabulary in whole 16-byte vectors.
  const int vector = llmc::Packed128<floatX>::size;
  const std::vector<bench::Dim> shape = {{"-B", "batch", 8},
                                         {"-T", "sequence length", 1024},
                                         {"-C", "channels", 768, vector},
                                         {"-V", "vocabulary", 50257},
                                         {"-Vp", "padded vocabulary (>= V)", 50304, vector}};
  return bench::run_main(argc, argv, shape, bench::infos(kVersions), run);
}
