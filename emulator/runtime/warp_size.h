// The emulated GPU's warp: kWarp lanes, as on every NVIDIA GPU. The one place for it: the device
// properties and warpSize report it, the shuffles and votes default their width to it, and the block
// runner and the race check group CUDA threads into warps by it.
#pragma once

namespace emu {

constexpr int kWarp = 32;

}  // namespace emu
