// Causal self-attention, forward and backward: the plain fallback (llmc/cuda/attention.cuh, permutes +
// cuBLAS + softmax kernels, in floatX) and cuDNN's fused flash attention (llmc/cuda/cudnn_attention.h,
// bf16), each checked against the CPU layer (llmc/cpu/attention.h) at B=4, T=1024, NH=12, HS=64 and
// at B=2, T=100, NH=3, HS=32, and timed at -B -T -NH -HS (default B=8, T=1024, NH=12, HS=64).
//
// FLOPs: the forward's two T x T products (Q K^T, att V) and the backward's four (dV, d(att),
// dQ, dK), each 2*B*NH*T*T*HS, counted at half for the causal mask. cuDNN's backward also
// recomputes Q K^T; that work is not counted.
//
// cuDNN's backward in three versions, one per speed switch value that changes it: cudnn_bwd (the
// defaults), cudnn_bwd_auto_clear (LLMC_CUDNN_DQ_CLEAR=auto: the dQ accumulator cleared only where
// the loaded cuDNN needs it) and cudnn_bwd_deterministic (LLMC_CUDNN_BACKWARD=deterministic, also
// checked bit-identical over two runs). The versions: kVersions at the end (or --help).
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "dev/cuda/common.cuh"
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

struct Runner {
  bench::Args args;
  bool all_ok = true;
  void ok(bool pass) { all_ok = all_ok && pass; }

