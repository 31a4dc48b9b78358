// Causal self-attention, forward and backward: the plain fallback (llmc/cuda/attention.cuh, permutes +
// cuBLAS + softmax kernels, in floatX) and cuDNN's fused flash attention (llmc/cuda/cudnn_attention.h,
// bf16), each checked against the CPU layer (llmc/cpu/attention.h) at B=4, T=1024, NH=12, HS=64 and
// at B=2, T=100, NH=3, HS=32, and timed at -B -T -NH -HS (default B=8, T=1024, NH=12, HS=64).
//
// FLOPs: the forward's two T x T products (Q K^T, att V) and the backward's four (dV, d(att),
// dQ, dK), each 2*B*NH*T*T*HS, counted at half for the causal mask. cuDNN's backward also
// recomputes Q K^T; that work is not counted.
//
// cuDNN's backward in two versions, one per LLMC_CUDNN_BACKWARD graph: cudnn_bwd (the default) and
// cudnn_bwd_deterministic (also checked bit-identical over two runs). The versions: kVersions below
// (or --help).
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "dev/cuda/versions.cuh"
#include "llmc/cpu/attention.h"
#include "llmc/cuda/attention.cuh"
// The cuDNN versions exist where cuDNN does: not on the emulated GPU (llmc/cuda/device_platform.cuh).
#if defined(LLMC_CUDNN_LIBRARY)
#include "llmc/cuda/cudnn_attention.h"
#endif

using llmc::floatX;
using bf16 = __nv_bfloat16;

namespace {

struct Shape {
  int B, T, NH, HS;
};
constexpr double kFallbackTol = std::is_same<floatX, float>::value ? 1e-4 : 2e-2;
constexpr double kCudnnTol = 2e-2;

struct Reference {
  std::vector<float> qkv, dout, out, att, lse, dqkv;
};

// CPU forward and backward; the log-sum-exp of each score row (what cuDNN's stats hold) follows
// from the diagonal probability: att[t][t] = exp(s_tt - lse), s_tt = q_t . k_t / sqrt(HS).
Reference make_reference(const Shape& s, uint64_t seed, bool round_bf16) {
  const int B = s.B, T = s.T, NH = s.NH, HS = s.HS, C = NH * HS;
  Reference r;
  const size_t n_qkv = size_t(B) * T * 3 * C, n_out = size_t(B) * T * C;
  r.qkv = bench::random_vector(n_qkv, seed + 1);
  r.dout = bench::random_vector(n_out, seed + 2);
  if (round_bf16) {
    r.qkv = bench::round_through<bf16>(r.qkv);
    r.dout = bench::round_through<bf16>(r.dout);
  }
  r.out.resize(n_out);
  r.att.resize(size_t(B) * NH * T * T);
  llmc::attention_forward(r.out.data(), r.att.data(), r.qkv.data(), B, T, C, NH);
  r.dqkv.resize(n_qkv);
  llmc::attention_backward(r.dqkv.data(), r.dout.data(), r.qkv.data(), r.att.data(), B, T, C, NH);
  r.lse.resize(size_t(B) * NH * T);
  const double scale = 1.0 / std::sqrt(double(HS));
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < T; ++t) {
        const float* q = &r.qkv[(size_t(b) * T + t) * 3 * C + h * HS];
        const float* k = q + C;
        double dot = 0.0;
        for (int i = 0; i < HS; ++i) dot += double(q[i]) * k[i];
        const size_t row = (size_t(b) * NH + h) * T + t;
        r.lse[row] = float(dot * scale - std::log(double(r.att[row * T + t])));
      }
  return r;
}

double causal_flops(const Shape& s, int products) {
  return products * 2.0 * s.B * s.NH * double(s.T) * s.T * s.HS * 0.5;
}

std::string label(const Shape& s) { return fmt::format(" B={} T={} NH={} HS={}", s.B, s.T, s.NH, s.HS); }

