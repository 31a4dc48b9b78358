// Build check, not a benchmark: instantiates every elementwise/normalisation launcher with
// floatX = float (the PRECISION=FP32 trainer), so `make -C dev/cuda` proves both precisions compile.
// Running it only lists the launchers it was built with.
#define ENABLE_FP32
#include <fmt/format.h>

#include "llmc/cuda/adamw.cuh"
#include "llmc/cuda/classifier.cuh"
#include "llmc/cuda/encoder.cuh"
#include "llmc/cuda/gelu.cuh"
#include "llmc/cuda/global_norm.cuh"
#include "llmc/cuda/layernorm.cuh"
#include "llmc/cuda/layernorm_forward.cuh"

static_assert(sizeof(llmc::floatX) == sizeof(float), "ENABLE_FP32 must select fp32 activations");

int main() {
  const void* launchers[] = {
      reinterpret_cast<const void*>(&llmc::encoder_backward),
      reinterpret_cast<const void*>(&llmc::layernorm_forward),
      reinterpret_cast<const void*>(&llmc::fused_residual_layernorm_forward),
      reinterpret_cast<const void*>(&llmc::encoder_layernorm_forward),
      reinterpret_cast<const void*>(&llmc::layernorm_backward),
      reinterpret_cast<const void*>(&llmc::gelu_forward),
      reinterpret_cast<const void*>(&llmc::gelu_backward),
      reinterpret_cast<const void*>(&llmc::fused_classifier),
      reinterpret_cast<const void*>(&llmc::adamw_update_slices),
      reinterpret_cast<const void*>(&llmc::global_norm_squared<float>),
      reinterpret_cast<const void*>(&llmc::global_norm_squared<llmc::floatX>),
  };
  int count = 0;
  for (const void* f : launchers) count += f != nullptr;
  fmt::print("fp32 build instantiates {} launchers\n", count);
  return 0;
}
