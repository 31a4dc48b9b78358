// The limits of the device the emulated GPU stands for, an H100 SXM, in one place: the device
// properties report them, the launches and the shared-memory arena enforce them, the shuffles and
// votes default their width to the warp, and the block runner and the race check group CUDA threads
// into warps by it.
#pragma once
#include <cstddef>

namespace emu {

constexpr int kWarp = 32;                                // lanes of a warp, as on every NVIDIA GPU
constexpr size_t kDefaultSharedPerBlock = 48 * 1024;     // shared memory without the opt-in
constexpr size_t kOptInSharedPerBlock = 232448;          // 227 KiB with cudaFuncSetAttribute's opt-in
constexpr size_t kGlobalMemory = 80ull << 30;            // 80 GiB

}  // namespace emu
