// The run's logs: DIR/main.log, one llm.c-compatible line per event (docs/training.md, Logs), and the
// human-readable per-step line on stdout.
#pragma once
#include <cstdio>
#include <optional>
#include <string>

namespace llmc {

class RunLog {
 public:
  // Opens dir/main.log. A fresh run (resume_step < 0) starts it empty; a run resumed at step k
  // keeps only the complete lines of steps < k and appends after them, so the log reads as one
  // run (the lines a killed run wrote after its last checkpoint are dropped). The rewrite is
  // crash-safe: killed during it, the old log is still there.
  // Throws std::runtime_error naming the file if it cannot be written.
  RunLog(const std::string& dir, int resume_step);
  ~RunLog();
  RunLog(const RunLog&) = delete;
  RunLog& operator=(const RunLog&) = delete;

  // s:%d trl:%.6f lr:%.6e norm:%.6f, plus " mfu:%.2f" (percent) when the backend's device has a
  // known peak (llmc/mfu.h) and " skipped:1" when the update was skipped (-sl/-sg): the
  // llm.c keys stay first, so llm.c's log parsers still read the line.
  void train(int step, float loss, float lr, float norm, bool skipped = false, std::optional<double> mfu = {});
  void val(int step, float loss);       // s:%d tel:%.6f
  void eval(int step, float accuracy);  // s:%d eval:%.6f (HellaSwag)

 private:
  void line(const std::string& text);

  std::string path_;
  FILE* file_ = nullptr;
};

// "step    5/100 | loss 7.123456 | norm 1.2345 | lr 3.00e-04 | 123.4 ms | 12345 tok/s | eta 1m02s",
// with "| MFU 45.2% " before the eta when `mfu` (percent) is given.
std::string format_step_line(int step, int max_steps, float loss, float norm, float lr, double step_ms,
                             double tokens_per_second, double eta_seconds, std::optional<double> mfu = {});
// "1h02m03s", "4m05s", "6s".
std::string format_duration(double seconds);

}  // namespace llmc
