// `./tokenize`: GPT-2 tokenizer and data preparation tool.
//   encode [FILE]   prints the token ids of the whole input (one document) on one line
//   decode [FILE]   turns whitespace-separated token ids back into the exact bytes
//   shard ...       writes token shards (llmc/text/sharder.h)
//   bench ...       measures encoding throughput (docs/tokenizer.md)
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "llmc/io/json.h"
#include "llmc/text/sharder.h"
#include "llmc/text/tokenizer.h"

namespace {

const char* kUsage = R"(usage: ./tokenize COMMAND [options]

commands:
  encode [FILE]    print the GPT-2 token ids of the UTF-8 text in FILE (stdin if absent) as one
                   document (no end-of-text token added), space-separated, on one line
      --json-array FILE is a JSON array of strings: encode each as its own document, one line each
  decode [FILE]    read whitespace-separated token ids from FILE (stdin if absent) and write their
                   bytes exactly
  shard ...        tokenize documents into token shards (./tokenize shard --help)
  bench FILE...    measure encoding throughput over the documents of the FILEs
      --json-array every FILE is a JSON array of strings (default: each FILE is one document)
      --threads N  threads to measure (repeatable; default: 1 and all cores)

options of encode, decode and bench:
  --encoder PATH   GPT-2 encoder.json (default data/encoder.json)
  --vocab PATH     GPT-2 vocab.bpe (default data/vocab.bpe)
  --help           print this help
)";

struct Options {
  std::string encoder = llmc::default_encoder_path();
  std::string vocab = llmc::default_vocab_bpe_path();
  bool json_array = false;
  std::vector<int> threads;
  std::vector<std::string> files;
};

std::string read_input(const std::string& path) {
  if (path.empty()) {
    std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    if (std::cin.bad()) throw std::runtime_error("<stdin>: read error");
    return text;
  }
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  std::string text;
  char buffer[1 << 16];
  size_t got;
  while ((got = std::fread(buffer, 1, sizeof buffer, f)) > 0) text.append(buffer, got);
  const bool failed = std::ferror(f);
  std::fclose(f);
  if (failed) throw std::runtime_error(fmt::format("{}: read error", path));
  return text;
}

std::string input_name(const std::string& path) { return path.empty() ? "<stdin>" : path; }

Options parse_options(int argc, char** argv, const std::string& command) {
  Options o;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(fmt::format("{} needs a value", arg));
      return argv[++i];
    };
    if (arg == "--encoder") {
      o.encoder = value();
    } else if (arg == "--vocab") {
      o.vocab = value();
    } else if (arg == "--json-array" && command != "decode") {
      o.json_array = true;
    } else if (arg == "--threads" && command == "bench") {
      const std::string v = value();
      char* end;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (*end || n < 1 || n > 1024) throw std::runtime_error(fmt::format("--threads: expected 1..1024, got '{}'", v));
      o.threads.push_back(int(n));
    } else if (arg.size() > 1 && arg[0] == '-') {
      throw std::runtime_error(fmt::format("{}: unknown option '{}' (see ./tokenize --help)", command, arg));
    } else {
      o.files.push_back(arg);
    }
  }
  if (command != "bench" && o.files.size() > 1)
    throw std::runtime_error(fmt::format("{}: expected at most one FILE, got {}", command, o.files.size()));
  if (command == "bench" && o.files.empty()) throw std::runtime_error("bench: expected at least one FILE");
  return o;
}

// The documents of one input: the whole text, or each string of a JSON array.
std::vector<std::string> read_documents(const std::string& path, bool json_array) {
  std::string text = read_input(path);
  if (!json_array) return {std::move(text)};
  llmc::json::Value value;
  try {
    value = llmc::json::parse(text);
  } catch (const llmc::json::JsonError& e) {
    throw std::runtime_error(fmt::format("{}: {}", input_name(path), e.what()));
  }
  if (value.kind != llmc::json::Value::Kind::Array)
    throw std::runtime_error(fmt::format("{}: expected a JSON array of strings", input_name(path)));
  std::vector<std::string> docs;
  for (size_t i = 0; i < value.array.size(); ++i) {
    if (value.array[i].kind != llmc::json::Value::Kind::String)
      throw std::runtime_error(fmt::format("{}: element {} is not a string", input_name(path), i));
    docs.push_back(std::move(value.array[i].string));
  }
  return docs;
}

void write_all(const std::string& bytes) {
  if (std::fwrite(bytes.data(), 1, bytes.size(), stdout) != bytes.size() || std::fflush(stdout) != 0)
    throw std::runtime_error(fmt::format("<stdout>: write error: {}", std::strerror(errno)));
}

