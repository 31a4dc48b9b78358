// What the emulated GPU promises kernels and host code (docs/cuda-emulator.md), each checked on a
// small kernel: thread indexing, barriers, shuffles and votes, shared memory, atomics, bf16, and
// the runtime API, including the launch errors that are not sticky. The faults that end a program
// are in emu_faults.cu.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <tuple>
#include <unistd.h>
#include <vector>

#include "emulator/runtime/stream_order.h"
#include "emulator/tests/device_vectors.h"
#include "emulator/tests/launch_ok.h"
#include "emulator/tests/scoped_env.h"
#include "llmc/cuda/common.cuh"

using llmc::launch;

namespace {

__global__ void indices_kernel(int* out) {
  const int block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const int thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const int threads = blockDim.x * blockDim.y * blockDim.z;
  atomicAdd(&out[block * threads + thread], 1 + thread * 1000 + block * 1000000);
}

TEST_CASE("every thread of a 3-D grid of 3-D blocks runs once, with its own indices") {
  const dim3 grid(3, 2, 2), block(5, 4, 3);
  const int n = 12 * 60;
  int* out = device_array<int>(n);
  REQUIRE(cudaMemset(out, 0, n * sizeof(int)) == cudaSuccess);
  launch_ok<indices_kernel>(grid, block, 0, out);
  const auto got = download(out, n);
  for (int b = 0; b < 12; ++b)
    for (int t = 0; t < 60; ++t) CHECK(got[b * 60 + t] == 1 + t * 1000 + b * 1000000);
  cudaFree(out);
}

// Each thread writes its slot, then (after the barrier) reads its neighbour's: correct only if the
// barrier waits for every thread.
__global__ void barrier_kernel(int* out) {
  LLMC_SHARED(int, slots, [256]);
  for (int round = 0; round < 3; ++round) {
    slots[threadIdx.x] = int(threadIdx.x) * 10 + round;
    __syncthreads();
    out[round * blockDim.x + threadIdx.x] = slots[(threadIdx.x + 1) % blockDim.x];
    __syncthreads();
  }
}

TEST_CASE("__syncthreads waits for every thread of the block, round after round") {
  int* out = device_array<int>(3 * 256);
  launch_ok<barrier_kernel>(1, 256, 0, out);
  const auto got = download(out, 3 * 256);
  for (int round = 0; round < 3; ++round)
    for (int t = 0; t < 256; ++t) CHECK(got[round * 256 + t] == ((t + 1) % 256) * 10 + round);
  cudaFree(out);
}

__global__ void shuffle_kernel(float* out) {
  const int lane = threadIdx.x % 32;
  const float x = float(lane + 1);
  float sum = x;
  for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  out[threadIdx.x * 5 + 0] = sum;                                         // 528 in every lane
  out[threadIdx.x * 5 + 1] = __shfl_sync(0xffffffffu, x, 5);              // lane 5's: 6
  out[threadIdx.x * 5 + 2] = __shfl_down_sync(0xffffffffu, x, 3, 8);      // within groups of 8
  out[threadIdx.x * 5 + 3] = __shfl_up_sync(0xffffffffu, x, 2, 16);       // within groups of 16
  out[threadIdx.x * 5 + 4] = float(__shfl_xor_sync(0xffffffffu, lane, 7)); // ints too
}

TEST_CASE("shuffles exchange among the 32 lanes of a warp, within their width") {
  float* out = device_array<float>(64 * 5);
  launch_ok<shuffle_kernel>(1, 64, 0, out);
  const auto got = download(out, 64 * 5);
  for (int t = 0; t < 64; ++t) {
    const int lane = t % 32;
    CHECK(got[t * 5 + 0] == 528.0f);
    CHECK(got[t * 5 + 1] == 6.0f);
    CHECK(got[t * 5 + 2] == float((lane % 8 + 3 < 8 ? lane + 3 : lane) + 1));
    CHECK(got[t * 5 + 3] == float((lane % 16 >= 2 ? lane - 2 : lane) + 1));
    CHECK(got[t * 5 + 4] == float(lane ^ 7));
  }
  cudaFree(out);
}

__global__ void vote_kernel(unsigned* out) {
  const int lane = threadIdx.x % 32;
  out[threadIdx.x * 4 + 0] = __ballot_sync(0xffffffffu, lane % 3 == 0);
  out[threadIdx.x * 4 + 1] = __any_sync(0xffffffffu, lane == 17);
  out[threadIdx.x * 4 + 2] = __all_sync(0xffffffffu, lane < 31);
  __syncwarp();
  // A half-warp mask: only lanes 0-15 take part.
  out[threadIdx.x * 4 + 3] = lane < 16 ? __ballot_sync(0x0000ffffu, lane % 2) : 7u;
}

TEST_CASE("votes see every lane of their mask") {
  unsigned* out = device_array<unsigned>(32 * 4);
  launch_ok<vote_kernel>(1, 32, 0, out);
  const auto got = download(out, 32 * 4);
  unsigned every_third = 0;
  for (int lane = 0; lane < 32; lane += 3) every_third |= 1u << lane;
  for (int lane = 0; lane < 32; ++lane) {
    CHECK(got[lane * 4 + 0] == every_third);
    CHECK(got[lane * 4 + 1] == 1u);
    CHECK(got[lane * 4 + 2] == 0u);
    CHECK(got[lane * 4 + 3] == (lane < 16 ? 0xaaaau : 7u));
  }
  cudaFree(out);
}

// Reads the shared arrays before writing them: what a block finds there.
__global__ void fresh_shared_kernel(uint32_t* out) {
  LLMC_SHARED(float, cells, [64]);
  uint32_t* dyn = llmc::dynamic_shared<uint32_t>();
  uint32_t bits;
  std::memcpy(&bits, &cells[threadIdx.x], sizeof bits);
  out[blockIdx.x * 128 + threadIdx.x] = bits;
  out[blockIdx.x * 128 + 64 + threadIdx.x] = dyn[threadIdx.x];
  if (threadIdx.x == 0) out[gridDim.x * 128 + blockIdx.x] = uint32_t(reinterpret_cast<uintptr_t>(dyn) % 16);
  __syncthreads();
  cells[threadIdx.x] = float(blockIdx.x);
  dyn[threadIdx.x] = blockIdx.x;
}

TEST_CASE("shared memory is fresh for every block and starts as 0xFF bytes (NaN)") {
  const int blocks = 6;
  uint32_t* out = device_array<uint32_t>(blocks * 129);
  launch_ok<fresh_shared_kernel>(blocks, 64, 64 * sizeof(uint32_t), out);
  const auto got = download(out, blocks * 129);
  for (int i = 0; i < blocks * 128; ++i) CHECK(got[i] == 0xffffffffu);
  for (int b = 0; b < blocks; ++b) CHECK(got[blocks * 128 + b] == 0u);  // dynamic part 16-byte aligned
  cudaFree(out);
}

__global__ void atomics_kernel(int* counter, float* total, int* maximum, unsigned* exchanged, int* swapped) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  atomicAdd(counter, 2);
  atomicAdd(total, 0.5f);
  atomicMax(maximum, i);
  atomicExch(exchanged, 7u);
  atomicCAS(swapped, 0, i + 1);  // only the first to arrive swaps
}

