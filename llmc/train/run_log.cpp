#include "llmc/train/run_log.h"

#include "llmc/io/checkpoint_files.h"

#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <stdexcept>
#include <vector>

namespace llmc {

namespace {

// The step of a main.log line "s:<step> ...", or -1 for a line of another shape.
long line_step(const std::string& line) {
  if (line.compare(0, 2, "s:") != 0) return -1;
  char* end = nullptr;
  const long step = std::strtol(line.c_str() + 2, &end, 10);
  return end == line.c_str() + 2 ? -1 : step;
}

}  // namespace

RunLog::RunLog(const std::string& dir, int resume_step) : path_(dir + "/main.log") {
  if (resume_step >= 0) {
    std::string kept;
    std::ifstream in(path_);
    for (std::string line; std::getline(in, line);) {
      const long step = line_step(line);
      // A line without its newline (in.eof()) was cut by a kill; it cannot be before the checkpoint.
      if (step >= 0 && step < resume_step && !in.eof()) kept += line + "\n";
    }
    write_file_atomically(path_, [&](FILE* f) { return std::fwrite(kept.data(), 1, kept.size(), f) == kept.size(); });
  }
  file_ = std::fopen(path_.c_str(), resume_step >= 0 ? "a" : "w");
  if (file_ == nullptr) throw std::runtime_error(fmt::format("{}: cannot write: {}", path_, std::strerror(errno)));
}

RunLog::~RunLog() {
  if (file_ != nullptr) std::fclose(file_);
}

void RunLog::line(const std::string& text) {
  // Flushed per line: a crashed or interrupted run leaves a log that is complete up to its end.
  if (std::fprintf(file_, "%s\n", text.c_str()) < 0 || std::fflush(file_) != 0)
    throw std::runtime_error(fmt::format("{}: write failed: {}", path_, std::strerror(errno)));
}

void RunLog::train(int step, float loss, float lr, float norm, bool skipped, std::optional<double> mfu) {
  line(fmt::format("s:{} trl:{:.6f} lr:{:.6e} norm:{:.6f}{}{}", step, loss, lr, norm,
                   mfu ? fmt::format(" mfu:{:.2f}", *mfu) : std::string(), skipped ? " skipped:1" : ""));
}

void RunLog::eval(int step, float accuracy) { line(fmt::format("s:{} eval:{:.6f}", step, accuracy)); }

void RunLog::val(int step, float loss) { line(fmt::format("s:{} tel:{:.6f}", step, loss)); }

std::string format_duration(double seconds) {
  const long s = seconds < 0 ? 0 : long(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}h{:02}m{:02}s", s / 3600, s / 60 % 60, s % 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

std::string format_step_line(int step, int max_steps, float loss, float norm, float lr, double step_ms,
                             double tokens_per_second, double eta_seconds, std::optional<double> mfu) {
  const int width = int(fmt::format("{}", max_steps).size());
  return fmt::format("step {:>{}}/{} | loss {:.6f} | norm {:.4f} | lr {:.2e} | {:.1f} ms | {:.0f} tok/s | {}eta {}",
                     step, width, max_steps, loss, norm, lr, step_ms, tokens_per_second,
                     mfu ? fmt::format("MFU {:.1f}% | ", *mfu) : std::string(), format_duration(eta_seconds));
}

}  // namespace llmc
