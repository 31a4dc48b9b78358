// cuBLAS and cuBLASLt on the emulated GPU: the calls the project makes, against the toolkit's own
// cublas_api.h and cublasLt.h, implemented from NVIDIA's documented semantics (docs/cuda-emulator.md
// lists them). Matrices are column-major: element (r, c) of a rows x cols matrix with leading
// dimension ld is at r + c * ld. D = alpha op(A) op(B) + beta C, then the epilogue, every product
// and sum in fp32 and each output rounded once to its type; FP8 matmuls (A and B in E4M3 or E5M2)
// scale as cublasLtMatmul documents, D = alpha scale_A scale_B op(A) op(B) + beta scale_C C. A call
// the real library rejects returns the status the documentation gives for it; one it would run but
// the emulator does not implement returns CUBLAS_STATUS_NOT_SUPPORTED. Every failure is printed on
// stderr with the call and why. A call is checked when it is made; its arithmetic is queued on its
// stream, as a GPU's kernels.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "emulator/runtime/blas_lt.h"
#include "emulator/runtime/device_memory.h"
#include "emulator/runtime/gemm.h"

struct cublasLtContext {
  int unused;
};
struct cublasContext {
  cudaStream_t stream;  // cublasSetStream's: the GEMMs run on it
  // cublasSetWorkspace's buffer; null once cublasSetStream has reset the handle to cuBLAS's own
  // pool, which the emulator does not have (its device memory is what the caller allocated).
  void* workspace;
};

namespace emu {

cublasStatus_t fail(cublasStatus_t status, const std::string& what) {
  std::fprintf(stderr, "emulated cuBLAS: %s (%s)\n", what.c_str(), cublasGetStatusString(status));
  return status;
}

uint32_t alignment_of(const void* p) {
  const uintptr_t bits = reinterpret_cast<uintptr_t>(p) | 256u;
  return uint32_t(bits & (~bits + 1));
}

namespace {

struct LtPreference {
  uint64_t max_workspace = 0;
  uint32_t align[4] = {256, 256, 256, 256};  // A, B, C, D (the documented defaults)
};
// What an emulated algorithm remembers of the query that chose it: cublasLtMatmul refuses to run
// it on another kind of GEMM, on operands less aligned than the query promised, or with less
// workspace than it needs.
struct LtAlgo {
  uint64_t magic;
  uint32_t epilogue;
  int32_t trans_a, trans_b;
  uint8_t types[4];  // of A, B, C and D (cudaDataType_t, every value of which fits a byte)
  uint32_t align[4];
  uint32_t vector_align;  // bias and aux, capped at 16 bytes
  uint32_t variant;       // which of kAlgoVariants
  uint64_t workspace;     // bytes it needs (the heuristic result's workspaceSize)
};
// The algorithms the emulated heuristic offers, best first, as the real one lists several kernels
// per GEMM (tile shapes, split-K): each computes the same result here, since the emulator has one
// way to sum, but a split-K kernel needs workspace for its fp32 partial products (splits x m x n
// floats), so it is offered only when the preference's workspace holds that, as cuBLASLt does.
struct AlgoVariant {
  uint32_t split_k;  // 1: no partial products, no workspace
};
constexpr AlgoVariant kAlgoVariants[] = {{1}, {1}, {2}, {4}};
uint64_t variant_workspace(const AlgoVariant& v, uint64_t m, uint64_t n) {
  return v.split_k == 1 ? 0 : uint64_t(v.split_k) * m * n * sizeof(float);
}
constexpr uint64_t kAlgoMagic = 0x454d55414c474f31ull;  // "EMUALGO1"
static_assert(sizeof(LtAlgo) <= sizeof(cublasLtMatmulAlgo_t), "an algorithm fits cuBLASLt's opaque struct");

// Live handles and descriptors: a destroyed or never created one is an error, not a crash.
struct Registry {
  std::mutex mutex;
  std::set<const void*> live;
};
Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}
template <class T>
T* track(T* p) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  registry().live.insert(p);
  return p;
}
bool alive(const void* p) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  return p != nullptr && registry().live.count(p) != 0;
}
template <class T>
cublasStatus_t release(T* p) {
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    if (!registry().live.erase(p)) return CUBLAS_STATUS_NOT_INITIALIZED;
  }
  delete p;
  return CUBLAS_STATUS_SUCCESS;
}