TEST_CASE("atomics from every block add up, and CAS succeeds once") {
  int* counter = device_array<int>(1);
  float* total = device_array<float>(1);
  int* maximum = device_array<int>(1);
  unsigned* exchanged = device_array<unsigned>(1);
  int* swapped = device_array<int>(1);
  for (void* p : {(void*)counter, (void*)total, (void*)maximum, (void*)exchanged, (void*)swapped})
    REQUIRE(cudaMemset(p, 0, 4) == cudaSuccess);
  launch_ok<atomics_kernel>(16, 256, 0, counter, total, maximum, exchanged, swapped);
  CHECK(download(counter, 1)[0] == 2 * 4096);
  CHECK(download(total, 1)[0] == 2048.0f);  // exact: every partial sum is a multiple of 0.5 below 2^24
  CHECK(download(maximum, 1)[0] == 4095);
  CHECK(download(exchanged, 1)[0] == 7u);
  const int winner = download(swapped, 1)[0];
  CHECK(winner >= 1);
  CHECK(winner <= 4096);
  for (void* p : {(void*)counter, (void*)total, (void*)maximum, (void*)exchanged, (void*)swapped}) cudaFree(p);
}

// The programming guide's last-block pattern, as layernorm_backward's fused finish uses it: every
// thread writes its value, fences; the block counts itself done; the block that sees the final count
// fences, sums every value (each thread one block's values, read at L2 with __ldcg) and resets the
// counter for the next launch.
__global__ void last_block_kernel(float* values, unsigned* done, float* block_totals, float* total) {
  LLMC_SHARED(unsigned, is_last, [1]);
  values[blockIdx.x * blockDim.x + threadIdx.x] = float(threadIdx.x + 1);
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) is_last[0] = atomicAdd(done, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!is_last[0]) return;
  __threadfence();
  for (unsigned b = threadIdx.x; b < gridDim.x; b += blockDim.x) {
    float sum = 0.0f;
    for (unsigned t = 0; t < blockDim.x; ++t) sum += __ldcg(values + b * blockDim.x + t);
    block_totals[b] = sum;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float sum = 0.0f;
    for (unsigned b = 0; b < gridDim.x; ++b) sum += block_totals[b];
    *total = sum;
    atomicExch(done, 0u);
  }
}

