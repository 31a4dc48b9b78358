#include "llmc/data/hellaswag.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include <fmt/format.h>

namespace llmc {

namespace {

constexpr int kHeaderInts = 256;
constexpr uint16_t kExampleDelimiter = 65535;
constexpr size_t kRecordFixedWords = 6;  // delimiter, length, index, label, completions, context length

// Reads one example's record, which starts at words[0] and may run to words[available - 1].
EvalExample parse_record(const uint16_t* words, size_t available, int expected_index, int vocab_size,
                         const std::string& path, size_t& record_words) {
  const std::string where = fmt::format("{}: example {}", path, expected_index);
  if (available < kRecordFixedWords)
    throw std::runtime_error(fmt::format("{}: file ends inside the record header", where));
  if (words[0] != kExampleDelimiter)
    throw std::runtime_error(fmt::format("{}: start delimiter is {}, expected {}", where, words[0], kExampleDelimiter));
  const size_t record_bytes = words[1];
  if (record_bytes % 2 != 0 || record_bytes < 2 * kRecordFixedWords)
    throw std::runtime_error(fmt::format("{}: record length {} bytes is odd or too short", where, record_bytes));
  record_words = record_bytes / 2;
  if (record_words > available)
    throw std::runtime_error(fmt::format("{}: record length {} bytes runs past the end of the file", where, record_bytes));

  EvalExample ex;
  ex.index = words[2];
  ex.label = words[3];
  const int num_completions = words[4];
  if (ex.index != expected_index)
    throw std::runtime_error(fmt::format("{}: record carries index {}", where, ex.index));
  if (num_completions < 1)
    throw std::runtime_error(fmt::format("{}: has no completions", where));
  if (ex.label >= num_completions)
    throw std::runtime_error(fmt::format("{}: label {} is not below its {} completions", where, ex.label, num_completions));

  size_t pos = 5;  // at the context length
  // Reads a length-prefixed token list that must lie inside the record.
  auto read_tokens = [&](const std::string& what) {
    if (pos >= record_words)
      throw std::runtime_error(fmt::format("{}: record ends before the length of the {}", where, what));
    const size_t n = words[pos++];
    if (n == 0) throw std::runtime_error(fmt::format("{}: the {} is empty", where, what));
    if (n > record_words - pos)
      throw std::runtime_error(fmt::format("{}: the {}'s {} tokens run past the record's end", where, what, n));
    std::vector<int> tokens(words + pos, words + pos + n);
    pos += n;
    for (int t : tokens)
      if (t >= vocab_size)
        throw std::runtime_error(fmt::format("{}: the {} has token {}, not below vocab size {}", where, what, t, vocab_size));
    return tokens;
  };
  ex.context = read_tokens("context");
  for (int c = 0; c < num_completions; ++c) ex.completions.push_back(read_tokens(fmt::format("completion {}", c)));
  if (pos != record_words)
    throw std::runtime_error(fmt::format("{}: record length says {} bytes, its contents take {}", where, record_bytes, 2 * pos));
  return ex;
}

}  // namespace

std::vector<EvalExample> read_eval_file(const std::string& path, int vocab_size) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec))
    throw std::runtime_error(fmt::format("{}: not a regular file", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot open", path));
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw std::runtime_error(fmt::format("{}: read error", path));
  if (bytes.size() < kHeaderInts * 4)
    throw std::runtime_error(fmt::format("{}: {} bytes, shorter than the {}-byte header", path, bytes.size(), kHeaderInts * 4));
  int32_t header[kHeaderInts];
  std::memcpy(header, bytes.data(), sizeof header);
  if (header[0] != kEvalMagic)
    throw std::runtime_error(fmt::format("{}: bad magic {} (an eval file has {})", path, header[0], kEvalMagic));
  if (header[1] != kEvalVersion)
    throw std::runtime_error(fmt::format("{}: unsupported version {} (expected {})", path, header[1], kEvalVersion));
  const int num_examples = header[2];
  if (num_examples < 1) throw std::runtime_error(fmt::format("{}: header says {} examples", path, num_examples));
  const size_t body_bytes = bytes.size() - sizeof header;
  if (body_bytes % 2 != 0) throw std::runtime_error(fmt::format("{}: odd number of bytes after the header", path));

  std::vector<uint16_t> words(body_bytes / 2);
  std::memcpy(words.data(), bytes.data() + sizeof header, body_bytes);
  std::vector<EvalExample> examples;
  size_t pos = 0, longest_bytes = 0;
  for (int i = 0; i < num_examples; ++i) {
    size_t record_words = 0;
    examples.push_back(parse_record(words.data() + pos, words.size() - pos, i, vocab_size, path, record_words));
    pos += record_words;
    longest_bytes = std::max(longest_bytes, 2 * record_words);
  }
  if (pos != words.size())
    throw std::runtime_error(fmt::format("{}: {} bytes after the last of the {} examples the header announces", path,
                                         2 * (words.size() - pos), num_examples));
  if (size_t(header[3]) != longest_bytes)
    throw std::runtime_error(fmt::format("{}: header says the longest example has {} bytes, it has {}", path, header[3],
                                         longest_bytes));
  return examples;
}

int eval_rows_length(const EvalExample& example) {
  size_t longest = 0;
  for (const auto& completion : example.completions) longest = std::max(longest, completion.size());
  return int(example.context.size() + longest) - 1;
}

EvalRows build_eval_rows(const EvalExample& example, int T, int pad_token) {
  if (eval_rows_length(example) > T)
    throw std::invalid_argument(fmt::format("eval example {}: context and completion need {} positions, more than T = {}",
                                            example.index, eval_rows_length(example), T));
  EvalRows r;
  r.rows = int(example.completions.size());
  r.T = T;
  r.inputs.assign(size_t(r.rows) * T, pad_token);
  r.targets.assign(size_t(r.rows) * T, pad_token);
  r.mask.assign(size_t(r.rows) * T, 0);
  const int n_context = int(example.context.size());
  for (int c = 0; c < r.rows; ++c) {
    std::vector<int> row = example.context;
    row.insert(row.end(), example.completions[c].begin(), example.completions[c].end());
    const size_t base = size_t(c) * T;
    for (size_t p = 0; p + 1 < row.size(); ++p) {
      r.inputs[base + p] = row[p];
      r.targets[base + p] = row[p + 1];
      // The target at p is completion token p + 1 - n_context, the first one predicted from the
      // last context token.
      r.mask[base + p] = int(p) + 1 >= n_context ? 1 : 0;
    }
  }
  return r;
}

int predict_completion(const EvalRows& rows, const float* losses) {
  int best = 0;
  double best_loss = 0;
  for (int c = 0; c < rows.rows; ++c) {
    double sum = 0;
    int count = 0;
    for (int p = 0; p < rows.T; ++p) {
      const size_t i = size_t(c) * rows.T + p;
      if (rows.mask[i]) {
        sum += losses[i];
        ++count;
      }
    }
    const double mean = count > 0 ? sum / count : 0.0;
    if (c == 0 || mean < best_loss) {
      best = c;
      best_loss = mean;
    }
  }
  return best;
}

}  // namespace llmc