  // The fallback at batch B: checks when `ref` is given, times unless --check.
  void fallback(llmc::BlasContext& ctx, const Shape& s, const Reference* ref, const std::vector<float>& qkv_host,
                const std::vector<float>& dout_host) {
    const int B = s.B, T = s.T, NH = s.NH, C = s.NH * s.HS;
    const size_t n_qkv = size_t(B) * T * 3 * C, n_out = size_t(B) * T * C, n_att = size_t(B) * NH * T * T;
    floatX* qkv = bench::to_device<floatX>(qkv_host);
    floatX* dout = bench::to_device<floatX>(dout_host);
    floatX* out = device_alloc<floatX>(n_out);
    floatX* att = device_alloc<floatX>(n_att);
    floatX* dqkv = device_alloc<floatX>(n_qkv);
    floatX* heads = device_alloc<floatX>(7 * n_out + n_att);
    const llmc::AttentionBuffers buf{heads,         heads + n_out,     heads + 2 * n_out, heads + 3 * n_out,
                                     heads + 4 * n_out, heads + 5 * n_out, heads + 6 * n_out, heads + 7 * n_out};
    auto fwd = [&] { llmc::attention_forward(ctx, out, att, buf, qkv, B, T, C, NH, llmc::FastMath::kOff, 0); };
    auto bwd = [&] { llmc::attention_backward(ctx, dqkv, dout, qkv, att, buf, B, T, C, NH, 0); };
    const std::string sfx = label(s);
    const double e = sizeof(floatX);
    if (bench::selected(args, "fallback_fwd") || bench::selected(args, "fallback_bwd")) {
      bench::poison(out, n_out * sizeof(floatX));
      bench::poison(att, n_att * sizeof(floatX));
      fwd();
      if (ref && bench::selected(args, "fallback_fwd")) {
        ok(bench::check("fallback_fwd out" + sfx, bench::from_device(out, n_out), ref->out, kFallbackTol));
        ok(bench::check("fallback_fwd att" + sfx, bench::from_device(att, n_att), ref->att, kFallbackTol));
      }
      if (!args.check_only && bench::selected(args, "fallback_fwd"))
        bench::report("fallback_fwd" + sfx, bench::time_ms(fwd, 3, 20), e * (n_qkv + n_out + n_att),
                      causal_flops(s, 2));
    }
    if (bench::selected(args, "fallback_bwd")) {
      bench::poison(dqkv, n_qkv * sizeof(floatX));
      bwd();
      if (ref) ok(bench::check("fallback_bwd dqkv" + sfx, bench::from_device(dqkv, n_qkv), ref->dqkv, kFallbackTol));
      if (!args.check_only)
        bench::report("fallback_bwd" + sfx, bench::time_ms(bwd, 3, 20), e * (2 * n_qkv + n_out + n_att),
                      causal_flops(s, 4));
    }
    for (void* p : {(void*)qkv, (void*)dout, (void*)out, (void*)att, (void*)dqkv, (void*)heads}) cudaFree(p);
  }

#if defined(LLMC_CUDNN_LIBRARY)
  // cudnn_fwd when `bwd` is "cudnn_bwd" (the defaults' object), and the backward version `bwd`,
  // with attn built for that version's switches.
  void cudnn(llmc::CudnnAttention& attn, const std::string& bwd, const Shape& s, const Reference* ref,
             const std::vector<float>& qkv_host, const std::vector<float>& dout_host) {
    const int B = s.B, T = s.T, NH = s.NH, HS = s.HS, C = NH * HS;
    const size_t n_qkv = size_t(B) * T * 3 * C, n_out = size_t(B) * T * C, n_rows = size_t(B) * NH * T;
    const std::string sfx = label(s);
    const size_t ws_bytes = std::max(attn.forward_workspace_bytes(B, T, NH, HS, true),
                                     attn.backward_workspace_bytes(B, T, NH, HS));
    fmt::print("cudnn workspace B={}: {:.1f} MiB\n", B, ws_bytes / 1048576.0);
    bf16* qkv = bench::to_device<bf16>(qkv_host);
    bf16* dout = bench::to_device<bf16>(dout_host);
    bf16* out = device_alloc<bf16>(n_out);
    bf16* dqkv = device_alloc<bf16>(n_qkv);
    float* stats = device_alloc<float>(n_rows);
    char* ws = device_alloc<char>(std::max<size_t>(ws_bytes, 1));
    auto fwd = [&] { attn.forward(out, stats, qkv, B, T, NH, HS, true, ws, ws_bytes, 0); };
    auto bwd_run = [&] { attn.backward(dqkv, dout, qkv, out, stats, B, T, NH, HS, ws, ws_bytes, 0); };
    const bool check_fwd = bwd == "cudnn_bwd" && bench::selected(args, "cudnn_fwd");
    // The forward writes the out and stats every backward reads.
    bench::poison(out, n_out * sizeof(bf16));
    bench::poison(stats, n_rows * sizeof(float));
    fwd();
    if (ref && check_fwd) {
      ok(bench::check("cudnn_fwd out" + sfx, bench::from_device(out, n_out), ref->out, kCudnnTol));
      ok(bench::check("cudnn_fwd stats (log-sum-exp)" + sfx, bench::from_device(stats, n_rows), ref->lse, kCudnnTol));
    }
    if (!args.check_only && check_fwd)
      bench::report("cudnn_fwd" + sfx, bench::time_ms(fwd), 2.0 * (n_qkv + n_out) + 4.0 * n_rows, causal_flops(s, 2));
    if (bench::selected(args, bwd)) {
      bench::poison(dqkv, n_qkv * sizeof(bf16));
      bwd_run();
      const std::vector<float> first = bench::from_device(dqkv, n_qkv);
      if (ref) ok(bench::check(bwd + " dqkv" + sfx, first, ref->dqkv, kCudnnTol));
      if (bwd == "cudnn_bwd_deterministic") {
        bench::poison(dqkv, n_qkv * sizeof(bf16));
        bwd_run();
        ok(bench::check_identical(bwd + " dqkv" + sfx, bench::from_device(dqkv, n_qkv), first));
      }
      if (!args.check_only)
        bench::report(bwd + sfx, bench::time_ms(bwd_run), 2.0 * (2 * n_qkv + 2 * n_out) + 4.0 * n_rows,
                      causal_flops(s, 4));
    }
    for (void* p : {(void*)qkv, (void*)dout, (void*)out, (void*)dqkv, (void*)stats, (void*)ws}) cudaFree(p);
  }
#endif
};