TEST_CASE("__threadfence and an atomic count: the last block sees every block's writes, then resets the count") {
  constexpr int kBlocks = 256, kThreads = 64, n = kBlocks * kThreads;
  float* values = device_array<float>(n);
  unsigned* done = device_array<unsigned>(1);
  float* block_totals = device_array<float>(kBlocks);
  float* total = device_array<float>(1);
  REQUIRE(cudaMemset(done, 0, sizeof(unsigned)) == cudaSuccess);
  for (int round = 0; round < 2; ++round) {
    REQUIRE(cudaMemset(values, 0xFF, n * sizeof(float)) == cudaSuccess);  // NaN until written
    launch_ok<last_block_kernel>(kBlocks, kThreads, 0, values, done, block_totals, total);
    // 1 + ... + 64 = 2080 per block; every partial sum is an integer below 2^24, so exact.
    CHECK(download(total, 1)[0] == 2080.0f * kBlocks);
    CHECK(download(done, 1)[0] == 0u);
  }
  cudaFree(values), cudaFree(done), cudaFree(block_totals), cudaFree(total);
}

__global__ void intrinsics_kernel(const float* in, float* out, __nv_bfloat16* half_out) {
  const int4 v = __ldcs(reinterpret_cast<const int4*>(in));
  __stcs(reinterpret_cast<int4*>(out), v);
  out[4] = __uint_as_float(__float_as_uint(in[0]) ^ 0x80000000u);  // sign flip through the bits
  out[5] = rsqrtf(in[1]);
  out[6] = __ldg(in + 2) + 1.0f;
  out[7] = float(min(int(in[1]), 3) * 10 + max(int(in[2]), 1));  // 3 * 10 + 1
  half_out[0] = __float2bfloat16_rn(in[3]) * __float2bfloat16_rn(2.0f);
}

TEST_CASE("cache-hinted loads and stores, bit casts, arithmetic and bf16 on the device") {
  const std::vector<float> in = {1.5f, 4.0f, -2.0f, 3.0f};
  float* d_in = upload(in);
  float* d_out = device_array<float>(8);
  __nv_bfloat16* d_half = device_array<__nv_bfloat16>(1);
  launch_ok<intrinsics_kernel>(1, 1, 0, d_in, d_out, d_half);
  const auto out = download(d_out, 8);
  for (int i = 0; i < 4; ++i) CHECK(out[i] == in[i]);
  CHECK(out[4] == -1.5f);
  CHECK(out[5] == doctest::Approx(0.5f));
  CHECK(out[6] == -1.0f);
  CHECK(out[7] == 31.0f);
  CHECK(float(download(d_half, 1)[0]) == 6.0f);
  cudaFree(d_in);
  cudaFree(d_out);
  cudaFree(d_half);
}