// Copies an attribute's value into its field; documented: INVALID_VALUE when buf is null or the
// size is not the attribute's.
cublasStatus_t set_attribute(const char* call, int attr, void* field, size_t size, const void* buf, size_t bytes) {
  if (buf == nullptr || bytes != size)
    return fail(CUBLAS_STATUS_INVALID_VALUE, std::string(call) + ": attribute " + std::to_string(attr) + " takes " +
                                                 std::to_string(size) + " bytes, got " +
                                                 (buf ? std::to_string(bytes) + " bytes" : "null"));
  std::memcpy(field, buf, size);
  return CUBLAS_STATUS_SUCCESS;
}

LtDesc* desc_of(cublasLtMatmulDesc_t d) { return reinterpret_cast<LtDesc*>(d); }
LtLayout* layout_of(cublasLtMatrixLayout_t l) { return reinterpret_cast<LtLayout*>(l); }
LtPreference* pref_of(cublasLtMatmulPreference_t p) { return reinterpret_cast<LtPreference*>(p); }

bool supported_type(cudaDataType_t t) { return t == CUDA_R_32F || t == CUDA_R_16BF; }
size_t type_bytes(cudaDataType_t t) { return t == CUDA_R_32F ? 4 : is_fp8(t) ? 1 : 2; }

// The bytes a column-major rows x cols matrix with leading dimension ld spans from its start.
size_t matrix_bytes(uint64_t rows, uint64_t cols, int64_t ld, cudaDataType_t type) {
  if (rows == 0 || cols == 0) return 0;
  return size_t((cols - 1) * uint64_t(ld) + rows) * type_bytes(type);
}

// Every operand a library kernel would touch must lie in one device allocation; on a GPU a kernel
// that reads past one faults (or silently reads a neighbour), here it is a sticky device fault.
bool check_device(const char* call, const char* what, const void* p, size_t bytes) {
  if (bytes == 0 || inside_device_allocation(p, bytes)) return true;
  char text[160];
  std::snprintf(text, sizeof text, "%s: %s at %p (+%zu bytes) is not inside one device allocation", call, what, p,
                bytes);
  library_fault(cudaErrorIllegalAddress, text);
  return false;
}


