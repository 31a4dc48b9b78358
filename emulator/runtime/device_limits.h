// The limits of the device the emulated GPU stands for, an H100 SXM, in one place: the device
// properties report them, the launches and the shared-memory arena enforce them, the shuffles and
// votes default their width to the warp, and the block runner and the race check group CUDA threads
// into warps by it.
#pragma once
#include <cstddef>
#include <string>

namespace emu {

constexpr int kWarp = 32;                                // lanes of a warp, as on every NVIDIA GPU
constexpr size_t kDefaultSharedPerBlock = 48 * 1024;     // shared memory without the opt-in
constexpr size_t kOptInSharedPerBlock = 232448;          // 227 KiB with cudaFuncSetAttribute's opt-in
constexpr size_t kGlobalMemory = 80ull << 30;            // 80 GiB
constexpr unsigned kMaxThreadsPerBlock = 1024;
constexpr unsigned kMaxBlockDim[3] = {1024, 1024, 64};
constexpr unsigned kMaxGridDim[3] = {2147483647u, 65535, 65535};

// "(x,y,z)" of three limits, for the launch errors.
inline std::string limits_text(const unsigned (&v)[3]) {
  return "(" + std::to_string(v[0]) + "," + std::to_string(v[1]) + "," + std::to_string(v[2]) + ")";
}

}  // namespace emu
