// Stream capture and CUDA graphs on the emulated GPU (docs/cuda-emulator.md, "Graphs"): captured
// work is recorded, not run; a launch replays it with the values it was captured with; and what
// CUDA refuses while a stream captures fails with CUDA's error code and invalidates the capture.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cublasLt.h>

#include <cmath>
#include <thread>
#include <vector>

#include "emulator/tests/device_vectors.h"
#include "emulator/tests/lt_call.h"
#include "llmc/cuda/common.cuh"

using llmc::launch;

namespace {

constexpr int kN = 64;

__global__ void scale_kernel(float* out, const float* in, float scale) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = in[i] * scale;
}
__global__ void square_kernel(float* out, const float* in) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = in[i] * in[i];
}
__global__ void add_one_kernel(float* out, const float* in) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = in[i] + 1.0f;
}
__global__ void sum_kernel(float* out, const float* a, const float* b) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] += a[i] + b[i];
}
__global__ void set_kernel(float* p, float v) { p[0] = v; }
__global__ void copy_kernel(float* out, const float* in) { out[0] = in[0]; }

// Two non-blocking streams, their fork and join events, device buffers and pinned host buffers.
struct Rig {
  cudaStream_t main = nullptr, side = nullptr;
  cudaEvent_t fork = nullptr, join = nullptr;
  float *in = nullptr, *x = nullptr, *y = nullptr, *z = nullptr, *out = nullptr, *copy = nullptr;
  float *b = nullptr, *product = nullptr;
  float *host_in = nullptr, *host_out = nullptr;
  Rig() {
    REQUIRE(cudaStreamCreateWithFlags(&main, cudaStreamNonBlocking) == cudaSuccess);
    REQUIRE(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking) == cudaSuccess);
    REQUIRE(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming) == cudaSuccess);
    REQUIRE(cudaEventCreateWithFlags(&join, cudaEventDisableTiming) == cudaSuccess);
    for (float** p : {&in, &x, &y, &z, &out, &copy}) *p = device_array<float>(kN);
    b = upload(kB);
    product = device_array<float>(4);
    REQUIRE(cudaMallocHost(&host_in, kN * sizeof(float)) == cudaSuccess);
    REQUIRE(cudaMallocHost(&host_out, kN * sizeof(float)) == cudaSuccess);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);  // B's upload from pageable memory, before any stream reads it
  }
  ~Rig() {
    cudaDeviceSynchronize();
    for (float* p : {in, x, y, z, out, copy, b, product}) cudaFree(p);
    cudaFreeHost(host_in);
    cudaFreeHost(host_out);
    cudaEventDestroy(fork);
    cudaEventDestroy(join);
    cudaStreamDestroy(main);
    cudaStreamDestroy(side);
  }

  // One step: the input uploaded from pinned memory, a fork to the side stream and a join back,
  // copies between device buffers and back to pinned memory, a fill, a cuBLASLt matmul.
  void step(float scale) {
    REQUIRE(cudaMemcpyAsync(in, host_in, kN * sizeof(float), cudaMemcpyHostToDevice, main) == cudaSuccess);
    REQUIRE(cudaMemsetAsync(out, 0, kN * sizeof(float), main) == cudaSuccess);
    launch<scale_kernel>(kN / 32, 32, 0, main, x, in, scale);
    REQUIRE(cudaEventRecord(fork, main) == cudaSuccess);
    REQUIRE(cudaStreamWaitEvent(side, fork, 0) == cudaSuccess);
    launch<square_kernel>(kN / 32, 32, 0, side, y, x);
    launch<add_one_kernel>(kN / 32, 32, 0, main, z, x);
    REQUIRE(cudaEventRecord(join, side) == cudaSuccess);
    REQUIRE(cudaStreamWaitEvent(main, join, 0) == cudaSuccess);
    launch<sum_kernel>(kN / 32, 32, 0, main, out, y, z);
    REQUIRE(cudaMemcpyAsync(copy, out, kN * sizeof(float), cudaMemcpyDeviceToDevice, main) == cudaSuccess);
    REQUIRE(cudaMemcpyAsync(host_out, copy, kN * sizeof(float), cudaMemcpyDeviceToHost, main) == cudaSuccess);
    LtCall c = plain_2x3x2();  // A: the first 6 outputs, as a 2 x 3 matrix
    c.stream = main;
    REQUIRE(c.run(out, b, product) == CUBLAS_STATUS_SUCCESS);
    REQUIRE(cudaGetLastError() == cudaSuccess);
  }

  void set_input(float base) {
    for (int i = 0; i < kN; ++i) host_in[i] = base + float(i);
  }
  std::vector<float> results() {
    std::vector<float> r(host_out, host_out + kN);
    for (float v : download(product, 4)) r.push_back(v);
    return r;
  }
};