int encode_main(const Options& o) {
  const llmc::Tokenizer tokenizer(o.encoder, o.vocab);
  const std::string path = o.files.empty() ? "" : o.files[0];
  const std::vector<std::string> docs = read_documents(path, o.json_array);
  std::vector<int> ids;
  fmt::memory_buffer out;
  for (size_t d = 0; d < docs.size(); ++d) {
    ids.clear();
    try {
      tokenizer.encode(docs[d], ids);
    } catch (const std::invalid_argument& e) {
      if (o.json_array) throw std::runtime_error(fmt::format("{}: element {}: {}", input_name(path), d, e.what()));
      throw std::runtime_error(fmt::format("{}: {}", input_name(path), e.what()));
    }
    for (size_t i = 0; i < ids.size(); ++i) fmt::format_to(std::back_inserter(out), i ? " {}" : "{}", ids[i]);
    out.push_back('\n');
  }
  write_all(fmt::to_string(out));
  return 0;
}

int decode_main(const Options& o) {
  const llmc::Tokenizer tokenizer(o.encoder, o.vocab);
  const std::string path = o.files.empty() ? "" : o.files[0];
  const std::string text = read_input(path);
  std::string bytes;
  size_t count = 0;
  for (size_t pos = 0; pos < text.size();) {
    if (std::isspace(static_cast<unsigned char>(text[pos]))) {
      ++pos;
      continue;
    }
    size_t end = pos;
    while (end < text.size() && !std::isspace(static_cast<unsigned char>(text[end]))) ++end;
    const std::string word = text.substr(pos, end - pos);
    char* stop;
    errno = 0;
    const long id = std::strtol(word.c_str(), &stop, 10);
    if (*stop || errno || word.size() > 9 || id < 0 || id >= tokenizer.vocab_size())
      throw std::runtime_error(fmt::format("{}: token {} ('{}') is not a token id in [0, {})", input_name(path), count,
                                           word.size() > 40 ? word.substr(0, 40) + "..." : word, tokenizer.vocab_size()));
    bytes += tokenizer.token_bytes(int(id));
    ++count;
    pos = end;
  }
  write_all(bytes);
  return 0;
}

// Encodes every document with `threads` fresh threads (so word caches start empty, as a new
// process's would) pulling documents from a shared counter; returns seconds and counts tokens.
double timed_encode(const llmc::Tokenizer& tokenizer, const std::vector<std::string>& docs, int threads, size_t& tokens) {
  std::atomic<size_t> next{0}, total{0};
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      std::vector<int> ids;
      size_t mine = 0;
      for (size_t d; (d = next++) < docs.size();) {
        ids.clear();
        tokenizer.encode(docs[d], ids);
        mine += ids.size();
      }
      total += mine;
    });
  }
  for (auto& t : pool) t.join();
  tokens = total;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int bench_main(Options o) {
  const llmc::Tokenizer tokenizer(o.encoder, o.vocab);
  std::vector<std::string> docs;
  for (const auto& f : o.files) {
    auto more = read_documents(f, o.json_array);
    std::move(more.begin(), more.end(), std::back_inserter(docs));
  }
  size_t bytes = 0;
  for (const auto& d : docs) bytes += d.size();
  if (o.threads.empty()) o.threads = {1, int(std::max(1u, std::thread::hardware_concurrency()))};
  fmt::print("bench: {} documents, {:.2f} MB\n", docs.size(), bytes / 1e6);
  for (const int threads : o.threads) {
    size_t tokens = 0;
    const double seconds = timed_encode(tokenizer, docs, threads, tokens);
    fmt::print("threads={} tokens={} seconds={:.3f} MB/s={:.2f}\n", threads, tokens, seconds, bytes / 1e6 / seconds);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc < 2) {
      std::fputs(kUsage, stderr);
      std::fputs("error: expected a command\n", stderr);
      return 1;
    }
    const std::string command = argv[1];
    if (command == "--help" || command == "-h" || command == "help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (command == "shard") return llmc::shard_main(argc - 1, argv + 1);
    for (int i = 2; i < argc; ++i) {
      if (std::strcmp(argv[i], "--help") == 0) {
        std::fputs(kUsage, stdout);
        return 0;
      }
    }
    if (command == "encode") return encode_main(parse_options(argc, argv, command));
    if (command == "decode") return decode_main(parse_options(argc, argv, command));
    if (command == "bench") return bench_main(parse_options(argc, argv, command));
    throw std::runtime_error(fmt::format("unknown command '{}' (see ./tokenize --help)", command));
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