bool run(const bench::Args& args) {
  const bool want_fallback = bench::selected(args, "fallback_fwd") || bench::selected(args, "fallback_bwd");
  Runner runner{args};
  const size_t blas_ws_bytes = size_t(32) << 20;
  void* blas_ws = nullptr;
  CUDA_CHECK(cudaMalloc(&blas_ws, blas_ws_bytes));
  llmc::BlasContext ctx(blas_ws, blas_ws_bytes);
#if defined(LLMC_CUDNN_LIBRARY)
  // Each backward version with the switches it stands for; the first also runs cudnn_fwd.
  struct CudnnVersion {
    std::string bwd;
    llmc::CudnnBackward graph;
    llmc::CudnnDqClear dq_clear;
  };
  const std::vector<CudnnVersion> cudnn_versions = {
      {"cudnn_bwd", llmc::CudnnBackward::kDefault, llmc::CudnnDqClear::kAlways},
      {"cudnn_bwd_auto_clear", llmc::CudnnBackward::kDefault, llmc::CudnnDqClear::kAuto},
      {"cudnn_bwd_deterministic", llmc::CudnnBackward::kDeterministic, llmc::CudnnDqClear::kAlways}};
  bool want_cudnn = bench::selected(args, "cudnn_fwd");
  for (const CudnnVersion& v : cudnn_versions) want_cudnn = want_cudnn || bench::selected(args, v.bwd);

  // A cuDNN failure (no engine for the graph, an execution error) is reported as a FAIL and the
  // remaining versions still run.
  auto run_cudnn = [&](const Shape& s, const Reference* ref, const std::vector<float>& qkv,
                       const std::vector<float>& dout) {
    for (const CudnnVersion& v : cudnn_versions) {
      if (!bench::selected(args, v.bwd) && !(v.bwd == "cudnn_bwd" && bench::selected(args, "cudnn_fwd"))) continue;
      try {
        llmc::CudnnAttention attn(v.graph, v.dq_clear);
        runner.cudnn(attn, v.bwd, s, ref, qkv, dout);
      } catch (const std::runtime_error& e) {
        fmt::print("FAIL  {}{}  {}\n", v.bwd, label(s), e.what());
        runner.ok(false);
      }
    }
  };
#else
  // Without cuDNN (the emulated GPU) the cudnn versions do not exist.
  auto run_cudnn = [](const Shape&, const Reference*, const std::vector<float>&, const std::vector<float>&) {};
  const bool want_cudnn = false;
#endif
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
    if (want_fallback) {
      if (fallback_is_bf16) {
        runner.fallback(ctx, s, &ref_bf16, ref_bf16.qkv, ref_bf16.dout);
      } else {
        const Reference ref_fp32 = make_reference(s, 77, false);
        runner.fallback(ctx, s, &ref_fp32, ref_fp32.qkv, ref_fp32.dout);
      }
    }
    if (want_cudnn) run_cudnn(s, &ref_bf16, ref_bf16.qkv, ref_bf16.dout);
  }

  if (!args.check_only && !args.small && !args.shape_given) {
    const Shape& s = given;
    const std::vector<float> qkv = bench::random_vector(size_t(s.B) * s.T * 3 * s.NH * s.HS, 91);
    const std::vector<float> dout = bench::random_vector(size_t(s.B) * s.T * s.NH * s.HS, 92);
    if (want_fallback) runner.fallback(ctx, s, nullptr, qkv, dout);
    if (want_cudnn) run_cudnn(s, nullptr, qkv, dout);
  }
  CUDA_CHECK(cudaFree(blas_ws));
  fmt::print("{}\n", runner.all_ok ? "all checks passed" : "SOME CHECKS FAILED");
  return runner.all_ok;
}

}  // namespace

const std::vector<bench::VersionInfo> kVersions = {
    {"fallback_fwd", "llmc/cuda/attention.cuh: permutes, cuBLAS batched GEMMs, causal softmax (the trainer built without cuDNN)"},
    {"fallback_bwd", "its backward"},
#if defined(LLMC_CUDNN_LIBRARY)
    {"cudnn_fwd", "llmc/cuda/cudnn_attention.h: cuDNN's fused flash attention (bf16)"},
    {"cudnn_bwd", "its backward (the defaults)"},
    {"cudnn_bwd_auto_clear", "cudnn_bwd with the dQ accumulator cleared only where needed (LLMC_CUDNN_DQ_CLEAR=auto)"},
    {"cudnn_bwd_deterministic", "cudnn_bwd, deterministic (LLMC_CUDNN_BACKWARD=deterministic)"},
#endif
};

int main(int argc, char** argv) {
  // GPT-2 124M's heads at B=8, T=1024; head sizes in whole 16-byte bf16 vectors (cuDNN's need).
  const std::vector<bench::Dim> shape = {
      {"-B", "batch", 8}, {"-T", "sequence length", 1024}, {"-NH", "heads", 12}, {"-HS", "head size", 64, 8}};
  return bench::run_main(argc, argv, shape, kVersions, run);
}
