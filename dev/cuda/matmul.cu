// Fully connected layer through cuBLASLt (llmc/cuda/matmul.cuh) at GPT-2 124M shapes and one small shape
// with tails and misaligned matrices, each version checked against the CPU layer
// (llmc/cpu/matmul.h, llmc/cpu/gelu.h) and timed. The versions: kVersions at the end (or --help).
// The FP8 versions are checked against the CPU layer run on the very values the FP8 copies hold, so
// only the accumulation and the bf16 output round.
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "dev/cuda/common.cuh"
#include "llmc/cpu/gelu.h"
#include "llmc/cpu/matmul.h"
#include "llmc/cuda/fp8.cuh"
#include "llmc/cuda/matmul.cuh"

using llmc::floatX;

namespace {

// bf16 outputs carry ~3 significant digits; the FP32 build holds the 1e-4 parity bar.
constexpr double kTol = std::is_same<floatX, float>::value ? 1e-4 : 1e-2;

// The bias gradient's second pass as the trainer ran it before LLMC_BIAS_GRAD: one thread per
// column adds every slice's partial sum in slice order, on ceil(OC / 256) blocks.
__global__ void bias_grad_serial_finish(floatX* dbias, const float* partial, int slices, int OC) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= OC) return;
  float s = 0.0f;
  for (int i = 0; i < slices; ++i) s += partial[size_t(i) * OC + c];
  dbias[c] = floatX(float(dbias[c]) + s);
}

void matmul_bias_grad_serial(floatX* dbias, float* scratch, const floatX* dout, int BT, int OC) {
  constexpr int kCols = llmc::kWarpSize * llmc::Packed128<floatX>::size;
  float* partial = llmc::scratch_partials(scratch);
  const dim3 grid(llmc::ceil_div(OC, kCols), llmc::bias_grad_slices(BT));
  llmc::launch<llmc::bias_grad_partial_kernel<floatX>>(grid, dim3(llmc::kWarpSize, llmc::kBiasWarps), 0, 0, partial,
                                                       dout, BT, OC);
  CUDA_CHECK_LAST();
  llmc::launch<bias_grad_serial_finish>(llmc::ceil_div(OC, 256), 256, 0, 0, dbias, partial, llmc::bias_grad_slices(BT),
                                        OC);
  CUDA_CHECK_LAST();
}

struct Shape {
  const char* name;
  int BT, C, OC;
  // Elements between each device buffer's 256-byte-aligned allocation and the matrix: 8 puts the
  // matrices 16 (bf16) bytes past the boundary, as the per-layer tensors of a small model may be.
  int offset = 0;
};

// CPU results for one shape, computed once and shared by every version.
struct Reference {
  std::vector<float> inp, weight, bias, dout, pre_gelu_in, dweight0, dbias0;
  std::vector<float> out_nobias, out_bias, out_gelu, dinp, dinp_dgelu, dweight, dbias;
};

Reference make_reference(const Shape& s, uint64_t seed) {
  Reference r;
  const size_t n_in = size_t(s.BT) * s.C, n_out = size_t(s.BT) * s.OC, n_w = size_t(s.OC) * s.C;
  // Rounded through floatX so the CPU sees exactly the GPU's inputs.
  r.inp = bench::round_through<floatX>(bench::random_vector(n_in, seed + 1));
  r.weight = bench::round_through<floatX>(bench::random_vector(n_w, seed + 2, -0.05f, 0.05f));
  r.bias = bench::round_through<floatX>(bench::random_vector(s.OC, seed + 3));
  r.dout = bench::round_through<floatX>(bench::random_vector(n_out, seed + 4));
  r.pre_gelu_in = bench::round_through<floatX>(bench::random_vector(n_in, seed + 5, -3.f, 3.f));
  r.dweight0 = bench::round_through<floatX>(bench::random_vector(n_w, seed + 6));
  r.dbias0 = bench::round_through<floatX>(bench::random_vector(s.OC, seed + 7));

  r.out_nobias.resize(n_out);
  llmc::matmul_forward(r.out_nobias.data(), r.inp.data(), r.weight.data(), nullptr, s.BT, s.C, s.OC);
  r.out_bias.resize(n_out);
  llmc::matmul_forward(r.out_bias.data(), r.inp.data(), r.weight.data(), r.bias.data(), s.BT, s.C, s.OC);
  r.out_gelu.resize(n_out);
  llmc::gelu_forward(r.out_gelu.data(), r.out_bias.data(), n_out);

  r.dinp.resize(n_in);
  r.dweight = r.dweight0;
  r.dbias = r.dbias0;
  llmc::matmul_backward(r.dinp.data(), r.dweight.data(), r.dbias.data(), r.dout.data(), r.inp.data(),
                        r.weight.data(), s.BT, s.C, s.OC);
  r.dinp_dgelu.resize(n_in);
  llmc::gelu_backward(r.dinp_dgelu.data(), r.pre_gelu_in.data(), r.dinp.data(), n_in);
  return r;
}

