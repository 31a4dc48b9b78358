// SIGINT/SIGTERM during a training run: the first asks the loop to stop after the current step
// (with a checkpoint when there is an output dir), a second one exits the process at once with
// status 128 + signal, without a checkpoint.
#pragma once
#include <csignal>

namespace llmc {

// Installs the stop handlers for the duration of a run and puts the previous ones back after.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  // The first signal received since construction (SIGINT or SIGTERM), 0 for none.
  int received() const;

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

}  // namespace llmc
