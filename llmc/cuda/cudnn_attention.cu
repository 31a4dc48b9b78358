// Causal flash attention through cuDNN 9's graph backend API (cudnnBackend* calls, no frontend).
//
// cuDNN 9.19 has a single-node SDPA operation (CUDNN_BACKEND_OPERATION_SDPA_FWD/BWD_DESCRIPTOR),
// but it takes no mask in this version (the mask subgraph attributes arrive in 9.21), so a causal
// SDPA is expressed the way cuDNN's fused-attention engines recognise it: as the graph of matmul,
// pointwise, reduction and reshape nodes below, which the engine heuristics lower to one fused
// flash-attention kernel. The node order and tensor types follow the published SDPA pattern
// (docs/kernels-matmul-attention.md has the full graph and the reasoning).
#include "llmc/cuda/cudnn_attention.h"

#include <cudnn.h>

#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "llmc/cuda/kernel_scratch.h"

namespace llmc {
namespace {

void cudnn_check(cudnnStatus_t status, const char* what) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  char detail[512] = {0};
  cudnnGetLastErrorString(detail, sizeof(detail));
  throw std::runtime_error(std::string("cuDNN attention: ") + what + ": " + cudnnGetErrorString(status) +
                           (detail[0] ? std::string(" (") + detail + ")" : std::string()));
}

using Dims = std::array<int64_t, 4>;
using Desc = cudnnBackendDescriptor_t;

// Unique ids of the tensors the caller binds at execution; virtual tensors get ids from 100 up.
enum Uid : int64_t {
  kQ = 1, kK, kV, kO, kStats, kScale, kNegInf, kOne, kDO, kDQ, kDK, kDV, kDQAccum, kSoftmaxSum,
};

Dims packed_strides(const Dims& d) { return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1}; }

// One operation graph under construction: owns every descriptor it creates (they must outlive
// the execution plan built from them) and hands out the node-building helpers.
class GraphBuilder {
 public:
  explicit GraphBuilder(cudnnHandle_t handle) : handle_(handle) {}
  ~GraphBuilder() {
    for (auto it = owned_.rbegin(); it != owned_.rend(); ++it) cudnnBackendDestroyDescriptor(*it);
  }
  GraphBuilder(const GraphBuilder&) = delete;
  GraphBuilder& operator=(const GraphBuilder&) = delete;

  Desc make(cudnnBackendDescriptorType_t type) {
    Desc d = nullptr;
    cudnn_check(cudnnBackendCreateDescriptor(type, &d), "create descriptor");
    owned_.push_back(d);
    return d;
  }
  static void set(Desc d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
                  const void* value) {
    cudnn_check(cudnnBackendSetAttribute(d, name, type, count, value), "set attribute");
  }
  static void finalize(Desc d, const char* what) { cudnn_check(cudnnBackendFinalize(d), what); }