// Device copies of one shape's inputs and outputs.
struct DeviceBuffers {
  floatX *inp, *weight, *bias, *dout, *pre_gelu_in, *out, *aux, *dinp, *dweight, *dbias;
  float* bias_scratch;
  std::vector<void*> allocations;

  explicit DeviceBuffers(const Shape& s, const Reference& r) {
    const size_t n_in = size_t(s.BT) * s.C, n_out = size_t(s.BT) * s.OC;
    inp = place(r.inp, s.offset);
    weight = place(r.weight, s.offset);
    bias = place(r.bias, s.offset);
    dout = place(r.dout, s.offset);
    pre_gelu_in = place(r.pre_gelu_in, s.offset);
    dweight = place(r.dweight0, s.offset);
    dbias = place(r.dbias0, s.offset);
    out = place(std::vector<float>(n_out, 1.0f), s.offset);
    aux = place(std::vector<float>(n_out, 1.0f), s.offset);
    dinp = place(std::vector<float>(n_in, 1.0f), s.offset);
    CUDA_CHECK(cudaMalloc(&bias_scratch, llmc::matmul_bias_grad_scratch_floats(s.BT, s.OC) * sizeof(float)));
    allocations.push_back(bias_scratch);
  }
  ~DeviceBuffers() {
    for (void* p : allocations) cudaFree(p);
  }

  // `host` in floatX, `offset` elements into a fresh allocation.
  floatX* place(const std::vector<float>& host, int offset) {
    std::vector<float> padded(size_t(offset), 1.0f);
    padded.insert(padded.end(), host.begin(), host.end());
    floatX* base = bench::to_device<floatX>(padded);
    allocations.push_back(base);
    return base + offset;
  }
};

// The value an FP8 code stands for, divided by the scale it was cast at (cuda_fp8.h's host decode).
std::vector<float> fp8_values(const std::vector<float>& x, float scale, __nv_fp8_interpretation_t format) {
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const __nv_fp8_storage_t q = __nv_cvt_float_to_fp8(x[i] * scale, __NV_SATFINITE, format);
    out[i] = __half2float(__half(__nv_cvt_fp8_to_halfraw(q, format))) / scale;
  }
  return out;
}

struct Runner {
  bench::Args args;
  llmc::BlasContext& ctx;
  bool all_ok = true;

  void ok(bool pass) { all_ok = all_ok && pass; }

  template <class Launch>
  void time_it(const std::string& label, Launch&& launch, double bytes, double flops) {
    if (args.check_only) return;
    bench::report(label, bench::time_ms(launch), bytes, flops);
  }

  // The versions with one output: launched once into the poisoned `out` (n elements), checked
  // against `ref`, then timed.
  template <class Launch>
  void check_and_time(const std::string& label, floatX* out, size_t n, const std::vector<float>& ref, double bytes,
                      double flops, Launch&& launch) {
    bench::poison(out, n * sizeof(floatX));
    launch();
    ok(bench::check(label, bench::from_device(out, n), ref, kTol));
    time_it(label, launch, bytes, flops);
  }

  // A search of one GEMM chose one algorithm, and stays with it: a second launch searches no more.
  void check_searched(const std::string& label, const llmc::BlasContext& timed) {
    const bool one = timed.searched().algos.size() == 1 && timed.cached_algorithms() == 1;
    fmt::print("{}  {}  the search chose one algorithm for its one shape\n", one ? "PASS" : "FAIL", label);
    ok(one);
  }