// The shape checks common to the heuristic query and the matmul: op(A) is m x k, op(B) k x n, C and
// D m x n; types, leading dimensions and the epilogue's extra operands as documented.
cublasStatus_t check_lt(const char* call, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                        cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d, LtShape& shape) {
  if (!alive(op) || !alive(a) || !alive(b) || !alive(c) || !alive(d))
    return fail(CUBLAS_STATUS_INVALID_VALUE, std::string(call) + ": a descriptor that is null or destroyed");
  const LtDesc& o = *desc_of(op);
  const LtLayout &la = *layout_of(a), &lb = *layout_of(b), &lc = *layout_of(c), &ld = *layout_of(d);
  if (o.compute != CUBLAS_COMPUTE_32F || o.scale != CUDA_R_32F)
    return fail(CUBLAS_STATUS_NOT_SUPPORTED, std::string(call) + ": only CUBLAS_COMPUTE_32F with fp32 scale is emulated");
  if (is_fp8(la.type) || is_fp8(lb.type)) {
    if (cublasStatus_t s = check_fp8(call, o, la, lb, lc, ld)) return s;
  } else if (!supported_type(la.type) || la.type != lb.type || la.type != lc.type || la.type != ld.type) {
    return fail(CUBLAS_STATUS_NOT_SUPPORTED, std::string(call) + ": A, B, C and D must all be fp32 or all bf16, " +
                                                 "or A and B FP8 with C bf16 and D bf16 or E4M3 (the combinations emulated)");
  }
  for (const LtLayout* l : {&la, &lb, &lc, &ld})
    if (l->ld < int64_t(l->rows) || l->ld < 1)
      return fail(CUBLAS_STATUS_INVALID_VALUE, std::string(call) + ": leading dimension " + std::to_string(l->ld) +
                                                   " is less than the " + std::to_string(l->rows) + " rows");
  const bool ta = o.trans_a == CUBLAS_OP_T, tb = o.trans_b == CUBLAS_OP_T;
  if ((o.trans_a != CUBLAS_OP_N && !ta) || (o.trans_b != CUBLAS_OP_N && !tb))
    return fail(CUBLAS_STATUS_NOT_SUPPORTED, std::string(call) + ": only CUBLAS_OP_N and CUBLAS_OP_T are emulated");
  shape.m = ta ? la.cols : la.rows;
  shape.k = ta ? la.rows : la.cols;
  shape.n = tb ? lb.rows : lb.cols;
  const uint64_t kb = tb ? lb.cols : lb.rows;
  if (kb != shape.k || lc.rows != shape.m || lc.cols != shape.n || ld.rows != shape.m || ld.cols != shape.n ||
      lc.ld != ld.ld)
    return fail(CUBLAS_STATUS_INVALID_VALUE,
                std::string(call) + ": op(A) is " + std::to_string(shape.m) + " x " + std::to_string(shape.k) +
                    ", op(B) " + std::to_string(kb) + " x " + std::to_string(shape.n) + ", C " +
                    std::to_string(lc.rows) + " x " + std::to_string(lc.cols) + ", D " + std::to_string(ld.rows) +
                    " x " + std::to_string(ld.cols) + " (C and D must also share a leading dimension)");
  if (!epilogue_kind(o.epilogue, shape.kind))
    return fail(CUBLAS_STATUS_NOT_SUPPORTED,
                std::string(call) + ": epilogue " + std::to_string(o.epilogue) + " is not emulated (no ReLU)");
  if (uses_bias(shape.kind) && o.bias == nullptr)
    return fail(CUBLAS_STATUS_INVALID_VALUE, std::string(call) + ": the epilogue needs CUBLASLT_MATMUL_DESC_BIAS_POINTER");
  // cublasLt.h (CUBLASLT_MATMUL_DESC_BIAS_POINTER, _BIAS_DATA_TYPE): the bias, and the bias gradient
  // the BGRAD epilogues write, are in D's type; the documented exceptions are IMMA (int8) kernels
  // and fp8 kernels with FP32 or FP8 output, of which the emulator has the E4M3 output, whose bias
  // is BF16 (cuBLAS documentation, cublasLtMatmul, the FP8 table): C's type, as it is D's for every
  // other emulated GEMM. Another type is refused as having no kernel.
  if (uses_bias(shape.kind) && o.bias_type != -1 && o.bias_type != int32_t(lc.type))
    return fail(CUBLAS_STATUS_NOT_SUPPORTED, std::string(call) + ": CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE " +
                                                 std::to_string(o.bias_type) + " with C of type " +
                                                 std::to_string(int(lc.type)) +
                                                 " (the emulated GEMMs take the bias in C's type)");
  // CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE: documented as D's type, another only for an FP8 D's
  // GELU aux (check_fp8 says which), and INVALID_VALUE where set otherwise.
  if (o.aux_type != -1 && o.aux_type != int32_t(ld.type) && !(is_fp8(ld.type) && uses_aux(shape.kind)))
    return fail(CUBLAS_STATUS_INVALID_VALUE, std::string(call) + ": CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE " +
                                                 std::to_string(o.aux_type) + " is set, but D is of type " +
                                                 std::to_string(int(ld.type)) + " and takes no other");
  if (uses_aux(shape.kind)) {
    if (o.aux == nullptr)
      return fail(CUBLAS_STATUS_INVALID_VALUE,
                  std::string(call) + ": the epilogue needs CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER");
    if (o.aux_ld < int64_t(shape.m) || o.aux_ld % 8 != 0)
      return fail(CUBLAS_STATUS_INVALID_VALUE, std::string(call) + ": CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD " +
                                                   std::to_string(o.aux_ld) +
                                                   " must be a multiple of 8 and at least the " +
                                                   std::to_string(shape.m) + " rows of D");
  }
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace
}  // namespace emu