template <class T>
T* device_alloc(size_t n) {
  T* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, n * sizeof(T)));
  return p;
}

// What a shape's versions run on: a CPU reference to check against (null at the timed shape, which
// is only timed) and the inputs, in the precision each path computes in.
struct Inputs {
  const Reference* ref;
  const std::vector<float>& qkv;
  const std::vector<float>& dout;
};

#if defined(LLMC_CUDNN_LIBRARY)
// cuDNN's attention built for one backward version's graph, and the workspace it needs.
struct CudnnGraph {
  llmc::CudnnAttention attn;
  char* ws = nullptr;
  size_t ws_bytes = 0;
  CudnnGraph(llmc::CudnnBackward backward, const Shape& s) : attn(backward) {
    ws_bytes = std::max(attn.forward_workspace_bytes(s.B, s.T, s.NH, s.HS),
                        attn.backward_workspace_bytes(s.B, s.T, s.NH, s.HS));
    fmt::print("cudnn workspace B={}: {:.1f} MiB\n", s.B, ws_bytes / 1048576.0);
    ws = device_alloc<char>(std::max<size_t>(ws_bytes, 1));
  }
  ~CudnnGraph() { cudaFree(ws); }
  CudnnGraph(const CudnnGraph&) = delete;
  CudnnGraph& operator=(const CudnnGraph&) = delete;
};
#endif

// One shape's device buffers: the fallback's in floatX (made when a fallback version is asked for),
// cuDNN's in bf16 (when a cuDNN one is), and each cuDNN backward version's graph, built when the
// version first runs.
struct Data {
  Shape s;
  llmc::BlasContext& ctx;
  const Reference *fallback_ref = nullptr, *cudnn_ref = nullptr;
  floatX *qkv = nullptr, *dout = nullptr, *out = nullptr, *att = nullptr, *dqkv = nullptr, *heads = nullptr;
  llmc::AttentionBuffers buf{};
  bool att_written = false;  // the fallback forward has run: its att is what the backward reads
  bf16 *qkv16 = nullptr, *dout16 = nullptr, *out16 = nullptr, *dqkv16 = nullptr;
  float* stats = nullptr;
#if defined(LLMC_CUDNN_LIBRARY)
  std::map<std::string, std::unique_ptr<CudnnGraph>> graphs;
#endif

  Data(llmc::BlasContext& blas, const Shape& shape, const Inputs& fallback, const Inputs& cudnn, bool want_fallback,
       bool want_cudnn)
      : s(shape), ctx(blas), fallback_ref(fallback.ref), cudnn_ref(cudnn.ref) {
    if (want_fallback) {
      qkv = bench::to_device<floatX>(fallback.qkv);
      dout = bench::to_device<floatX>(fallback.dout);
      out = device_alloc<floatX>(n_out());
      att = device_alloc<floatX>(n_att());
      dqkv = device_alloc<floatX>(n_qkv());
      heads = device_alloc<floatX>(7 * n_out() + n_att());
      buf = {heads,           heads + n_out(),     heads + 2 * n_out(), heads + 3 * n_out(),
             heads + 4 * n_out(), heads + 5 * n_out(), heads + 6 * n_out(), heads + 7 * n_out()};
    }
    if (want_cudnn) {
      qkv16 = bench::to_device<bf16>(cudnn.qkv);
      dout16 = bench::to_device<bf16>(cudnn.dout);
      out16 = device_alloc<bf16>(n_out());
      dqkv16 = device_alloc<bf16>(n_qkv());
      stats = device_alloc<float>(n_rows());
    }
  }
  ~Data() {
    for (void* p : {(void*)qkv, (void*)dout, (void*)out, (void*)att, (void*)dqkv, (void*)heads, (void*)qkv16,
                    (void*)dout16, (void*)out16, (void*)dqkv16, (void*)stats})
      cudaFree(p);
  }
  Data(const Data&) = delete;
  Data& operator=(const Data&) = delete;