TEST_CASE("cudaMalloc: 256-byte aligned, uninitialised (0xFF bytes), counted by cudaMemGetInfo") {
  size_t free_before = 0, total = 0;
  REQUIRE(cudaMemGetInfo(&free_before, &total) == cudaSuccess);
  CHECK(total == 80ull << 30);
  uint8_t* p = device_array<uint8_t>(1000);
  CHECK(reinterpret_cast<uintptr_t>(p) % 256 == 0);
  size_t free_after = 0;
  REQUIRE(cudaMemGetInfo(&free_after, &total) == cudaSuccess);
  CHECK(free_before - free_after == 1000);
  for (uint8_t byte : download(p, 1000)) CHECK(byte == 0xFF);
  REQUIRE(cudaMemset(p + 10, 3, 20) == cudaSuccess);
  const auto after = download(p, 40);
  CHECK(after[9] == 0xFF);
  CHECK(after[10] == 3);
  CHECK(after[29] == 3);
  CHECK(after[30] == 0xFF);
  cudaFree(p);
}

TEST_CASE("LLMC_EMU_MEMORY_TAKEN: memory another process holds is neither free nor allocatable") {
  size_t free_alone = 0, total = 0;
  REQUIRE(cudaMemGetInfo(&free_alone, &total) == cudaSuccess);
  setenv("LLMC_EMU_MEMORY_TAKEN", "81900", 1);  // all but 20 MiB of the 80 GiB
  struct UnsetAtExit {  // also when a REQUIRE below ends the case, so that no later case sees it
    ~UnsetAtExit() { unsetenv("LLMC_EMU_MEMORY_TAKEN"); }
  } unset_at_exit;
  size_t free_shared = 0;
  REQUIRE(cudaMemGetInfo(&free_shared, &total) == cudaSuccess);
  CHECK(total == 80ull << 30);
  CHECK(free_alone - free_shared == 81900ull << 20);
  void* p = nullptr;
  CHECK(cudaMalloc(&p, 21ull << 20) == cudaErrorMemoryAllocation);
  CHECK(cudaGetLastError() == cudaErrorMemoryAllocation);
  REQUIRE(cudaMalloc(&p, 19ull << 20) == cudaSuccess);
  cudaFree(p);
}