using namespace emu;

extern "C" {

const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "the operation completed successfully";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    default: return "unknown error";
  }
}

size_t cublasLtGetVersion(void) { return CUBLAS_VERSION; }

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  if (!handle) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtCreate: null handle pointer");
  *handle = track(new cublasLtContext{});
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) { return release(handle); }

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute,
                                        cudaDataType_t scale) {
  if (!desc) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulDescCreate: null descriptor pointer");
  LtDesc* d = track(new LtDesc{});
  d->compute = compute;
  d->scale = scale;
  *desc = reinterpret_cast<cublasLtMatmulDesc_t>(d);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) { return release(desc_of(desc)); }

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t bytes) {
  if (!alive(desc)) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulDescSetAttribute: no such descriptor");
  LtDesc& d = *desc_of(desc);
  void* field = nullptr;
  size_t size = sizeof(float*);
  // Accepted and not kept: the emulator always accumulates in fp32, whichever FP8 accumulation
  // (periodically promoted, or the faster one that is not) the flag asks for.
  int8_t fast_accum = 0;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA: field = &d.trans_a, size = sizeof d.trans_a; break;
    case CUBLASLT_MATMUL_DESC_TRANSB: field = &d.trans_b, size = sizeof d.trans_b; break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE: field = &d.epilogue, size = sizeof d.epilogue; break;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: field = &d.bias, size = sizeof d.bias; break;
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: field = &d.bias_type, size = sizeof d.bias_type; break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: field = &d.aux, size = sizeof d.aux; break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: field = &d.aux_ld, size = sizeof d.aux_ld; break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE: field = &d.aux_type, size = sizeof d.aux_type; break;
    case CUBLASLT_MATMUL_DESC_A_SCALE_POINTER: field = &d.scales[0]; break;
    case CUBLASLT_MATMUL_DESC_B_SCALE_POINTER: field = &d.scales[1]; break;
    case CUBLASLT_MATMUL_DESC_C_SCALE_POINTER: field = &d.scales[2]; break;
    case CUBLASLT_MATMUL_DESC_D_SCALE_POINTER: field = &d.scales[3]; break;
    case CUBLASLT_MATMUL_DESC_AMAX_D_POINTER: field = &d.amax_d; break;
    case CUBLASLT_MATMUL_DESC_FAST_ACCUM: field = &fast_accum, size = sizeof fast_accum; break;
    default:
      return fail(CUBLAS_STATUS_NOT_SUPPORTED,
                  "cublasLtMatmulDescSetAttribute: attribute " + std::to_string(int(attr)) + " is not emulated");
  }
  return set_attribute("cublasLtMatmulDescSetAttribute", int(attr), field, size, buf, bytes);
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  if (!layout) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatrixLayoutCreate: null layout pointer");
  *layout = reinterpret_cast<cublasLtMatrixLayout_t>(track(new LtLayout{type, rows, cols, ld}));
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) { return release(layout_of(layout)); }

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  if (!pref) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulPreferenceCreate: null pointer");
  *pref = reinterpret_cast<cublasLtMatmulPreference_t>(track(new LtPreference{}));
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) { return release(pref_of(pref)); }

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t bytes) {
  if (!alive(pref)) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulPreferenceSetAttribute: no such preference");
  LtPreference& p = *pref_of(pref);
  void* field = nullptr;
  size_t size = sizeof(uint32_t);
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: field = &p.max_workspace, size = sizeof p.max_workspace; break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: field = &p.align[0]; break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: field = &p.align[1]; break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: field = &p.align[2]; break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: field = &p.align[3]; break;
    default:
      return fail(CUBLAS_STATUS_NOT_SUPPORTED,
                  "cublasLtMatmulPreferenceSetAttribute: attribute " + std::to_string(int(attr)) + " is not emulated");
  }
  return set_attribute("cublasLtMatmulPreferenceSetAttribute", int(attr), field, size, buf, bytes);
}