  size_t n_qkv() const { return size_t(s.B) * s.T * 3 * s.NH * s.HS; }
  size_t n_out() const { return size_t(s.B) * s.T * s.NH * s.HS; }
  size_t n_att() const { return size_t(s.B) * s.NH * s.T * s.T; }
  size_t n_rows() const { return size_t(s.B) * s.NH * s.T; }
};

void fallback_fwd(Data& d, int) {
  llmc::attention_forward(d.ctx, d.out, d.att, d.buf, d.qkv, d.s.B, d.s.T, d.s.NH * d.s.HS, d.s.NH, 0);
  d.att_written = true;
}

void fallback_bwd(Data& d, int) {
  llmc::attention_backward(d.ctx, d.dqkv, d.dout, d.qkv, d.att, d.buf, d.s.B, d.s.T, d.s.NH * d.s.HS, d.s.NH, 0);
}

using Version = bench::Version<Data>;

// Without a reference (the timed shape) a check only runs its version once.
bool check_fallback_fwd(Data& d, const Version& v, const std::string&, int block) {
  bench::poison(d.out, d.n_out() * sizeof(floatX));
  bench::poison(d.att, d.n_att() * sizeof(floatX));
  v.launch(d, block);
  if (!d.fallback_ref) return true;
  bool ok = bench::check(v.name + " out" + label(d.s), bench::from_device(d.out, d.n_out()), d.fallback_ref->out,
                         kFallbackTol);
  ok &= bench::check(v.name + " att" + label(d.s), bench::from_device(d.att, d.n_att()), d.fallback_ref->att,
                     kFallbackTol);
  return ok;
}

// The backward reads the forward's att: the forward runs first where it has not run on d.
bool check_fallback_bwd(Data& d, const Version& v, const std::string&, int block) {
  if (!d.att_written) fallback_fwd(d, 0);
  bench::poison(d.dqkv, d.n_qkv() * sizeof(floatX));
  v.launch(d, block);
  if (!d.fallback_ref) return true;
  return bench::check(v.name + " dqkv" + label(d.s), bench::from_device(d.dqkv, d.n_qkv()), d.fallback_ref->dqkv,
                      kFallbackTol);
}

// Bytes: the inputs read and the outputs written once, att included; FLOPs: causal_flops.
bench::Cost fallback_fwd_cost(const Data& d) {
  return {sizeof(floatX) * double(d.n_qkv() + d.n_out() + d.n_att()), causal_flops(d.s, 2)};
}
bench::Cost fallback_bwd_cost(const Data& d) {
  return {sizeof(floatX) * double(2 * d.n_qkv() + d.n_out() + d.n_att()), causal_flops(d.s, 4)};
}

#if defined(LLMC_CUDNN_LIBRARY)
// A backward version's graph, built (and its workspace allocated) when first used.
template <llmc::CudnnBackward kGraph>
CudnnGraph& graph_of(Data& d, const std::string& version) {
  std::unique_ptr<CudnnGraph>& g = d.graphs[version];
  if (!g) g = std::make_unique<CudnnGraph>(kGraph, d.s);
  return *g;
}

// The forward writes the out and stats every backward reads; cudnn_fwd is the default graph's.
template <llmc::CudnnBackward kGraph>
void cudnn_fwd_of(Data& d, const std::string& version) {
  CudnnGraph& g = graph_of<kGraph>(d, version);
  g.attn.forward(d.out16, d.stats, d.qkv16, d.s.B, d.s.T, d.s.NH, d.s.HS, g.ws, g.ws_bytes, 0);
}
void cudnn_fwd(Data& d, int) { cudnn_fwd_of<llmc::CudnnBackward::kDefault>(d, "cudnn_bwd"); }

