#include "llmc/train/stop_signals.h"

#include <unistd.h>

namespace llmc {

namespace {

volatile std::sig_atomic_t g_stop_signal = 0;

extern "C" void on_stop_signal(int sig) {
  if (g_stop_signal != 0) {
    // Only async-signal-safe calls here: write(2) and _exit, no stdio.
    static const char kMessage[] = "\nsecond signal: exiting now, without a checkpoint\n";
    (void)!::write(2, kMessage, sizeof kMessage - 1);
    ::_exit(128 + sig);
  }
  g_stop_signal = sig;
}

}  // namespace

StopSignals::StopSignals() {
  g_stop_signal = 0;
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &old_int_);
  sigaction(SIGTERM, &action, &old_term_);
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
}

int StopSignals::received() const { return int(g_stop_signal); }

}  // namespace llmc