// Up to `requested` of kAlgoVariants, in order, leaving out those that need more workspace than the
// preference allows; each records what the query promised about the operands.
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t op,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int* returned) {
  const char* call = "cublasLtMatmulAlgoGetHeuristic";
  if (!alive(handle)) return fail(CUBLAS_STATUS_NOT_INITIALIZED, std::string(call) + ": no such handle");
  if (!alive(pref) || requested < 1 || results == nullptr || returned == nullptr)
    return fail(CUBLAS_STATUS_INVALID_VALUE, std::string(call) + ": a null or destroyed argument, or no room for results");
  LtShape shape;
  if (cublasStatus_t s = check_lt(call, op, a, b, c, d, shape)) return s;
  const LtDesc& o = *desc_of(op);
  const LtPreference& p = *pref_of(pref);
  const LtLayout &la = *layout_of(a), &lb = *layout_of(b), &lc = *layout_of(c), &ld = *layout_of(d);
  // FP8 (cublasLtMatmul's documentation): A and B 16-byte aligned, which a preference promising less
  // cannot ensure.
  if (is_fp8(la.type) && std::min(p.align[0], p.align[1]) < 16)
    return fail(CUBLAS_STATUS_NOT_SUPPORTED, std::string(call) + ": FP8 matmul: A and B must be 16-byte aligned, " +
                                                 "the preference promises " + std::to_string(p.align[0]) + " and " +
                                                 std::to_string(p.align[1]) + " bytes");
  LtAlgo algo{kAlgoMagic,
              o.epilogue,
              o.trans_a,
              o.trans_b,
              {uint8_t(la.type), uint8_t(lb.type), uint8_t(lc.type), uint8_t(ld.type)},
              {p.align[0], p.align[1], p.align[2], p.align[3]},
              16,
              0,
              0};
  for (const void* v : {static_cast<const void*>(o.bias), static_cast<const void*>(o.aux)})
    if (v) algo.vector_align = std::min(algo.vector_align, alignment_of(v));
  int found = 0;
  for (uint32_t i = 0; i < std::size(kAlgoVariants) && found < requested; ++i) {
    algo.variant = i;
    algo.workspace = variant_workspace(kAlgoVariants[i], shape.m, shape.n);
    if (algo.workspace > p.max_workspace) continue;
    cublasLtMatmulHeuristicResult_t& r = results[found++];
    r = cublasLtMatmulHeuristicResult_t{};
    std::memcpy(&r.algo, &algo, sizeof algo);
    r.workspaceSize = algo.workspace;
    r.state = CUBLAS_STATUS_SUCCESS;
    r.wavesCount = 1.0f;
  }
  *returned = found;
  // The documented answer when no algorithm fits the preference.
  return found == 0 ? CUBLAS_STATUS_NOT_SUPPORTED : CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t op, const void* alpha, const void* a,
                              cublasLtMatrixLayout_t adesc, const void* b, cublasLtMatrixLayout_t bdesc,
                              const void* beta, const void* c, cublasLtMatrixLayout_t cdesc, void* d,
                              cublasLtMatrixLayout_t ddesc, const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspace_bytes, cudaStream_t stream) {
  const char* call = "cublasLtMatmul";
  if (!alive(handle)) return fail(CUBLAS_STATUS_NOT_INITIALIZED, std::string(call) + ": no such handle");
  if (alpha == nullptr || beta == nullptr || a == nullptr || b == nullptr || d == nullptr)
    return fail(CUBLAS_STATUS_INVALID_VALUE, std::string(call) + ": null alpha, beta, A, B or D");
  LtShape shape;
  if (cublasStatus_t s = check_lt(call, op, adesc, bdesc, cdesc, ddesc, shape)) return s;
  const LtDesc& o = *desc_of(op);
  const LtLayout &la = *layout_of(adesc), &lb = *layout_of(bdesc), &lc = *layout_of(cdesc), &ld = *layout_of(ddesc);
  const bool fp8 = is_fp8(la.type);
  if (cublasStatus_t s = check_scales(call, o, fp8, ld.type)) return s;
  const float alpha_value = *static_cast<const float*>(alpha), beta_value = *static_cast<const float*>(beta);
  if (beta_value != 0.0f && c == nullptr) return fail(CUBLAS_STATUS_INVALID_VALUE, std::string(call) + ": beta != 0, C null");
  // The algorithm must come from a query for this kind of GEMM, and the operands must be as aligned
  // as that query said they would be: an algorithm may rely on every byte of alignment promised.
  if (algo != nullptr) {
    LtAlgo chosen;
    std::memcpy(&chosen, algo, sizeof chosen);
    const uint8_t types[4] = {uint8_t(la.type), uint8_t(lb.type), uint8_t(lc.type), uint8_t(ld.type)};
    if (chosen.magic != kAlgoMagic || chosen.epilogue != o.epilogue || chosen.trans_a != o.trans_a ||
        chosen.trans_b != o.trans_b || std::memcmp(chosen.types, types, sizeof types) != 0 ||
        chosen.variant >= std::size(kAlgoVariants))
      return fail(CUBLAS_STATUS_INVALID_VALUE,
                  std::string(call) + ": the algorithm was chosen for another epilogue, transpose or type");
    // Documented: INVALID_VALUE "when workspaceSizeInBytes is less than workspace required by the
    // configured algo".
    if (workspace_bytes < chosen.workspace)
      return fail(CUBLAS_STATUS_INVALID_VALUE, std::string(call) + ": the algorithm needs " +
                                                   std::to_string(chosen.workspace) + " bytes of workspace, got " +
                                                   std::to_string(workspace_bytes));
    const struct {
      const char* name;
      const void* p;
      uint32_t promised;
    } operands[] = {{"A", a, chosen.align[0]}, {"B", b, chosen.align[1]}, {"C", c ? c : d, chosen.align[2]},
                    {"D", d, chosen.align[3]}, {"the bias", o.bias, chosen.vector_align},
                    {"the GELU aux", o.aux, chosen.vector_align}};
    for (const auto& x : operands)
      if (x.p && alignment_of(x.p) < x.promised)
        return fail(CUBLAS_STATUS_INVALID_VALUE, std::string(call) + ": " + x.name + " is " +
                                                     std::to_string(alignment_of(x.p)) +
                                                     "-byte aligned, but the algorithm was chosen for " +
                                                     std::to_string(x.promised) + "-byte alignment");
  }
  if (workspace_bytes > 0 && !inside_device_allocation(workspace, workspace_bytes))
    return fail(CUBLAS_STATUS_INVALID_VALUE, std::string(call) + ": the workspace is not device memory of that size");
  if (!valid_stream(stream)) return fail(CUBLAS_STATUS_INVALID_VALUE, std::string(call) + ": no such stream");
  if (context_error() != cudaSuccess) return CUBLAS_STATUS_EXECUTION_FAILED;
  bool ok = check_device(call, "A", a, matrix_bytes(la.rows, la.cols, la.ld, la.type)) &&
            check_device(call, "B", b, matrix_bytes(lb.rows, lb.cols, lb.ld, lb.type)) &&
            check_device(call, "D", d, matrix_bytes(ld.rows, ld.cols, ld.ld, ld.type)) &&
            (beta_value == 0.0f || check_device(call, "C", c, matrix_bytes(lc.rows, lc.cols, lc.ld, lc.type)));
  const char* scale_names[] = {"the A scale", "the B scale", "the C scale", "the D scale"};
  for (int i = 0; i < 4; ++i)
    if (ok && o.scales[i]) ok = check_device(call, scale_names[i], o.scales[i], sizeof(float));
  if (ok && o.amax_d) ok = check_device(call, "amax_D", o.amax_d, sizeof(float));
  const EpilogueKind kind = shape.kind;
  const size_t bias_count = kind == EpilogueKind::bgradb ? shape.n : shape.m;
  if (ok && uses_bias(kind)) ok = check_device(call, "the bias vector", o.bias, bias_count * type_bytes(lc.type));
  if (ok && uses_aux(kind))
    ok = check_device(call, "the GELU aux matrix", o.aux,
                      matrix_bytes(shape.m, shape.n, o.aux_ld, aux_type_of(o, ld.type)));
  if (!ok) return CUBLAS_STATUS_EXECUTION_FAILED;
  // Queued with copies of the descriptors, which the caller may change or destroy once this returns.
  // A refused capture (stream_capture.h) has set its CUDA error: the call failed.
  const cudaError_t issued = device_work(stream, [=, o = o, la = la, lb = lb, lc = lc, ld = ld] {
    with_device_memory({a, b, c, d, o.bias, o.aux, o.scales[0], o.scales[1], o.scales[2], o.scales[3], o.amax_d},
                       [&] { run_lt(o, shape, alpha_value, a, la, b, lb, beta_value, c, lc, d, ld); });
  });
  return issued == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  if (!handle) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasCreate: null handle pointer");
  *handle = track(new cublasContext{nullptr, nullptr});
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) { return release(handle); }

cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void* workspace, size_t bytes) {
  if (!alive(handle)) return fail(CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetWorkspace: no such handle");
  if (bytes > 0 && !inside_device_allocation(workspace, bytes))
    return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasSetWorkspace: the workspace is not device memory of that size");
  handle->workspace = bytes > 0 ? workspace : nullptr;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  if (!alive(handle)) return fail(CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetStream: no such handle");
  if (!valid_stream(stream)) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasSetStream: no such stream");
  handle->stream = stream;
  handle->workspace = nullptr;  // documented: the workspace goes back to the default pool
  return CUBLAS_STATUS_SUCCESS;
}

// C_i = alpha op(A_i) op(B_i) + beta C_i for i < batch, X_i = X + i * stride_X; host alpha and beta.
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                          int m, int n, int k, const void* alpha, const void* a, cudaDataType a_type,
                                          int lda, long long stride_a, const void* b, cudaDataType b_type, int ldb,
                                          long long stride_b, const void* beta, void* c, cudaDataType c_type, int ldc,
                                          long long stride_c, int batch, cublasComputeType_t compute,
                                          cublasGemmAlgo_t algo) {
  const char* call = "cublasGemmStridedBatchedEx";
  if (!alive(handle)) return fail(CUBLAS_STATUS_NOT_INITIALIZED, std::string(call) + ": no such handle");
  const bool ta = transa == CUBLAS_OP_T, tb = transb == CUBLAS_OP_T;
  if ((transa != CUBLAS_OP_N && !ta) || (transb != CUBLAS_OP_N && !tb))
    return fail(CUBLAS_STATUS_NOT_SUPPORTED, std::string(call) + ": only CUBLAS_OP_N and CUBLAS_OP_T are emulated");
  // Documented: INVALID_VALUE for negative sizes or leading dimensions smaller than the stored rows.
  const int a_rows = ta ? k : m, b_rows = tb ? n : k;
  if (m < 0 || n < 0 || k < 0 || batch < 0 || lda < std::max(1, a_rows) || ldb < std::max(1, b_rows) ||
      ldc < std::max(1, m))
    return fail(CUBLAS_STATUS_INVALID_VALUE,
                std::string(call) + ": m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                    " batch=" + std::to_string(batch) + " lda=" + std::to_string(lda) + " ldb=" + std::to_string(ldb) +
                    " ldc=" + std::to_string(ldc));
  if (compute != CUBLAS_COMPUTE_32F || !supported_type(a_type) || a_type != b_type || a_type != c_type)
    return fail(CUBLAS_STATUS_NOT_SUPPORTED,
                std::string(call) + ": only CUBLAS_COMPUTE_32F with A, B and C all fp32 or all bf16 is emulated");
  if (algo != CUBLAS_GEMM_DEFAULT && algo != CUBLAS_GEMM_DEFAULT_TENSOR_OP)
    return fail(CUBLAS_STATUS_NOT_SUPPORTED, std::string(call) + ": only the default algorithm is emulated");
  if (!alpha || !beta) return fail(CUBLAS_STATUS_INVALID_VALUE, std::string(call) + ": null alpha or beta");
  if (!valid_stream(handle->stream))
    return fail(CUBLAS_STATUS_INVALID_VALUE, std::string(call) + ": the handle's stream was destroyed");
  if (!handle->workspace)
    return fail(CUBLAS_STATUS_NOT_SUPPORTED,
                std::string(call) + ": no workspace of the caller's (none set, or cublasSetStream reset it to " +
                    "cuBLAS's own pool, memory outside the caller's plan that the emulator does not have)");
  if (context_error() != cudaSuccess) return CUBLAS_STATUS_EXECUTION_FAILED;
  if (m == 0 || n == 0 || batch == 0) return CUBLAS_STATUS_SUCCESS;
  const float alpha_value = *static_cast<const float*>(alpha), beta_value = *static_cast<const float*>(beta);
  const size_t e = type_bytes(a_type);
  const char* names[] = {"A", "B", "C"};
  const void* bases[] = {a, b, c};
  const long long strides[] = {stride_a, stride_b, stride_c};
  const size_t spans[] = {matrix_bytes(a_rows, ta ? m : k, lda, a_type), matrix_bytes(b_rows, tb ? k : n, ldb, a_type),
                          matrix_bytes(m, n, ldc, a_type)};
  for (int x = 0; x < 3; ++x)
    for (int i = 0; i < batch; ++i)
      if (!(x < 2 && k == 0) &&
          !check_device(call, (std::string(names[x]) + " of batch entry " + std::to_string(i)).c_str(),
                        static_cast<const char*>(bases[x]) + i * strides[x] * e, spans[x]))
        return CUBLAS_STATUS_EXECUTION_FAILED;
  const ElementType type = element_type(a_type);
  const cudaError_t issued = device_work(handle->stream, [=] { with_device_memory({a, b, c}, [&] {
    std::vector<float> acc;
    for (int i = 0; i < batch; ++i) {
      const GemmOperand ga{static_cast<const char*>(a) + i * stride_a * e, type, lda, ta};
      const GemmOperand gb{static_cast<const char*>(b) + i * stride_b * e, type, ldb, tb};
      void* ci = static_cast<char*>(c) + i * stride_c * e;
      gemm_fp32(acc, ga, gb, m, n, k);
      for (int j = 0; j < n; ++j)
        for (int r = 0; r < m; ++r) {
          const size_t at = size_t(r) + size_t(j) * ldc;
          float x = alpha_value * acc[size_t(r) + size_t(j) * m];
          if (beta_value != 0.0f) x += beta_value * load(ci, c_type, at);
          store(ci, c_type, at, x);
        }
    }
  }); });
  return issued == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

}  // extern "C"
