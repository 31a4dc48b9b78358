// The test seam: the only places where the product does something for a test, each switched on by an
// LLMC_TEST_* environment variable that no user sets and doing nothing without it. A test needs them
// to make a rare moment happen on demand; every one is listed here, with the check that uses it.
#pragma once
#include <optional>

namespace llmc {

// LLMC_TEST_PAUSE_BEFORE_RENAME_MS=<ms>: write_file_atomically (llmc/io/checkpoint_files.h) sleeps
// that long between the complete .tmp and its rename, so that tests/cpu/check_crash_resume.sh can
// kill a run in the middle of a checkpoint.
void test_hook_pause_before_rename();

// LLMC_TEST_STALL_AT_STEP=<step>: the training loop calls this at the start of every step and it
// never returns at step <step>, as if a kernel hung there, so that tests/dist/check_watchdog.sh can
// see the watchdog (llmc/train/watchdog.h) end a single process.
void test_hook_stall_at_step(int step);

// LLMC_TEST_FP8_STALE_AMAX=<k>: --fp8 1's delayed scales (llmc/cuda/fp8.cuh) are taken as if the amax
// history were stale by a factor 2^k, every amax 2^k times smaller than recorded (the scales 2^k too
// large: what lags behind tensors that grew), so that scripts/fp8_convergence.sh can show the
// convergence check catching a wrong scale. 0 without.
int test_hook_fp8_stale_amax_shift();

// LLMC_TEST_POISON_GRADIENT=<step>[:inf]: once step <step>'s gradients are summed over the ranks,
// the loop sets the first gradient each rank owns to NaN (or +Inf) through
// Backend::set_gradient_element, where a kernel that overflowed would have left it, so that
// tests/cpu/check_nonfinite_step.sh and the GPU session's reliability step see such a step skipped
// (-sl, -sg) or stopping the run. Nothing at other steps and without it.
std::optional<float> test_hook_poisoned_gradient(int step);

}  // namespace llmc