// A backward version, for its graph: the launch, and the check.
template <llmc::CudnnBackward kGraph>
struct CudnnBwd {
  std::string version;
  void operator()(Data& d, int) const {
    CudnnGraph& g = graph_of<kGraph>(d, version);
    g.attn.backward(d.dqkv16, d.dout16, d.qkv16, d.out16, d.stats, d.s.B, d.s.T, d.s.NH, d.s.HS, g.ws, g.ws_bytes, 0);
  }
  // Its graph's forward, then the backward checked; the deterministic graph also bit-identical over
  // two runs.
  bool operator()(Data& d, const Version& v, const std::string&, int block) const {
    cudnn_fwd_of<kGraph>(d, version);
    bench::poison(d.dqkv16, d.n_qkv() * sizeof(bf16));
    v.launch(d, block);
    const std::vector<float> first = bench::from_device(d.dqkv16, d.n_qkv());
    if (!d.cudnn_ref) return true;
    bool ok = bench::check(v.name + " dqkv" + label(d.s), first, d.cudnn_ref->dqkv, kCudnnTol);
    if (kGraph == llmc::CudnnBackward::kDeterministic) {
      bench::poison(d.dqkv16, d.n_qkv() * sizeof(bf16));
      v.launch(d, block);
      ok &= bench::check_identical(v.name + " dqkv" + label(d.s), bench::from_device(d.dqkv16, d.n_qkv()), first);
    }
    return ok;
  }
};

bool check_cudnn_fwd(Data& d, const Version& v, const std::string&, int block) {
  bench::poison(d.out16, d.n_out() * sizeof(bf16));
  bench::poison(d.stats, d.n_rows() * sizeof(float));
  v.launch(d, block);
  if (!d.cudnn_ref) return true;
  bool ok = bench::check(v.name + " out" + label(d.s), bench::from_device(d.out16, d.n_out()), d.cudnn_ref->out,
                         kCudnnTol);
  ok &= bench::check(v.name + " stats (log-sum-exp)" + label(d.s), bench::from_device(d.stats, d.n_rows()),
                     d.cudnn_ref->lse, kCudnnTol);
  return ok;
}

// A cuDNN failure (no engine for the graph, an execution error) is a FAIL of that version; the
// others still run.
template <class Check>
auto cudnn_failures_reported(Check check) {
  return [check](Data& d, const Version& v, const std::string& tag, int block) {
    try {
      return check(d, v, tag, block);
    } catch (const std::runtime_error& e) {
      fmt::print("FAIL  {}  {}\n", tag, e.what());
      return false;
    }
  };
}

// Bytes in bf16: the inputs read and the outputs written once, with the float log-sum-exp per row.
bench::Cost cudnn_fwd_cost(const Data& d) {
  return {2.0 * (d.n_qkv() + d.n_out()) + 4.0 * d.n_rows(), causal_flops(d.s, 2)};
}
bench::Cost cudnn_bwd_cost(const Data& d) {
  return {2.0 * (2 * d.n_qkv() + 2 * d.n_out()) + 4.0 * d.n_rows(), causal_flops(d.s, 4)};
}

// A backward version: its name, and the graph it is built with.
template <llmc::CudnnBackward kGraph>
Version cudnn_bwd_version(const std::string& name, const std::string& what) {
  const CudnnBwd<kGraph> bwd{name};
  return {name, what, {}, bwd, cudnn_failures_reported(bwd), cudnn_bwd_cost};
}
#endif

// The fallback is timed over fewer runs: its att is B*NH*T*T elements.
const std::vector<Version> kVersions = {
    {"fallback_fwd",
     "llmc/cuda/attention.cuh: permutes, cuBLAS batched GEMMs, causal softmax (the trainer built without cuDNN)",
     {}, fallback_fwd, check_fallback_fwd, fallback_fwd_cost, nullptr, 3, 20},
    {"fallback_bwd", "its backward", {}, fallback_bwd, check_fallback_bwd, fallback_bwd_cost, nullptr, 3, 20},
#if defined(LLMC_CUDNN_LIBRARY)
    {"cudnn_fwd", "llmc/cuda/cudnn_attention.h: cuDNN's fused flash attention (bf16)", {}, cudnn_fwd,
     cudnn_failures_reported(check_cudnn_fwd), cudnn_fwd_cost},
    cudnn_bwd_version<llmc::CudnnBackward::kDefault>("cudnn_bwd", "its backward (the default graph)"),
    cudnn_bwd_version<llmc::CudnnBackward::kDeterministic>(
        "cudnn_bwd_deterministic", "cudnn_bwd, deterministic (LLMC_CUDNN_BACKWARD=deterministic)"),
#endif
};