  // The FP8 GEMMs of --fp8 1 on this shape's inputs: activations and weights E4M3, the output
  // gradient E5M2, at powers of two that fit the inputs' ranges (|inp|, |dout| < 1: 2^8 and 2^15;
  // the weight's own, from its amax). FP8 needs bf16 activations and leading dimensions that are
  // multiples of 16.
  void run_fp8(const Shape& s, const Reference& r, const DeviceBuffers& d) {
    if (!std::is_same<floatX, __nv_bfloat16>::value || s.C % 16 != 0 || s.OC % 16 != 0) {
      fmt::print("UNSUPPORTED  fp8 {}  FP8 GEMMs need the bf16 build and C, OC multiples of 16\n", s.name);
      return;
    }
    const size_t n_in = size_t(s.BT) * s.C, n_out = size_t(s.BT) * s.OC, n_w = size_t(s.OC) * s.C;
    const int input = llmc::fp8_tensor_index(llmc::Fp8Role::kInput, llmc::Fp8Linear::kQkv, 0, 1);
    const int gradient = llmc::fp8_tensor_index(llmc::Fp8Role::kGradient, llmc::Fp8Linear::kQkv, 0, 1);
    const int weight = llmc::fp8_tensor_index(llmc::Fp8Role::kWeight, llmc::Fp8Linear::kQkv, 0, 1);
    const float inp_scale = 256.0f, dout_scale = 32768.0f;
    std::vector<float> state = llmc::fp8_initial_state(1);
    for (const auto& [i, scale] : {std::pair{input, inp_scale}, std::pair{gradient, dout_scale}}) {
      state[llmc::fp8_scale_offset(i)] = scale;
      state[llmc::fp8_scale_inv_offset(i)] = 1.0f / scale;
    }
    float* d_state = nullptr;
    __nv_fp8_storage_t *inp8 = nullptr, *dout8 = nullptr, *w8 = nullptr, *wt8 = nullptr;
    CUDA_CHECK(cudaMalloc(&d_state, state.size() * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(d_state, state.data(), state.size() * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMalloc(&inp8, n_in));
    CUDA_CHECK(cudaMalloc(&dout8, n_out));
    CUDA_CHECK(cudaMalloc(&w8, n_w));
    CUDA_CHECK(cudaMalloc(&wt8, n_w));
    llmc::fp8_cast({inp8, d_state + llmc::fp8_scale_offset(input), nullptr, __NV_E4M3}, d.inp, n_in, 0);
    llmc::fp8_cast({dout8, d_state + llmc::fp8_scale_offset(gradient), nullptr, __NV_E5M2}, d.dout, n_out, 0);
    llmc::fp8_cast_weights({{d.weight, s.OC, s.C, weight, w8, wt8}}, d_state, weight, 1, 0);
    float w_scale = 0.0f;
    CUDA_CHECK(cudaMemcpy(&w_scale, d_state + llmc::fp8_scale_offset(weight), sizeof w_scale, cudaMemcpyDeviceToHost));
    const std::vector<float> inp = fp8_values(r.inp, inp_scale, __NV_E4M3), w = fp8_values(r.weight, w_scale, __NV_E4M3);
    const llmc::Fp8Matrix a{inp8, d_state + llmc::fp8_scale_inv_offset(input), __NV_E4M3};
    const llmc::Fp8Matrix wm{w8, d_state + llmc::fp8_scale_inv_offset(weight), __NV_E4M3};
    const double gemm_flops = 2.0 * s.BT * s.C * s.OC, e = sizeof(floatX);
    auto tag = [&](const char* v) { return fmt::format("{} {}", v, s.name); };
    if (bench::selected(args, "fwd_bias_fp8")) {
      std::vector<float> ref(n_out);
      llmc::matmul_forward(ref.data(), inp.data(), w.data(), r.bias.data(), s.BT, s.C, s.OC);
      check_and_time(tag("fwd_bias_fp8"), d.out, n_out, ref, double(n_in + n_w) + e * n_out, gemm_flops,
                     [&] { llmc::matmul_forward_fp8(ctx, d.out, a, wm, d.bias, s.BT, s.C, s.OC, 0); });
    }
    if (bench::selected(args, "bwd_dinp_fp8")) {
      const std::vector<float> dout = fp8_values(r.dout, dout_scale, __NV_E5M2);
      std::vector<float> ref(n_in), dweight(n_w, 0.0f), dbias(size_t(s.OC), 0.0f);
      llmc::matmul_backward(ref.data(), dweight.data(), dbias.data(), dout.data(), r.inp.data(), w.data(), s.BT, s.C,
                            s.OC);
      llmc::MatmulBackward p{.dinp = d.dinp, .BT = s.BT, .C = s.C, .OC = s.OC};
      p.dout8 = {dout8, d_state + llmc::fp8_scale_inv_offset(gradient), __NV_E5M2};
      p.weight_t8 = {wt8, d_state + llmc::fp8_scale_inv_offset(weight), __NV_E4M3};
      check_and_time(tag("bwd_dinp_fp8"), d.dinp, n_in, ref, double(n_out + n_w) + e * n_in, gemm_flops,
                     [&] { llmc::matmul_backward_input(ctx, p, 0); });
    }
    bench::free_device({d_state, inp8, dout8, w8, wt8});
  }

  void run_shape(const Shape& s, uint64_t seed) {
    fmt::print("== {}: BT={} C={} OC={}\n", s.name, s.BT, s.C, s.OC);
    const Reference r = make_reference(s, seed);
    DeviceBuffers d(s, r);
    const size_t n_in = size_t(s.BT) * s.C, n_out = size_t(s.BT) * s.OC, n_w = size_t(s.OC) * s.C;
    const double gemm_flops = 2.0 * s.BT * s.C * s.OC;
    const double e = sizeof(floatX);
    const double fwd_bytes = e * (n_in + n_w + n_out);
    auto tag = [&](const char* v) { return fmt::format("{} {}", v, s.name); };

    if (bench::selected(args, "fwd"))
      check_and_time(tag("fwd"), d.out, n_out, r.out_nobias, fwd_bytes, gemm_flops,
                     [&] { llmc::matmul_forward(ctx, d.out, d.inp, d.weight, nullptr, s.BT, s.C, s.OC, 0); });
    if (bench::selected(args, "fwd_bias"))
      check_and_time(tag("fwd_bias"), d.out, n_out, r.out_bias, fwd_bytes, gemm_flops,
                     [&] { llmc::matmul_forward(ctx, d.out, d.inp, d.weight, d.bias, s.BT, s.C, s.OC, 0); });
    // The GELU two ways: cuBLASLt's epilogues, and a plain GEMM followed by the GELU kernels.
    for (bool epilogue : {true, false}) {
      const char* version = epilogue ? "fwd_gelu" : "fwd_gelu_kernel";
      if (!bench::selected(args, version)) continue;
      bench::poison(d.out, n_out * sizeof(floatX));
      bench::poison(d.aux, n_out * sizeof(floatX));
      auto run = [&] {
        llmc::matmul_forward_gelu(ctx, d.out, d.aux, d.inp, d.weight, d.bias, s.BT, s.C, s.OC, epilogue,
                                  llmc::FastMath::kOff, 0);
      };
      run();
      ok(bench::check(tag(version) + " out", bench::from_device(d.out, n_out), r.out_gelu, kTol));
      ok(bench::check(tag(version) + " pre-activation", bench::from_device(d.aux, n_out), r.out_bias, kTol));
      time_it(tag(version), run, fwd_bytes + e * n_out * (epilogue ? 1 : 3), gemm_flops);
    }
    const double dinp_bytes = e * (n_out + n_w + n_in);
    const llmc::MatmulBackward plain{.dinp = d.dinp, .dout = d.dout, .weight = d.weight, .BT = s.BT, .C = s.C,
                                     .OC = s.OC};
    if (bench::selected(args, "bwd_dinp"))
      check_and_time(tag("bwd_dinp"), d.dinp, n_in, r.dinp, dinp_bytes, gemm_flops,
                     [&] { llmc::matmul_backward_input(ctx, plain, 0); });
    for (bool epilogue : {true, false}) {
      const char* version = epilogue ? "bwd_dinp_dgelu" : "bwd_dinp_gelu_kernel";
      llmc::MatmulBackward dgelu = plain;
      dgelu.pre_gelu = d.pre_gelu_in;
      dgelu.dgelu_epilogue = epilogue;
      if (bench::selected(args, version))
        check_and_time(tag(version), d.dinp, n_in, r.dinp_dgelu, dinp_bytes + e * n_in * (epilogue ? 1 : 3),
                       gemm_flops, [&] { llmc::matmul_backward_input(ctx, dgelu, 0); });
    }
    // The accumulating outputs are reset to the random initial gradient, checked after one launch,
    // then timed on the same buffers (which keep accumulating).
    if (bench::selected(args, "bwd_dweight")) {
      bench::upload(d.dweight, r.dweight0);
      auto run = [&] { llmc::matmul_backward_weight(ctx, d.dweight, d.dout, d.inp, s.BT, s.C, s.OC, 0); };
      run();
      ok(bench::check(tag("bwd_dweight (+=)"), bench::from_device(d.dweight, n_w), r.dweight, kTol));
      time_it(tag("bwd_dweight"), run, e * (n_out + n_in + 2 * n_w), gemm_flops);
    }
    // The timed search, as the trainer's tuning pass runs it: the first launch times every candidate
    // on the real buffers and runs the fastest last. An overwriting GEMM's output is then the chosen
    // algorithm's; an accumulating one has added 2 x candidates + 1 times, so it is reset and run
    // again with the algorithm chosen.
    if (bench::selected(args, "fwd_bias_timed")) {
      llmc::BlasContext timed(ctx.workspace(), ctx.workspace_bytes());
      timed.begin_search();
      check_and_time(tag("fwd_bias_timed"), d.out, n_out, r.out_bias, fwd_bytes, gemm_flops,
                     [&] { llmc::matmul_forward(timed, d.out, d.inp, d.weight, d.bias, s.BT, s.C, s.OC, 0); });
      check_searched(tag("fwd_bias_timed"), timed);
    }
    if (bench::selected(args, "bwd_dweight_timed")) {
      llmc::BlasContext timed(ctx.workspace(), ctx.workspace_bytes());
      auto run = [&] { llmc::matmul_backward_weight(timed, d.dweight, d.dout, d.inp, s.BT, s.C, s.OC, 0); };
      timed.begin_search();
      run();
      timed.end_search();
      bench::upload(d.dweight, r.dweight0);
      run();
      ok(bench::check(tag("bwd_dweight_timed (+=)"), bench::from_device(d.dweight, n_w), r.dweight, kTol));
      check_searched(tag("bwd_dweight_timed"), timed);
      time_it(tag("bwd_dweight_timed"), run, e * (n_out + n_in + 2 * n_w), gemm_flops);
    }
    // The two deterministic kernel paths: checked, then run again for the same bits, then timed.
    for (const char* version : {"dbias_serial", "dbias_kernel"}) {
      if (!bench::selected(args, version)) continue;
      const bool serial = std::string(version) == "dbias_serial";
      auto run = [&] {
        if (serial)
          matmul_bias_grad_serial(d.dbias, d.bias_scratch, d.dout, s.BT, s.OC);
        else
          llmc::matmul_bias_grad(d.dbias, d.bias_scratch, d.dout, s.BT, s.OC, 0);
      };
      bench::upload(d.dbias, r.dbias0);
      run();
      ok(bench::check(tag(version) + " (+=)", bench::from_device(d.dbias, s.OC), r.dbias, kTol));
      const std::vector<float> first = bench::from_device(d.dbias, s.OC);
      bench::upload(d.dbias, r.dbias0);
      run();
      const bool same = bench::from_device(d.dbias, s.OC) == first;
      fmt::print("{}  {}  bitwise identical on a second run\n", same ? "PASS" : "FAIL", tag(version));
      ok(same);
      time_it(tag(version), run, e * (n_out + 2.0 * s.OC), 0.0);
    }
    if (bench::selected(args, "fwd_bias_fp8") || bench::selected(args, "bwd_dinp_fp8")) run_fp8(s, r, d);
    if (bench::selected(args, "dbias_epilogue")) {
      bench::upload(d.dweight, r.dweight0);
      bench::upload(d.dbias, r.dbias0);
      const llmc::MatmulBackward p{.dweight = d.dweight, .dbias = d.dbias, .bias_scratch = d.bias_scratch,
                                   .dout = d.dout, .inp = d.inp, .BT = s.BT, .C = s.C, .OC = s.OC};
      if (!llmc::matmul_backward_weight_bias_epilogue(ctx, p, 0)) {
        // The trainer then takes the kernels (dbias_kernel): reported, not failed.
        fmt::print("UNSUPPORTED  {}  cuBLASLt has no BGRADB epilogue for this GEMM\n", tag("dbias_epilogue"));
        return;
      }
      ok(bench::check(tag("dbias_epilogue dweight (+=)"), bench::from_device(d.dweight, n_w), r.dweight, kTol));
      ok(bench::check(tag("dbias_epilogue dbias (+=)"), bench::from_device(d.dbias, s.OC), r.dbias, kTol));
      time_it(tag("dbias_epilogue"), [&] { llmc::matmul_backward_weight_bias_epilogue(ctx, p, 0); },
              e * (n_out + n_in + 2 * n_w + 3.0 * s.OC), gemm_flops);
    }
  }
};

bool run(const bench::Args& args) {
  const size_t workspace_bytes = size_t(32) << 20;
  void* workspace = nullptr;
  CUDA_CHECK(cudaMalloc(&workspace, workspace_bytes));
  llmc::BlasContext ctx(workspace, workspace_bytes);
  Runner runner{args, ctx};
  // A layer's four GEMMs at B*T rows of C channels: qkv, attproj, fc, fcproj.
  const int BT = int(args.dim("-BT")), C = int(args.dim("-C"));
  const Shape shapes[] = {{"qkv", BT, C, 3 * C},
                          {"attproj", BT, C, C},
                          {"fc", BT, C, 4 * C},
                          {"fcproj", BT, 4 * C, C},
                          // Tails everywhere: BT not a multiple of the bias kernel's 64-row slices,
                          // OC not a multiple of its 256 columns, matrices not 256-byte aligned.
                          // OC = 272 = 17 x 16: the least FP8 takes (leading dimensions of 16).
                          {"odd", 200, 96, 272, 8}};
  uint64_t seed = 1000;
  // --small: the odd shape alone; a shape of one's own: the four GEMMs alone.
  for (const Shape& s : shapes)
    if (s.offset != 0 ? !args.shape_given : !args.small) runner.run_shape(s, seed += 100);
  fmt::print("cached cuBLASLt algorithms: {}\n", ctx.cached_algorithms());
  CUDA_CHECK(cudaFree(workspace));
  fmt::print("{}\n", runner.all_ok ? "all checks passed" : "SOME CHECKS FAILED");
  return runner.all_ok;
}

}  // namespace

const std::vector<bench::VersionInfo> kVersions = {
    {"fwd", "no epilogue"},
    {"fwd_bias", "bias epilogue"},
    {"fwd_gelu", "bias + GELU epilogue, the pre-activation as aux (LLMC_GELU=epilogues)"},
    {"fwd_gelu_kernel", "bias epilogue, then the GELU kernel (LLMC_GELU=kernels)"},
    {"bwd_dinp", "the input gradient"},
    {"bwd_dinp_dgelu", "the input gradient with the DGELU epilogue"},
    {"bwd_dinp_gelu_kernel", "the input gradient, then the GELU backward kernel"},
    {"bwd_dweight", "the weight gradient, accumulating"},
    {"dbias_serial", "the slice kernel, then a thread per column adding every slice in turn (before LLMC_BIAS_GRAD)"},
    {"dbias_kernel", "slices summed by 32 warps per 32 columns, deterministic (LLMC_BIAS_GRAD=kernels)"},
    {"dbias_epilogue", "the dweight GEMM's BGRADB epilogue into scratch, then added (LLMC_BIAS_GRAD=epilogue)"},
    {"fwd_bias_timed", "fwd_bias with the timed search's algorithm (LLMC_GEMM_SEARCH=timed)"},
    {"bwd_dweight_timed", "bwd_dweight with the timed search's algorithm (LLMC_GEMM_SEARCH=timed)"},
    {"fwd_bias_fp8", "--fp8 1: operands cast to E4M3 by the trainer's kernels, cuBLASLt's FP8 GEMM (bf16 build)"},
    {"bwd_dinp_fp8", "--fp8 1: dout in E5M2, the weight's transposed E4M3 copy, FP8 GEMM (bf16 build)"},
};

int main(int argc, char** argv) {
  // GPT-2 124M at B*T = 8*1024; channels in whole 16-byte vectors.
  const std::vector<bench::Dim> shape = {{"-BT", "rows (B*T)", 8 * 1024},
                                         {"-C", "channels", 768, llmc::Packed128<floatX>::size}};
  return bench::run_main(argc, argv, shape, kVersions, run);
}