  Desc tensor(int64_t uid, cudnnDataType_t type, const Dims& dims, const Dims& strides, bool is_virtual,
              bool by_value = false) {
    Desc t = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const int64_t alignment = 16;
    set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
    set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data());
    set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data());
    set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
    set(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
    if (by_value) set(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value);
    finalize(t, "tensor descriptor");
    return t;
  }
  Desc virtual_tensor(cudnnDataType_t type, const Dims& dims) { return virtual_view(type, dims, packed_strides(dims)); }
  Desc virtual_view(cudnnDataType_t type, const Dims& dims, const Dims& strides) {
    return tensor(next_virtual_uid_++, type, dims, strides, true);
  }
  // A float scalar whose value is passed from host memory at execution.
  Desc scalar(int64_t uid) { return tensor(uid, CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true); }

  // y = mode(x, b, t); b and t may be null. axis is GEN_INDEX's dimension.
  void pointwise(cudnnPointwiseMode_t mode, Desc x, Desc b, Desc t, Desc y,
                 cudnnDataType_t compute = CUDNN_DATA_FLOAT, int64_t axis = -1) {
    Desc pw = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &compute);
    if (axis >= 0) set(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
    finalize(pw, "pointwise descriptor");
    Desc op = make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    set(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw);
    set(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    if (b) set(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
    if (t) set(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t);
    set(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    finalize(op, "pointwise operation");
    ops_.push_back(op);
  }
  // A new virtual float tensor of x's shape holding mode(x, b).
  Desc pointwise_new(cudnnPointwiseMode_t mode, Desc x, Desc b, const Dims& dims) {
    Desc y = virtual_tensor(CUDNN_DATA_FLOAT, dims);
    pointwise(mode, x, b, nullptr, y);
    return y;
  }

  // c = a b over the last two dimensions, batched over the first two, fp32 accumulation.
  void matmul(Desc a, Desc b, Desc c) {
    const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    Desc mm = make(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    set(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
    finalize(mm, "matmul descriptor");
    Desc op = make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    set(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a);
    set(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
    set(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c);
    set(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mm);
    finalize(op, "matmul operation");
    ops_.push_back(op);
  }

  // y = reduce(x) over the dimensions where y has extent 1.
  void reduction(cudnnReduceTensorOp_t mode, Desc x, Desc y) {
    const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    Desc rd = make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    set(rd, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode);
    set(rd, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
    finalize(rd, "reduction descriptor");
    Desc op = make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    set(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &rd);
    set(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    set(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    finalize(op, "reduction operation");
    ops_.push_back(op);
  }

  // y = x seen through y's dimensions and strides (used for transposes).
  void reshape(Desc x, Desc y) {
    Desc op = make(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    set(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    set(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    finalize(op, "reshape operation");
    ops_.push_back(op);
  }

  // Scores at (row, col) with col > row replaced by the -inf scalar (kNegInf): the causal mask as
  // index generation, a comparison and a select.
  Desc causal_mask(Desc scores, const Dims& dims, Desc neg_inf) {
    Desc row = virtual_tensor(CUDNN_DATA_INT32, dims);
    Desc col = virtual_tensor(CUDNN_DATA_INT32, dims);
    Desc keep = virtual_tensor(CUDNN_DATA_BOOLEAN, dims);
    Desc masked = virtual_tensor(CUDNN_DATA_FLOAT, dims);
    pointwise(CUDNN_POINTWISE_GEN_INDEX, scores, nullptr, nullptr, row, CUDNN_DATA_INT32, 2);
    pointwise(CUDNN_POINTWISE_GEN_INDEX, scores, nullptr, nullptr, col, CUDNN_DATA_INT32, 3);
    pointwise(CUDNN_POINTWISE_CMP_GE, row, col, nullptr, keep, CUDNN_DATA_BOOLEAN);
    pointwise(CUDNN_POINTWISE_BINARY_SELECT, scores, neg_inf, keep, masked);
    return masked;
  }

  // Finalizes the operation graph and the first execution plan the heuristics offer that this
  // device accepts; returns the plan (owned by this builder).
  Desc build_plan(const std::string& what) {
    Desc graph = make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle_);
    set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, int64_t(ops_.size()), ops_.data());
    finalize(graph, (what + ": operation graph").c_str());
    for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
      Desc heur = make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
      set(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
      set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
      if (cudnnBackendFinalize(heur) != CUDNN_STATUS_SUCCESS) continue;
      int64_t count = 0;
      cudnn_check(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                           &count, nullptr),
                  "engine heuristics count");
      std::vector<Desc> configs;
      for (int64_t i = 0; i < count; ++i) configs.push_back(make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
      int64_t got = 0;
      if (count > 0)
        cudnn_check(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                             &got, configs.data()),
                    "engine heuristics results");
      for (int64_t i = 0; i < got; ++i) {
        Desc plan = make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
        set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle_);
        set(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &configs[i]);
        if (cudnnBackendFinalize(plan) == CUDNN_STATUS_SUCCESS) return plan;
      }
    }
    char detail[512] = {0};
    cudnnGetLastErrorString(detail, sizeof(detail));
    throw std::runtime_error("cuDNN attention: no engine supports the " + what + " graph on this device" +
                             (detail[0] ? std::string(" (") + detail + ")" : std::string()));
  }

 private:
  cudnnHandle_t handle_;
  std::vector<Desc> owned_;
  std::vector<Desc> ops_;
  int64_t next_virtual_uid_ = 100;
};

enum class Kind { kForward, kBackward };

// The value the causal mask writes above the diagonal: -inf from cuDNN 9.10 on, the lowest finite
// float before (older engines expect it; cudnn-frontend makes the same choice by version).
float masked_score() {
  return cudnnGetVersion() < 91000 ? std::numeric_limits<float>::lowest() : -std::numeric_limits<float>::infinity();
}

// A finalized plan with everything it references, and the host scalars it reads by value.
struct Plan {
  explicit Plan(cudnnHandle_t handle) : graph(handle) {}
  GraphBuilder graph;
  Desc plan = nullptr;
  size_t plan_workspace = 0;  // bytes the engine needs
  size_t extra_offset = 0;    // where dQ accumulation and softmax_sum start (backward only)
  size_t total_workspace = 0;
  float scale = 0.0f;
  float neg_inf = masked_score();
  float one = 1.0f;
};

// Views into the qkv (B, T, 3C) buffer as (B, NH, T, HS) with head stride HS and token stride 3C;
// the transposed view (B, NH, HS, T) serves as K^T / V^T. dqkv uses the same views.
struct Layout {
  int64_t B, T, NH, HS, C;
  Dims heads() const { return {B, NH, T, HS}; }
  Dims heads_t() const { return {B, NH, HS, T}; }
  Dims qkv_strides() const { return {T * 3 * C, HS, 3 * C, 1}; }
  Dims qkv_strides_t() const { return {T * 3 * C, HS, 1, 3 * C}; }
  Dims out_strides() const { return {T * C, HS, C, 1}; }
  Dims scores() const { return {B, NH, T, T}; }
  Dims row_stats() const { return {B, NH, T, 1}; }
};

void build_forward(Plan& p, const Layout& L) {
  GraphBuilder& g = p.graph;
  Desc q = g.tensor(kQ, CUDNN_DATA_BFLOAT16, L.heads(), L.qkv_strides(), false);
  Desc kt = g.tensor(kK, CUDNN_DATA_BFLOAT16, L.heads_t(), L.qkv_strides_t(), false);
  Desc v = g.tensor(kV, CUDNN_DATA_BFLOAT16, L.heads(), L.qkv_strides(), false);
  Desc o = g.tensor(kO, CUDNN_DATA_BFLOAT16, L.heads(), L.out_strides(), false);
  Desc scale = g.scalar(kScale);
  Desc neg_inf = g.scalar(kNegInf);

  Desc s = g.virtual_tensor(CUDNN_DATA_FLOAT, L.scores());
  g.matmul(q, kt, s);
  Desc scaled = g.pointwise_new(CUDNN_POINTWISE_MUL, s, scale, L.scores());
  Desc masked = g.causal_mask(scaled, L.scores(), neg_inf);
  // Softmax with the row statistics cuDNN's flash kernels expect: max, exp(x - max), sum, and
  // stats = max + log(sum), the log-sum-exp the backward recomputes P from.
  Desc row_max = g.virtual_tensor(CUDNN_DATA_FLOAT, L.row_stats());
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, masked, row_max);
  Desc shifted = g.pointwise_new(CUDNN_POINTWISE_SUB, masked, row_max, L.scores());
  Desc e = g.pointwise_new(CUDNN_POINTWISE_EXP, shifted, nullptr, L.scores());
  Desc row_sum = g.virtual_tensor(CUDNN_DATA_FLOAT, L.row_stats());
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, e, row_sum);
  Desc log_sum = g.pointwise_new(CUDNN_POINTWISE_LOG, row_sum, nullptr, L.row_stats());
  Desc stats = g.tensor(kStats, CUDNN_DATA_FLOAT, L.row_stats(), packed_strides(L.row_stats()), false);
  g.pointwise(CUDNN_POINTWISE_ADD, row_max, log_sum, nullptr, stats);
  // The second matmul's A operand must have the I/O type (bf16), as cudnn-frontend declares it:
  // the fused engines match P V only with a bf16 P.
  Desc probs = g.virtual_tensor(CUDNN_DATA_BFLOAT16, L.scores());
  g.pointwise(CUDNN_POINTWISE_DIV, e, row_sum, nullptr, probs);
  g.matmul(probs, v, o);
  p.plan = g.build_plan("attention forward (training)");
}

// The backward graph. The default computes dQ = dS K into an fp32 accumulator in the workspace,
// which the fused kernel adds every key block's contribution to as the blocks finish: fast, but the
// order of the additions, and so the last bits of dQ, change from run to run. The deterministic
// graph (LLMC_CUDNN_BACKWARD=deterministic) writes dQ = dS K straight into dqkv, with no
// accumulator: cuDNN then keeps dS in its own workspace (B*NH*T*T bf16, T rounded up to 64) and
// computes dQ as a separate product, in a fixed order. This is the graph cudnn-frontend builds for
// set_deterministic_algorithm(true) on Hopper (1.23, node/scaled_dot_product_flash_attention.h:
// use_dp_workspace, which leaves out its dQ_accum tensor).
void build_backward(Plan& p, const Layout& L, CudnnBackward mode) {
  GraphBuilder& g = p.graph;
  // (B, NH, T, T) scores seen transposed in the last two dimensions.
  const Dims scores = L.scores(), scores_t_strides = {L.NH * L.T * L.T, L.T * L.T, 1, L.T};
  Desc q = g.tensor(kQ, CUDNN_DATA_BFLOAT16, L.heads(), L.qkv_strides(), false);
  Desc kt = g.tensor(kK, CUDNN_DATA_BFLOAT16, L.heads_t(), L.qkv_strides_t(), false);
  Desc vt = g.tensor(kV, CUDNN_DATA_BFLOAT16, L.heads_t(), L.qkv_strides_t(), false);
  Desc o = g.tensor(kO, CUDNN_DATA_BFLOAT16, L.heads(), L.out_strides(), false);
  Desc dout = g.tensor(kDO, CUDNN_DATA_BFLOAT16, L.heads(), L.out_strides(), false);
  Desc stats = g.tensor(kStats, CUDNN_DATA_FLOAT, L.row_stats(), packed_strides(L.row_stats()), false);
  Desc dq = g.tensor(kDQ, CUDNN_DATA_BFLOAT16, L.heads(), L.qkv_strides(), false);
  Desc dk = g.tensor(kDK, CUDNN_DATA_BFLOAT16, L.heads(), L.qkv_strides(), false);
  Desc dv = g.tensor(kDV, CUDNN_DATA_BFLOAT16, L.heads(), L.qkv_strides(), false);
  Desc scale = g.scalar(kScale);
  Desc neg_inf = g.scalar(kNegInf);
  Desc one = g.scalar(kOne);

  // softmax_sum[row] = sum_d dO * O = sum_j P dP (the softmax backward's row dot product), kept in
  // fp32 workspace memory so the fused kernel can read it per tile.
  Desc do_o = g.pointwise_new(CUDNN_POINTWISE_MUL, dout, o, L.heads());
  Desc do_o_sum = g.virtual_tensor(CUDNN_DATA_FLOAT, L.row_stats());
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, do_o, do_o_sum);
  Desc softmax_sum = g.tensor(kSoftmaxSum, CUDNN_DATA_FLOAT, L.row_stats(), packed_strides(L.row_stats()), false);
  g.pointwise(CUDNN_POINTWISE_MUL, do_o_sum, one, nullptr, softmax_sum);

  // P recomputed from the saved log-sum-exp: exp(mask(scale * Q K^T - stats)).
  Desc s = g.virtual_tensor(CUDNN_DATA_FLOAT, scores);
  g.matmul(q, kt, s);
  Desc scaled = g.pointwise_new(CUDNN_POINTWISE_MUL, s, scale, scores);
  Desc centred = g.pointwise_new(CUDNN_POINTWISE_SUB, scaled, stats, scores);
  Desc masked = g.causal_mask(centred, scores, neg_inf);
  Desc probs = g.pointwise_new(CUDNN_POINTWISE_EXP, masked, nullptr, scores);

  // dV = P^T dO, with P^T a bf16 transposed view.
  Desc probs_t = g.virtual_view(CUDNN_DATA_BFLOAT16, scores, scores_t_strides);
  g.reshape(probs, probs_t);
  g.matmul(probs_t, dout, dv);

  // dS = scale * P (dP - softmax_sum), dP = dO V^T.
  Desc dp = g.virtual_tensor(CUDNN_DATA_FLOAT, scores);
  g.matmul(dout, vt, dp);
  Desc dp_centred = g.pointwise_new(CUDNN_POINTWISE_SUB, dp, softmax_sum, scores);
  Desc dp_p = g.pointwise_new(CUDNN_POINTWISE_MUL, dp_centred, probs, scores);
  Desc ds = g.pointwise_new(CUDNN_POINTWISE_MUL, dp_p, scale, scores);

  // dK = dS^T Q.
  Desc ds_t = g.virtual_view(CUDNN_DATA_BFLOAT16, scores, scores_t_strides);
  g.reshape(ds, ds_t);
  g.matmul(ds_t, q, dk);

  // dQ = dS K: accumulated in fp32 workspace, then converted into dqkv; or (deterministic) into dqkv.
  Desc k = g.virtual_view(CUDNN_DATA_BFLOAT16, L.heads(), L.qkv_strides());
  g.reshape(kt, k);
  if (mode == CudnnBackward::kDeterministic) {
    g.matmul(ds, k, dq);
  } else {
    Desc dq_accum = g.tensor(kDQAccum, CUDNN_DATA_FLOAT, L.heads(), packed_strides(L.heads()), false);
    g.matmul(ds, k, dq_accum);
    g.pointwise(CUDNN_POINTWISE_IDENTITY, dq_accum, nullptr, nullptr, dq);
  }
  p.plan = g.build_plan("attention backward");
}

// Whether the default backward graph's fp32 dQ accumulator must be cleared before each backward.
// cuDNN before 9.6.0 expects the caller to clear it; from 9.6.0 the engine clears it itself. Source:
// cudnn-frontend 1.23, include/cudnn_frontend/node/scaled_dot_product_flash_attention.h,
// collect_tensors_in_workspace_node: the frontend memsets dQ_accum only when
// get_backend_version() < 90600 ("prior to cuDNN 9.6.0, dQ_accum needed to be memset by frontend").
constexpr size_t kCudnnClearsDqAccumulator = 90600;
bool dq_accumulator_needs_clearing() { return cudnnGetVersion() < kCudnnClearsDqAccumulator; }

}  // namespace

struct CudnnAttention::Impl {
  CudnnBackward backward_mode = CudnnBackward::kDefault;
  bool clear_dq_accumulator = true;  // before every backward of the default graph
  cudnnHandle_t handle = nullptr;
  std::map<std::tuple<int, int, int, int, Kind>, std::unique_ptr<Plan>> plans;

  Plan& get(int B, int T, int NH, int HS, Kind kind) {
    const auto key = std::make_tuple(B, T, NH, HS, kind);
    auto it = plans.find(key);
    if (it != plans.end()) return *it->second;
    if (B <= 0 || T <= 0 || NH <= 0 || HS <= 0 || HS % 8 != 0)
      throw std::runtime_error("cuDNN attention: bad shape B=" + std::to_string(B) + " T=" + std::to_string(T) +
                               " NH=" + std::to_string(NH) + " HS=" + std::to_string(HS) +
                               " (head size must be a positive multiple of 8)");
    auto plan = std::make_unique<Plan>(handle);
    plan->scale = 1.0f / std::sqrt(float(HS));
    const Layout L{B, T, NH, HS, int64_t(NH) * HS};
    try {
      if (kind == Kind::kBackward)
        build_backward(*plan, L, backward_mode);
      else
        build_forward(*plan, L);
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(std::string(e.what()) + " [B=" + std::to_string(B) + " T=" + std::to_string(T) +
                               " NH=" + std::to_string(NH) + " HS=" + std::to_string(HS) + "]");
    }
    int64_t ws = 0, count = 0;
    cudnn_check(cudnnBackendGetAttribute(plan->plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                         &count, &ws),
                "plan workspace size");
    plan->plan_workspace = size_t(ws);
    plan->extra_offset = cudnn_backward_extras_offset(plan->plan_workspace);
    plan->total_workspace = plan->plan_workspace;
    if (kind == Kind::kBackward)
      plan->total_workspace =
          cudnn_backward_workspace_bytes(plan->plan_workspace, size_t(B) * NH * T, size_t(HS), has_dq_accumulator());
    return *plans.emplace(key, std::move(plan)).first->second;
  }

  bool has_dq_accumulator() const { return backward_mode == CudnnBackward::kDefault; }

  static void check_workspace(const Plan& p, size_t workspace_bytes) {
    if (workspace_bytes < p.total_workspace)
      throw std::runtime_error("cuDNN attention: workspace of " + std::to_string(workspace_bytes) +
                               " bytes is smaller than the " + std::to_string(p.total_workspace) + " this shape needs");
  }

  // The caller has checked the workspace (check_workspace).
  void execute(Plan& p, std::vector<int64_t> uids, std::vector<void*> ptrs, void* workspace, cudaStream_t stream) {
    uids.insert(uids.end(), {kScale, kNegInf});
    ptrs.insert(ptrs.end(), {&p.scale, &p.neg_inf});
    cudnn_check(cudnnSetStream(handle, stream), "set stream");
    Desc pack = nullptr;
    cudnn_check(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack), "variant pack");
    try {
      GraphBuilder::set(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, int64_t(uids.size()), uids.data());
      GraphBuilder::set(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, int64_t(ptrs.size()),
                        ptrs.data());
      GraphBuilder::set(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
      GraphBuilder::finalize(pack, "variant pack");
      cudnn_check(cudnnBackendExecute(handle, p.plan, pack), "execute");
    } catch (...) {
      cudnnBackendDestroyDescriptor(pack);
      throw;
    }
    cudnnBackendDestroyDescriptor(pack);
  }
};

CudnnAttention::CudnnAttention(CudnnBackward backward) : impl_(std::make_unique<Impl>()) {
  impl_->backward_mode = backward;
  impl_->clear_dq_accumulator = dq_accumulator_needs_clearing();
  cudnn_check(cudnnCreate(&impl_->handle), "create handle");
}

CudnnAttention::~CudnnAttention() {
  impl_->plans.clear();
  cudnnDestroy(impl_->handle);
}

size_t CudnnAttention::forward_workspace_bytes(int B, int T, int NH, int HS) {
  return impl_->get(B, T, NH, HS, Kind::kForward).total_workspace;
}

size_t CudnnAttention::backward_workspace_bytes(int B, int T, int NH, int HS) {
  return impl_->get(B, T, NH, HS, Kind::kBackward).total_workspace;
}

void CudnnAttention::forward(__nv_bfloat16* out, float* stats, const __nv_bfloat16* qkv, int B, int T, int NH, int HS,
                             void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  Plan& p = impl_->get(B, T, NH, HS, Kind::kForward);
  Impl::check_workspace(p, workspace_bytes);
  const size_t C = size_t(NH) * HS;
  auto* base = const_cast<__nv_bfloat16*>(qkv);
  impl_->execute(p, {kQ, kK, kV, kO, kStats}, {base, base + C, base + 2 * C, out, stats}, workspace, stream);
}

void CudnnAttention::backward(__nv_bfloat16* dqkv, const __nv_bfloat16* dout, const __nv_bfloat16* qkv,
                              const __nv_bfloat16* out, const float* stats, int B, int T, int NH, int HS,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  Plan& p = impl_->get(B, T, NH, HS, Kind::kBackward);
  const size_t C = size_t(NH) * HS;
  auto* base = const_cast<__nv_bfloat16*>(qkv);
  char* extra = static_cast<char*>(workspace) + p.extra_offset;
  const size_t rows = size_t(B) * NH * T;
  Impl::check_workspace(p, workspace_bytes);  // before the memset below writes into it
  const bool dq_accumulator = impl_->has_dq_accumulator();
  void* dq_accum = extra;
  void* softmax_sum = extra + cudnn_softmax_sum_offset(rows, size_t(HS), dq_accumulator);
  // The engine adds every key block's dQ contribution into dq_accum, which must start at zero:
  // cuDNN before 9.6 relies on the caller for it (dq_accumulator_needs_clearing), one memset of
  // B*T*C floats.
  if (dq_accumulator && impl_->clear_dq_accumulator) {
    const cudaError_t cleared = cudaMemsetAsync(dq_accum, 0, rows * HS * sizeof(float), stream);
    if (cleared != cudaSuccess)
      throw std::runtime_error(std::string("cuDNN attention: clearing the dQ accumulator: ") +
                               cudaGetErrorString(cleared));
  }
  std::vector<int64_t> uids = {kQ, kK, kV, kO, kDO, kStats, kDQ, kDK, kDV, kSoftmaxSum, kOne};
  std::vector<void*> ptrs = {base,
                             base + C,
                             base + 2 * C,
                             const_cast<__nv_bfloat16*>(out),
                             const_cast<__nv_bfloat16*>(dout),
                             const_cast<float*>(stats),
                             dqkv,
                             dqkv + C,
                             dqkv + 2 * C,
                             softmax_sum,
                             &p.one};
  if (dq_accumulator) {
    uids.push_back(kDQAccum);
    ptrs.push_back(dq_accum);
  }
  impl_->execute(p, std::move(uids), std::move(ptrs), workspace, stream);
}

}  // namespace llmc