TEST_CASE("copies check their kinds and ranges, and a failed call is reported once (not sticky)") {
  float* d = device_array<float>(8);
  std::vector<float> host(8, 1.0f);
  // Device memory given as the host side, a host pointer as the device side, past the end.
  CHECK(cudaMemcpy(d, d, 32, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK(cudaMemcpy(host.data(), host.data(), 32, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue);
  CHECK(cudaMemcpy(d, host.data(), 36, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
  CHECK(cudaFree(host.data()) == cudaErrorInvalidValue);
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);
  // cudaMemcpyDefault infers the direction; then the same bytes come back.
  host = {1, 2, 3, 4, 5, 6, 7, 8};
  CHECK(cudaMemcpy(d, host.data(), 32, cudaMemcpyDefault) == cudaSuccess);
  CHECK(download(d, 8) == host);
  cudaFree(d);
}

TEST_CASE("streams, events and pinned memory") {
  cudaStream_t stream;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  cudaEvent_t start, stop, untimed;
  REQUIRE(cudaEventCreate(&start) == cudaSuccess);
  REQUIRE(cudaEventCreate(&stop) == cudaSuccess);
  REQUIRE(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming) == cudaSuccess);
  float* pinned = nullptr;
  REQUIRE(cudaMallocHost(reinterpret_cast<void**>(&pinned), 4 * sizeof(float)) == cudaSuccess);
  float* d = device_array<float>(4);
  pinned[0] = 9.0f;
  REQUIRE(cudaEventRecord(start, stream) == cudaSuccess);
  REQUIRE(cudaMemcpyAsync(d, pinned, 4, cudaMemcpyHostToDevice, stream) == cudaSuccess);
  REQUIRE(cudaEventRecord(stop, stream) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(0, stop, 0) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  float ms = -1.0f;
  CHECK(cudaEventElapsedTime(&ms, start, stop) == cudaSuccess);
  CHECK(ms >= 0.0f);
  CHECK(cudaEventElapsedTime(&ms, start, untimed) == cudaErrorInvalidResourceHandle);
  CHECK(download(d, 1)[0] == 9.0f);
  REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);
  CHECK(cudaStreamSynchronize(stream) == cudaErrorInvalidResourceHandle);
  CHECK(cudaFreeHost(pinned) == cudaSuccess);
  for (cudaEvent_t e : {start, stop, untimed}) CHECK(cudaEventDestroy(e) == cudaSuccess);
  cudaGetLastError();
  cudaFree(d);
}

__global__ void set_kernel(float* p, float v) { p[0] = v; }
__global__ void add_kernel(float* out, const float* in, float v) { out[0] = in[0] + v; }

float read_back(const float* d) {
  float v = 0.0f;
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  REQUIRE(cudaMemcpy(&v, d, sizeof v, cudaMemcpyDeviceToHost) == cudaSuccess);
  return v;
}

// What each order (LLMC_EMU_STREAMS) lets the host see when code omits a wait CUDA does not
// promise; check_emu.sh runs this case under all three orders.
TEST_CASE("stream order: work runs when the host waits for it, and streams wait only when told to") {
  const emu::StreamOrder order = emu::stream_order();
  INFO("LLMC_EMU_STREAMS order " << int(order));
  cudaStream_t a, b, blocking;
  REQUIRE(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cudaStreamCreate(&blocking) == cudaSuccess);
  cudaEvent_t written;
  REQUIRE(cudaEventCreateWithFlags(&written, cudaEventDisableTiming) == cudaSuccess);
  float* x = device_array<float>(1);
  float* y = device_array<float>(1);

  SUBCASE("a stream told to wait for an event sees the work before it") {
    launch<set_kernel>(1, 1, 0, a, x, 3.0f);
    REQUIRE(cudaEventRecord(written, a) == cudaSuccess);
    REQUIRE(cudaStreamWaitEvent(b, written, 0) == cudaSuccess);
    launch<add_kernel>(1, 1, 0, b, y, x, 1.0f);
    REQUIRE(cudaStreamSynchronize(b) == cudaSuccess);
    CHECK(read_back(y) == 4.0f);
  }
  SUBCASE("a stream not told to wait may run first") {
    launch<set_kernel>(1, 1, 0, a, x, 3.0f);
    REQUIRE(cudaStreamSynchronize(a) == cudaSuccess);
    launch<set_kernel>(1, 1, 0, a, x, 5.0f);
    launch<add_kernel>(1, 1, 0, b, y, x, 1.0f);
    REQUIRE(cudaStreamSynchronize(b) == cudaSuccess);
    const float seen = read_back(y);
    if (order == emu::StreamOrder::latest) CHECK(seen == 4.0f);
    if (order == emu::StreamOrder::issue) CHECK(seen == 6.0f);
    if (order == emu::StreamOrder::seeded) CHECK((seen == 4.0f || seen == 6.0f));
    CHECK(read_back(x) == 5.0f);
  }
  SUBCASE("a copy to pinned memory lands when the host synchronises; to pageable memory, before it returns") {
    float* pinned = nullptr;
    REQUIRE(cudaMallocHost(reinterpret_cast<void**>(&pinned), sizeof(float)) == cudaSuccess);
    pinned[0] = -1.0f;
    launch<set_kernel>(1, 1, 0, a, x, 7.0f);
    REQUIRE(cudaMemcpyAsync(pinned, x, sizeof(float), cudaMemcpyDeviceToHost, a) == cudaSuccess);
    if (order == emu::StreamOrder::latest) CHECK(pinned[0] == -1.0f);
    REQUIRE(cudaStreamSynchronize(a) == cudaSuccess);
    CHECK(pinned[0] == 7.0f);
    std::vector<float> pageable(1, -1.0f);
    launch<set_kernel>(1, 1, 0, a, x, 8.0f);
    REQUIRE(cudaMemcpyAsync(pageable.data(), x, sizeof(float), cudaMemcpyDeviceToHost, a) == cudaSuccess);
    CHECK(pageable[0] == 8.0f);
    CHECK(cudaFreeHost(pinned) == cudaSuccess);
  }
  SUBCASE("a copy from pageable memory reads it at the call; from pinned memory, when it runs") {
    float value = 1.0f;
    REQUIRE(cudaMemcpyAsync(x, &value, sizeof value, cudaMemcpyHostToDevice, a) == cudaSuccess);
    value = 2.0f;
    REQUIRE(cudaStreamSynchronize(a) == cudaSuccess);
    CHECK(read_back(x) == 1.0f);
    float* pinned = nullptr;
    REQUIRE(cudaMallocHost(reinterpret_cast<void**>(&pinned), sizeof(float)) == cudaSuccess);
    pinned[0] = 10.0f;
    REQUIRE(cudaMemcpyAsync(x, pinned, sizeof(float), cudaMemcpyHostToDevice, a) == cudaSuccess);
    pinned[0] = 11.0f;  // too early: the copy may not have run
    REQUIRE(cudaStreamSynchronize(a) == cudaSuccess);
    if (order == emu::StreamOrder::latest) CHECK(read_back(x) == 11.0f);
    if (order == emu::StreamOrder::issue) CHECK(read_back(x) == 10.0f);
    CHECK(cudaFreeHost(pinned) == cudaSuccess);
  }
  SUBCASE("the legacy default stream and blocking streams wait for each other; non-blocking ones do not") {
    launch<set_kernel>(1, 1, 0, a, x, 5.0f);
    REQUIRE(cudaStreamSynchronize(a) == cudaSuccess);
    REQUIRE(cudaMemset(x, 0, sizeof(float)) == cudaSuccess);  // queued on the legacy default stream
    launch<add_kernel>(1, 1, 0, blocking, y, x, 1.0f);
    REQUIRE(cudaStreamSynchronize(blocking) == cudaSuccess);
    CHECK(read_back(y) == 1.0f);
    launch<set_kernel>(1, 1, 0, a, x, 5.0f);
    REQUIRE(cudaStreamSynchronize(a) == cudaSuccess);
    REQUIRE(cudaMemset(x, 0, sizeof(float)) == cudaSuccess);
    launch<add_kernel>(1, 1, 0, a, y, x, 1.0f);
    REQUIRE(cudaStreamSynchronize(a) == cudaSuccess);
    if (order == emu::StreamOrder::latest) CHECK(read_back(y) == 6.0f);
    if (order == emu::StreamOrder::issue) CHECK(read_back(y) == 1.0f);
  }
  SUBCASE("queries see pending work, which then progresses") {
    launch<set_kernel>(1, 1, 0, a, x, 1.0f);
    REQUIRE(cudaEventRecord(written, a) == cudaSuccess);
    const cudaError_t first = cudaStreamQuery(a);
    CHECK((order == emu::StreamOrder::issue ? first == cudaSuccess : first == cudaErrorNotReady ||
                                                                        first == cudaSuccess));
    CHECK(cudaStreamQuery(a) == cudaSuccess);
    CHECK(cudaEventQuery(written) == cudaSuccess);
  }
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  for (cudaStream_t s : {a, b, blocking}) CHECK(cudaStreamDestroy(s) == cudaSuccess);
  CHECK(cudaEventDestroy(written) == cudaSuccess);
  cudaFree(x);
  cudaFree(y);
}

TEST_CASE("the device is an H100 as the runtime describes one") {
  int count = 0;
  REQUIRE(cudaGetDeviceCount(&count) == cudaSuccess);
  CHECK(count == 1);
  cudaDeviceProp prop;
  REQUIRE(cudaGetDeviceProperties(&prop, 0) == cudaSuccess);
  CHECK(prop.major == 9);
  CHECK(prop.minor == 0);
  CHECK(prop.maxThreadsPerBlock == 1024);
  CHECK(prop.warpSize == 32);
  CHECK(prop.sharedMemPerBlock == 48 * 1024);
  CHECK(prop.sharedMemPerBlockOptin == 227 * 1024);
  CHECK(prop.multiProcessorCount == 132);
  // One emulated GPU per process: the UUID names the process.
  CHECK(std::memcmp(prop.uuid.bytes, "EMUGPU", 6) == 0);
  uint32_t pid = 0;
  std::memcpy(&pid, prop.uuid.bytes + 6, sizeof pid);
  CHECK(pid == uint32_t(getpid()));
  CHECK(cudaSetDevice(1) == cudaErrorInvalidDevice);
  CHECK(cudaGetLastError() == cudaErrorInvalidDevice);
  // LLMC_EMU_COMPUTE_CAPABILITY stands the emulated GPU in for another generation.
  for (const auto& [text, major, minor] : {std::tuple{"8.0", 8, 0}, {"8.9", 8, 9}, {"10.0", 10, 0}}) {
    ScopedEnv capability("LLMC_EMU_COMPUTE_CAPABILITY", text);
    REQUIRE(cudaGetDeviceProperties(&prop, 0) == cudaSuccess);
    CHECK(prop.major == major);
    CHECK(prop.minor == minor);
  }
}

__global__ void empty_kernel() {}

// NVIDIA's rules, one case each: machine code runs on its major version from its minor up, PTX on
// every later GPU, an "a" image on its own GPU only, an "f" image on its family.
TEST_CASE("a kernel loads where one of LLMC_EMU_KERNEL_IMAGES runs on the compute capability") {
  cudaFuncAttributes attributes{};
  CHECK(cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(&empty_kernel)) == cudaSuccess);
  const std::tuple<const char*, const char*, bool> cases[] = {
      {"sm_80", "8.0", true},         {"sm_80", "8.9", true},          {"sm_80", "9.0", false},
      {"sm_90a", "9.0", true},        {"sm_90a", "10.0", false},       {"compute_80", "12.0", true},
      {"compute_90", "8.9", false},   {"compute_90a", "10.0", false},  {"sm_100f", "10.3", true},
      {"sm_100f", "12.0", false},     {"sm_80 sm_90a", "12.0", false}, {"sm_80 compute_80 sm_90a", "12.0", true}};
  for (const auto& [images, capability, loads] : cases) {
    ScopedEnv held("LLMC_EMU_KERNEL_IMAGES", images);
    ScopedEnv gpu("LLMC_EMU_COMPUTE_CAPABILITY", capability);
    CAPTURE(images);
    CAPTURE(capability);
    const cudaError_t err = cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(&empty_kernel));
    CHECK(err == (loads ? cudaSuccess : cudaErrorNoKernelImageForDevice));
    CHECK(cudaGetLastError() == err);
  }
}

__global__ void fill_dynamic_kernel(float* out, int floats) {
  float* dyn = llmc::dynamic_shared<float>();
  for (int i = threadIdx.x; i < floats; i += blockDim.x) dyn[i] = float(i);
  __syncthreads();
  if (threadIdx.x == 0) out[0] = dyn[floats - 1];
}

TEST_CASE("launch configuration errors come from cudaGetLastError, and are not sticky") {
  // emu::launch is the emulated kernel<<<...>>> itself (llmc::launch throws what cudaGetLastError reports).
  float* out = device_array<float>(1);
  emu::launch<fill_dynamic_kernel>(1, 1025, 0, 0, out, 1);
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
  emu::launch<fill_dynamic_kernel>(1, dim3(2, 2, 65), 0, 0, out, 1);
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
  emu::launch<fill_dynamic_kernel>(dim3(1, 1, 65536), 32, 0, 0, out, 1);
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
  emu::launch<fill_dynamic_kernel>(0, 32, 0, 0, out, 1);
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
  // llmc::launch checks its launch: it throws the error, naming the kernel, and leaves none behind.
  CHECK_THROWS_WITH_AS(launch<fill_dynamic_kernel>(1, 1025, 0, 0, out, 1),
                       doctest::Contains("fill_dynamic_kernel: invalid configuration argument"), std::runtime_error);
  CHECK(cudaGetLastError() == cudaSuccess);
  // 64 KiB of dynamic shared memory: an error until the kernel opts in, then usable to its end.
  const int floats = 16 * 1024;
  emu::launch<fill_dynamic_kernel>(1, 256, floats * sizeof(float), 0, out, floats);
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);
  REQUIRE(cudaFuncSetAttribute(reinterpret_cast<const void*>(&fill_dynamic_kernel),
                               cudaFuncAttributeMaxDynamicSharedMemorySize, floats * sizeof(float)) == cudaSuccess);
  launch_ok<fill_dynamic_kernel>(1, 256, floats * sizeof(float), out, floats);
  CHECK(download(out, 1)[0] == float(floats - 1));
  CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(&fill_dynamic_kernel),
                             cudaFuncAttributeMaxDynamicSharedMemorySize, 228 * 1024) == cudaErrorInvalidValue);
  cudaGetLastError();
  cudaFree(out);
}

}  // namespace