bool selected_any(const bench::Args& args, const std::string& prefix) {
  return std::any_of(kVersions.begin(), kVersions.end(), [&](const Version& v) {
    return v.name.rfind(prefix, 0) == 0 && bench::selected(args, v.name);
  });
}

bool run(const bench::Args& args) {
  const bool want_fallback = selected_any(args, "fallback_"), want_cudnn = selected_any(args, "cudnn_");
  const size_t blas_ws_bytes = size_t(32) << 20;
  void* blas_ws = nullptr;
  CUDA_CHECK(cudaMalloc(&blas_ws, blas_ws_bytes));
  llmc::BlasContext ctx(blas_ws, blas_ws_bytes);
  bool ok = true;
  // Checked with inputs the GPU can represent exactly: floatX for the fallback, bf16 for cuDNN (the
  // same values in the default BF16 build). GPT-2's heads at B=4, then a small model's: 3 heads of
  // 32, T not a multiple of the softmax's 32 lanes.
  // A shape of one's own is checked (and timed) alone.
  const Shape given{int(args.dim("-B")), int(args.dim("-T")), int(args.dim("-NH")), int(args.dim("-HS"))};
  const std::vector<Shape> checked =
      args.shape_given ? std::vector<Shape>{given} : std::vector<Shape>{{4, 1024, 12, 64}, {2, 100, 3, 32}};
  const bool fallback_is_bf16 = !std::is_same<floatX, float>::value;
  for (const Shape& s : checked) {
    if (args.small && s.T == 1024) continue;
    fmt::print("computing CPU reference at{}...\n", label(s));
    const Reference ref_bf16 = make_reference(s, 77, true);
    const Reference ref_fp32 = want_fallback && !fallback_is_bf16 ? make_reference(s, 77, false) : Reference{};
    const Reference& fallback_ref = fallback_is_bf16 ? ref_bf16 : ref_fp32;
    Data d(ctx, s, {&fallback_ref, fallback_ref.qkv, fallback_ref.dout}, {&ref_bf16, ref_bf16.qkv, ref_bf16.dout},
           want_fallback, want_cudnn);
    ok &= bench::run_versions(args, kVersions, d, "", true, label(s));
  }

  if (!args.check_only && !args.small && !args.shape_given) {
    const Shape& s = given;
    const std::vector<float> qkv = bench::random_vector(size_t(s.B) * s.T * 3 * s.NH * s.HS, 91);
    const std::vector<float> dout = bench::random_vector(size_t(s.B) * s.T * s.NH * s.HS, 92);
    Data d(ctx, s, {nullptr, qkv, dout}, {nullptr, qkv, dout}, want_fallback, want_cudnn);
    ok &= bench::run_versions(args, kVersions, d, "", true, label(s));
  }
  CUDA_CHECK(cudaFree(blas_ws));
  fmt::print("{}\n", ok ? "all checks passed" : "SOME CHECKS FAILED");
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  // GPT-2 124M's heads at B=8, T=1024; head sizes in whole 16-byte bf16 vectors (cuDNN's need).
  const std::vector<bench::Dim> shape = {
      {"-B", "batch", 8}, {"-T", "sequence length", 1024}, {"-NH", "heads", 12}, {"-HS", "head size", 64, 8}};
  return bench::run_main(argc, argv, shape, bench::infos(kVersions), run);
}