cudaGraphExec_t instantiate(cudaGraph_t graph) {
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  REQUIRE(cudaGraphDestroy(graph) == cudaSuccess);  // the executable graph keeps its own nodes
  return exec;
}

float read_back(const float* d) { return download(d, 1)[0]; }

// Ends the capture that `stream` began and requires it to have been invalidated.
void require_invalidated(cudaStream_t stream) {
  cudaStreamCaptureStatus status;
  REQUIRE(cudaStreamIsCapturing(stream, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusInvalidated);
  cudaGraph_t graph = reinterpret_cast<cudaGraph_t>(1);
  CHECK(cudaStreamEndCapture(stream, &graph) == cudaErrorStreamCaptureInvalidated);
  CHECK(graph == nullptr);
  REQUIRE(cudaStreamIsCapturing(stream, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusNone);
  cudaGetLastError();
}

}  // namespace

// Named "stream order: ..." so that tests/emu/check_emu.sh also runs it under every LLMC_EMU_STREAMS.
TEST_CASE("stream order: a captured graph, launched twice, gives what running the work directly gives") {
  Rig rig;
  std::vector<float> direct[2];
  for (int i = 0; i < 2; ++i) {
    rig.set_input(1.0f + 10.0f * float(i));
    rig.step(0.5f);
    REQUIRE(cudaStreamSynchronize(rig.main) == cudaSuccess);
    direct[i] = rig.results();
  }
  CHECK(direct[0][3] == (2.0f * 2.0f) + (2.0f + 1.0f));  // in 4, scaled 2: y 4, z 3
  CHECK(direct[0] != direct[1]);

  for (int i = 0; i < kN; ++i) rig.host_out[i] = -1.0f;
  REQUIRE(cudaStreamBeginCapture(rig.main, cudaStreamCaptureModeGlobal) == cudaSuccess);
  cudaStreamCaptureStatus status;
  REQUIRE(cudaStreamIsCapturing(rig.main, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusActive);
  rig.step(0.5f);
  REQUIRE(cudaStreamIsCapturing(rig.side, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusActive);  // forked into the capture
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(rig.main, &graph) == cudaSuccess);
  REQUIRE(graph != nullptr);
  REQUIRE(cudaStreamIsCapturing(rig.side, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusNone);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(rig.host_out[0] == -1.0f);  // recorded, not run
  const cudaGraphExec_t exec = instantiate(graph);

  for (int i = 0; i < 2; ++i) {
    rig.set_input(1.0f + 10.0f * float(i));  // the upload reads pinned memory when the graph runs
    REQUIRE(cudaMemsetAsync(rig.product, 0, 4 * sizeof(float), rig.main) == cudaSuccess);
    REQUIRE(cudaGraphLaunch(exec, rig.main) == cudaSuccess);
    REQUIRE(cudaStreamSynchronize(rig.main) == cudaSuccess);
    CHECK(rig.results() == direct[i]);
  }
  REQUIRE(cudaGraphExecDestroy(exec) == cudaSuccess);
  CHECK(cudaGraphExecDestroy(exec) == cudaErrorInvalidValue);
  cudaGetLastError();
}

TEST_CASE("a kernel's by-value arguments are baked at capture; what it reads from device memory is not") {
  cudaStream_t s;
  REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  float* by_value = device_array<float>(1);
  float* from_device = device_array<float>(1);
  float* source = device_array<float>(1);
  float value = 1.0f;
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
  launch<set_kernel>(1, 1, 0, s, by_value, value);
  launch<copy_kernel>(1, 1, 0, s, from_device, source);
  cudaGraph_t graph;
  REQUIRE(cudaStreamEndCapture(s, &graph) == cudaSuccess);
  const cudaGraphExec_t exec = instantiate(graph);
  value = 5.0f;
  const float five = 5.0f;
  REQUIRE(cudaMemcpyAsync(source, &five, sizeof five, cudaMemcpyHostToDevice, s) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(exec, s) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(read_back(by_value) == 1.0f);
  CHECK(read_back(from_device) == 5.0f);
  cudaGraphExecDestroy(exec);
  for (float* p : {by_value, from_device, source}) cudaFree(p);
  cudaStreamDestroy(s);
}

TEST_CASE("a host wait on a capturing stream or its events is refused and invalidates the capture") {
  Rig rig;
  float* p = device_array<float>(1);
  REQUIRE(cudaStreamBeginCapture(rig.main, cudaStreamCaptureModeGlobal) == cudaSuccess);
  launch<set_kernel>(1, 1, 0, rig.main, p, 2.0f);
  SUBCASE("cudaStreamSynchronize") {
    CHECK(cudaStreamSynchronize(rig.main) == cudaErrorStreamCaptureUnsupported);
    // Later work on the invalidated capture is refused too.
    CHECK(cudaMemsetAsync(p, 0, sizeof(float), rig.main) == cudaErrorStreamCaptureInvalidated);
  }
  SUBCASE("cudaStreamQuery") { CHECK(cudaStreamQuery(rig.main) == cudaErrorStreamCaptureUnsupported); }
  SUBCASE("cudaDeviceSynchronize") { CHECK(cudaDeviceSynchronize() == cudaErrorStreamCaptureUnsupported); }
  SUBCASE("cudaEventSynchronize on an event recorded in the capture") {
    REQUIRE(cudaEventRecord(rig.fork, rig.main) == cudaSuccess);
    CHECK(cudaEventSynchronize(rig.fork) == cudaErrorCapturedEvent);
  }
  SUBCASE("cudaEventQuery on an event recorded in the capture") {
    REQUIRE(cudaEventRecord(rig.fork, rig.main) == cudaSuccess);
    CHECK(cudaEventQuery(rig.fork) == cudaErrorCapturedEvent);
  }
  SUBCASE("a forked stream's synchronisation") {
    REQUIRE(cudaEventRecord(rig.fork, rig.main) == cudaSuccess);
    REQUIRE(cudaStreamWaitEvent(rig.side, rig.fork, 0) == cudaSuccess);
    CHECK(cudaStreamSynchronize(rig.side) == cudaErrorStreamCaptureUnsupported);
  }
  require_invalidated(rig.main);
  REQUIRE(cudaStreamSynchronize(rig.main) == cudaSuccess);  // usable again, and nothing ran
  CHECK(std::isnan(read_back(p)));  // still cudaMalloc's 0xFF bytes
  cudaFree(p);
}

TEST_CASE("potentially unsafe calls follow the capture interaction mode") {
  Rig rig;
  float host = 0.0f;
  SUBCASE("a synchronous cudaMemcpy to the host under the global mode") {
    REQUIRE(cudaStreamBeginCapture(rig.main, cudaStreamCaptureModeGlobal) == cudaSuccess);
    CHECK(cudaMemcpy(&host, rig.x, sizeof host, cudaMemcpyDeviceToHost) == cudaErrorStreamCaptureUnsupported);
    require_invalidated(rig.main);
  }
  SUBCASE("cudaMalloc under the thread-local mode") {
    REQUIRE(cudaStreamBeginCapture(rig.main, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
    float* q = nullptr;
    CHECK(cudaMalloc(&q, 4) == cudaErrorStreamCaptureUnsupported);
    require_invalidated(rig.main);
  }
  SUBCASE("allowed when the capture is relaxed, or the thread exchanged its mode for relaxed") {
    for (bool relaxed_capture : {true, false}) {
      REQUIRE(cudaStreamBeginCapture(rig.main, relaxed_capture ? cudaStreamCaptureModeRelaxed
                                                               : cudaStreamCaptureModeGlobal) == cudaSuccess);
      cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
      if (!relaxed_capture) REQUIRE(cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess);
      CHECK(cudaMemcpy(&host, rig.x, sizeof host, cudaMemcpyDeviceToHost) == cudaSuccess);
      if (!relaxed_capture) {
        REQUIRE(cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess);
        CHECK(mode == cudaStreamCaptureModeRelaxed);
      }
      cudaGraph_t graph;
      REQUIRE(cudaStreamEndCapture(rig.main, &graph) == cudaSuccess);
      REQUIRE(cudaGraphDestroy(graph) == cudaSuccess);
    }
  }
  SUBCASE("a global capture prohibits another thread's unsafe calls; a thread-local one does not") {
    for (auto mode : {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal}) {
      REQUIRE(cudaStreamBeginCapture(rig.main, mode) == cudaSuccess);
      cudaError_t e = cudaSuccess;
      std::thread([&] {
        float* q = nullptr;
        e = cudaMalloc(&q, 4);
        cudaFree(q);
      }).join();
      CHECK(e == (mode == cudaStreamCaptureModeGlobal ? cudaErrorStreamCaptureUnsupported : cudaSuccess));
      if (mode == cudaStreamCaptureModeGlobal) {
        require_invalidated(rig.main);
      } else {
        cudaGraph_t graph;
        REQUIRE(cudaStreamEndCapture(rig.main, &graph) == cudaSuccess);
        cudaGraphDestroy(graph);
      }
    }
  }
  cudaGetLastError();
}

TEST_CASE("the legacy stream beside a capturing blocking stream is refused") {
  cudaStream_t blocking;
  REQUIRE(cudaStreamCreate(&blocking) == cudaSuccess);
  float* p = device_array<float>(1);
  REQUIRE(cudaStreamBeginCapture(blocking, cudaStreamCaptureModeRelaxed) == cudaSuccess);
  // The emulated kernel<<<...>>> itself: llmc::launch would throw the error cudaGetLastError reports.
  emu::launch<set_kernel>(1, 1, 0, 0, p, 1.0f);
  CHECK(cudaGetLastError() == cudaErrorStreamCaptureImplicit);
  cudaStreamCaptureStatus status;
  CHECK(cudaStreamIsCapturing(0, &status) == cudaErrorStreamCaptureImplicit);
  require_invalidated(blocking);
  // Beside a non-blocking capturing stream the legacy stream is usable.
  Rig rig;
  REQUIRE(cudaStreamBeginCapture(rig.main, cudaStreamCaptureModeRelaxed) == cudaSuccess);
  launch<set_kernel>(1, 1, 0, 0, p, 3.0f);
  CHECK(cudaGetLastError() == cudaSuccess);
  cudaGraph_t graph;
  REQUIRE(cudaStreamEndCapture(rig.main, &graph) == cudaSuccess);
  cudaGraphDestroy(graph);
  CHECK(read_back(p) == 3.0f);
  cudaFree(p);
  cudaStreamDestroy(blocking);
}

TEST_CASE("forks and joins: an unjoined fork, an event from outside the capture, another capture's event") {
  Rig rig;
  cudaGraph_t graph = reinterpret_cast<cudaGraph_t>(1);
  SUBCASE("a forked stream that is not joined back") {
    REQUIRE(cudaStreamBeginCapture(rig.main, cudaStreamCaptureModeGlobal) == cudaSuccess);
    REQUIRE(cudaEventRecord(rig.fork, rig.main) == cudaSuccess);
    REQUIRE(cudaStreamWaitEvent(rig.side, rig.fork, 0) == cudaSuccess);
    launch<set_kernel>(1, 1, 0, rig.side, rig.x, 1.0f);
    CHECK(cudaStreamEndCapture(rig.main, &graph) == cudaErrorStreamCaptureUnjoined);
    CHECK(graph == nullptr);
  }
  SUBCASE("an event recorded outside the capture, without and with cudaEventWaitExternal") {
    REQUIRE(cudaEventRecord(rig.join, rig.side) == cudaSuccess);
    REQUIRE(cudaStreamBeginCapture(rig.main, cudaStreamCaptureModeGlobal) == cudaSuccess);
    CHECK(cudaStreamWaitEvent(rig.main, rig.join, 0) == cudaErrorStreamCaptureIsolation);
    require_invalidated(rig.main);
    REQUIRE(cudaStreamBeginCapture(rig.main, cudaStreamCaptureModeGlobal) == cudaSuccess);
    CHECK(cudaStreamWaitEvent(rig.main, rig.join, cudaEventWaitExternal) == cudaSuccess);
    REQUIRE(cudaStreamEndCapture(rig.main, &graph) == cudaSuccess);
    cudaGraphDestroy(graph);
  }
  SUBCASE("an event of another capture") {
    REQUIRE(cudaStreamBeginCapture(rig.main, cudaStreamCaptureModeGlobal) == cudaSuccess);
    REQUIRE(cudaStreamBeginCapture(rig.side, cudaStreamCaptureModeGlobal) == cudaSuccess);
    REQUIRE(cudaEventRecord(rig.fork, rig.main) == cudaSuccess);
    CHECK(cudaStreamWaitEvent(rig.side, rig.fork, 0) == cudaErrorStreamCaptureMerge);
    require_invalidated(rig.side);
    require_invalidated(rig.main);
  }
  SUBCASE("capture begun, ended and launched where CUDA does not allow it") {
    CHECK(cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal) == cudaErrorStreamCaptureUnsupported);
    CHECK(cudaStreamEndCapture(rig.main, &graph) == cudaErrorIllegalState);
    REQUIRE(cudaStreamBeginCapture(rig.main, cudaStreamCaptureModeGlobal) == cudaSuccess);
    CHECK(cudaStreamBeginCapture(rig.main, cudaStreamCaptureModeGlobal) == cudaErrorIllegalState);
    cudaError_t other_thread = cudaSuccess;
    std::thread([&] { other_thread = cudaStreamEndCapture(rig.main, &graph); }).join();
    CHECK(other_thread == cudaErrorStreamCaptureWrongThread);
    REQUIRE(cudaEventRecord(rig.fork, rig.main) == cudaSuccess);
    REQUIRE(cudaStreamWaitEvent(rig.side, rig.fork, 0) == cudaSuccess);
    CHECK(cudaStreamEndCapture(rig.side, &graph) == cudaErrorStreamCaptureUnmatched);
    require_invalidated(rig.main);
    CHECK(cudaGraphLaunch(nullptr, rig.main) == cudaErrorInvalidValue);
  }
  cudaGetLastError();
}
