#include "llmc/text/tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "llmc/io/json.h"
#include "llmc/text/pretokenize.h"
#include "llmc/text/utf8.h"

namespace llmc {

namespace {

constexpr uint64_t kEmptyKey = ~uint64_t(0);

// The text of one vocabulary file. A missing one is most often a fresh clone before `make setup`,
// which installs GPT-2's vocabulary at the default paths: the error says so.
std::string read_vocabulary_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int error = errno;
    std::string message = fmt::format("{}: cannot open: {}", path, std::strerror(error));
    if (error == ENOENT)
      message += fmt::format(" (GPT-2's vocabulary: `make setup` installs {} and {})", default_encoder_path(),
                             default_vocab_bpe_path());
    throw std::runtime_error(message);
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw std::runtime_error(fmt::format("{}: read error", path));
  return buffer.str();
}

// GPT-2 stores tokens as printable Unicode strings: bytes that are printable Latin-1 characters
// (! .. ~, ¡ .. ¬, ® .. ÿ) stand for themselves, and the other 68 bytes, in increasing order, are
// written as U+0100, U+0101, ... . This returns, for each code point below U+0144, the byte it
// stands for, or -1.
std::vector<int> unicode_to_byte_table() {
  std::vector<int> table(0x144, -1);
  auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); };
  int next_code_point = 0x100;
  for (int b = 0; b < 256; ++b) table[printable(b) ? b : next_code_point++] = b;
  return table;
}

// The raw bytes of a token written in GPT-2's printable form; empty `error` when it is valid.
std::string printable_to_bytes(std::string_view printable, const std::vector<int>& table, std::string& error) {
  std::string bytes;
  if (find_invalid_utf8(printable) != std::string_view::npos) {
    error = "invalid UTF-8";
    return bytes;
  }
  for (size_t pos = 0; pos < printable.size();) {
    size_t length;
    const char32_t cp = decode_utf8(printable, pos, length);
    if (cp >= table.size() || table[cp] < 0) {
      error = fmt::format("character U+{:04X} is not one of GPT-2's byte characters", uint32_t(cp));
      return bytes;
    }
    bytes += char(table[cp]);
    pos += length;
  }
  if (bytes.empty()) error = "empty token";
  return bytes;
}

uint64_t pair_key(int left, int right) { return (uint64_t(uint32_t(left)) << 32) | uint32_t(right); }

uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}

std::atomic<uint64_t> next_serial{1};

// Each thread's memory of the tokens of words it has already encoded. Text repeats words
// constantly, so most pre-tokens are answered here without running BPE. Keys and token ids live
// in two flat arenas; slots hold offsets into them, so a hit allocates nothing.
class WordCache {
 public:
  // Forget everything if the cache holds another Tokenizer's words.
  void claim(uint64_t owner) {
    if (owner_ != owner) {
      clear();
      owner_ = owner;
    }
  }

  // The cached ids of `word` as [begin, end) into ids(), or false.
  bool find(std::string_view word, uint64_t hash, uint32_t& begin, uint32_t& end) const {
    if (slots_.empty()) return false;
    const size_t mask = slots_.size() - 1;
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (s.key_length == 0) return false;
      if (s.hash == hash && std::string_view(keys_.data() + s.key_begin, s.key_length) == word) {
        begin = s.ids_begin;
        end = s.ids_end;
        return true;
      }
    }
  }

  void insert(std::string_view word, uint64_t hash, const int* ids, size_t count) {
    if (keys_.size() + word.size() > kMaxArenaBytes || ids_.size() + count > kMaxArenaBytes / 4) clear();
    if (2 * (used_ + 1) > slots_.size()) {
      if (slots_.size() >= kMaxSlots) clear();
      grow();
    }
    Slot s{hash, uint32_t(keys_.size()), uint32_t(word.size()), uint32_t(ids_.size()), uint32_t(ids_.size() + count)};
    keys_.append(word);
    ids_.insert(ids_.end(), ids, ids + count);
    place(s);
    ++used_;
  }

  const int* ids() const { return ids_.data(); }

 private:
  struct Slot {
    uint64_t hash;
    uint32_t key_begin, key_length;  // key_length 0: empty slot (cached words are never empty)
    uint32_t ids_begin, ids_end;
  };
  static constexpr size_t kMaxSlots = size_t(1) << 21;
  static constexpr size_t kMaxArenaBytes = size_t(256) << 20;

  void clear() {
    slots_.clear();
    keys_.clear();
    ids_.clear();
    used_ = 0;
  }
  void grow() {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(std::max<size_t>(1 << 12, 2 * old.size()), Slot{0, 0, 0, 0, 0});
    for (const Slot& s : old)
      if (s.key_length) place(s);
  }
  void place(const Slot& s) {
    const size_t mask = slots_.size() - 1;
    size_t i = s.hash & mask;
    while (slots_[i].key_length) i = (i + 1) & mask;
    slots_[i] = s;
  }

  uint64_t owner_ = 0;
  std::vector<Slot> slots_;
  std::string keys_;
  std::vector<int> ids_;
  size_t used_ = 0;
};

uint64_t hash_bytes(std::string_view s) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ s.size();
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = mix(h ^ w);
  }
  uint64_t tail = 0;
  std::memcpy(&tail, s.data() + i, s.size() - i);
  return mix(h ^ tail) | 1;
}

// Per-thread scratch space for BPE, reused across calls so that encoding allocates nothing once
// warm.
struct BpeScratch {
  std::vector<int> token, prev, next;
  std::vector<uint64_t> heap;  // (rank << 32 | position), a min-heap
  std::vector<uint32_t> batch;
  std::vector<int> result;
};

}  // namespace

Tokenizer::Tokenizer(const std::string& encoder_json_path, const std::string& vocab_bpe_path)
    : serial_(next_serial++) {
  load_encoder(encoder_json_path);
  load_merges(vocab_bpe_path);
}

void Tokenizer::load_encoder(const std::string& path) {
  const std::string text = read_vocabulary_file(path);
  const std::vector<int> table = unicode_to_byte_table();
  std::vector<std::string> by_id;
  std::vector<bool> seen;
  try {
    size_t pos = json::skip_whitespace(text, 0);
    if (pos >= text.size() || text[pos] != '{') throw json::JsonError(pos, "expected a JSON object");
    pos = json::skip_whitespace(text, pos + 1);
    bool first = true;
    while (pos < text.size() && text[pos] != '}') {
      if (!first) {
        if (text[pos] != ',') throw json::JsonError(pos, "expected ',' or '}'");
        pos = json::skip_whitespace(text, pos + 1);
      }
      first = false;
      const size_t key_offset = pos;
      if (pos >= text.size() || text[pos] != '"') throw json::JsonError(pos, "expected a string key");
      const std::string key = json::parse_string(text, pos);
      pos = json::skip_whitespace(text, pos);
      if (pos >= text.size() || text[pos] != ':') throw json::JsonError(pos, "expected ':'");
      pos = json::skip_whitespace(text, pos + 1);
      const size_t value_offset = pos;
      const json::Value value = json::parse_value(text, pos);
      pos = json::skip_whitespace(text, pos);
      if (value.kind != json::Value::Kind::Number || value.number < 0 || value.number > 1e7 ||
          value.number != double(int(value.number)))
        throw json::JsonError(value_offset, "token id must be an integer in [0, 10000000]");
      std::string error;
      std::string bytes = printable_to_bytes(key, table, error);
      if (!error.empty()) throw json::JsonError(key_offset, fmt::format("token {}: {}", key, error));
      const size_t id = size_t(value.number);
      if (id >= by_id.size()) {
        by_id.resize(id + 1);
        seen.resize(id + 1, false);
      }
      if (seen[id]) throw json::JsonError(value_offset, fmt::format("token id {} appears twice", id));
      seen[id] = true;
      by_id[id] = std::move(bytes);
    }
    if (pos >= text.size()) throw json::JsonError(pos, "unterminated object");
    if (json::skip_whitespace(text, pos + 1) != text.size()) throw json::JsonError(pos + 1, "text after the object");
  } catch (const json::JsonError& e) {
    throw std::runtime_error(fmt::format("{}: {}", path, e.what()));
  }
  for (size_t id = 0; id < by_id.size(); ++id)
    if (!seen[id]) throw std::runtime_error(fmt::format("{}: token id {} is missing (ids must be 0..{})", path, id, by_id.size() - 1));
  token_bytes_ = std::move(by_id);
  std::fill(std::begin(byte_token_), std::end(byte_token_), -1);
  for (size_t id = 0; id < token_bytes_.size(); ++id)
    if (token_bytes_[id].size() == 1) byte_token_[static_cast<unsigned char>(token_bytes_[id][0])] = int(id);
  for (int b = 0; b < 256; ++b)
    if (byte_token_[b] < 0) throw std::runtime_error(fmt::format("{}: no token for the single byte 0x{:02X}", path, b));
}

void Tokenizer::load_merges(const std::string& path) {
  const std::string text = read_vocabulary_file(path);
  const std::vector<int> table = unicode_to_byte_table();
  std::unordered_map<std::string, int> id_of;
  id_of.reserve(token_bytes_.size());
  for (size_t id = 0; id < token_bytes_.size(); ++id) id_of.emplace(token_bytes_[id], int(id));

  std::vector<std::pair<uint64_t, int>> pairs;  // (key, rank) in file order
  size_t line_number = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    // GPT-2's file opens with a "#version: 0.2" line, which OpenAI's loader skips.
    if (line.empty() || (line_number == 1 && line[0] == '#')) continue;
    const size_t space = line.find(' ');
    if (space == std::string_view::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string_view::npos)
      throw std::runtime_error(fmt::format("{}: line {}: expected two tokens separated by one space, got '{}'", path, line_number, line));
    int ids[3];
    const std::string_view parts[2] = {line.substr(0, space), line.substr(space + 1)};
    std::string merged_bytes;
    for (int k = 0; k < 2; ++k) {
      std::string error;
      const std::string bytes = printable_to_bytes(parts[k], table, error);
      if (!error.empty()) throw std::runtime_error(fmt::format("{}: line {}: token '{}': {}", path, line_number, parts[k], error));
      auto it = id_of.find(bytes);
      if (it == id_of.end()) throw std::runtime_error(fmt::format("{}: line {}: token '{}' is not in the encoder", path, line_number, parts[k]));
      ids[k] = it->second;
      merged_bytes += bytes;
    }
    auto it = id_of.find(merged_bytes);
    if (it == id_of.end())
      throw std::runtime_error(fmt::format("{}: line {}: merged token '{}{}' is not in the encoder", path, line_number, parts[0], parts[1]));
    ids[2] = it->second;
    pairs.emplace_back(pair_key(ids[0], ids[1]), int(merges_.size()));
    merges_.push_back(Merge{ids[0], ids[1], ids[2]});
  }

  size_t capacity = 1024;
  while (capacity < 2 * pairs.size()) capacity *= 2;
  pair_keys_.assign(capacity, kEmptyKey);
  pair_ranks_.assign(capacity, -1);
  for (const auto& [key, rank] : pairs) {
    size_t i = mix(key) & (capacity - 1);
    while (pair_keys_[i] != kEmptyKey && pair_keys_[i] != key) i = (i + 1) & (capacity - 1);
    // A pair listed twice keeps its last rank, as a Python dict built from the list would.
    pair_keys_[i] = key;
    pair_ranks_[i] = rank;
  }
}

int Tokenizer::merge_rank(int left, int right) const {
  const uint64_t key = pair_key(left, right);
  const size_t mask = pair_keys_.size() - 1;
  for (size_t i = mix(key) & mask;; i = (i + 1) & mask) {
    if (pair_keys_[i] == key) return pair_ranks_[i];
    if (pair_keys_[i] == kEmptyKey) return -1;
  }
}

int Tokenizer::vocab_size() const { return int(token_bytes_.size()); }

// OpenAI's algorithm: repeatedly take the adjacent pair with the lowest merge rank and merge all
// its occurrences, left to right, without overlaps ("a a a" -> "aa a"). Rescanning the word after
// every merge is quadratic, which hurts on long pre-tokens, so this keeps the tokens in a linked
// list and candidate pairs in a min-heap keyed by (rank, position). One round pops every entry of
// the lowest rank, which come out in position order, and merges each one that is still current.
// Pairs created by a round can never have the round's own rank (the merged token differs from
// both of its parts), so a round sees exactly the occurrences OpenAI's scan would; heap entries
// left stale by earlier merges are recognised because their tokens no longer match the rank.
void Tokenizer::bpe(std::string_view piece, std::vector<int>& out) const {
  thread_local BpeScratch s;
  const int n = int(piece.size());
  s.token.resize(n);
  s.prev.resize(n);
  s.next.resize(n);
  s.heap.clear();
  for (int i = 0; i < n; ++i) {
    s.token[i] = byte_token_[static_cast<unsigned char>(piece[i])];
    s.prev[i] = i - 1;
    s.next[i] = i + 1;
  }
  const auto greater = std::greater<uint64_t>();
  auto push_pair = [&](int i) {
    const int j = s.next[i];
    if (j >= n) return;
    const int rank = merge_rank(s.token[i], s.token[j]);
    if (rank < 0) return;
    s.heap.push_back((uint64_t(rank) << 32) | uint32_t(i));
    std::push_heap(s.heap.begin(), s.heap.end(), greater);
  };
  for (int i = 0; i + 1 < n; ++i) push_pair(i);

  while (!s.heap.empty()) {
    const uint64_t rank = s.heap.front() >> 32;
    s.batch.clear();
    while (!s.heap.empty() && (s.heap.front() >> 32) == rank) {
      s.batch.push_back(uint32_t(s.heap.front()));
      std::pop_heap(s.heap.begin(), s.heap.end(), greater);
      s.heap.pop_back();
    }
    const Merge& m = merges_[rank];
    for (const uint32_t i : s.batch) {
      // A merged-away token has prev == -2; the pair must still be (left, right).
      if (s.prev[i] == -2 || s.token[i] != m.left) continue;
      const int j = s.next[i];
      if (j >= n || s.token[j] != m.right) continue;
      s.token[i] = m.merged;
      s.next[i] = s.next[j];
      if (s.next[j] < n) s.prev[s.next[j]] = int(i);
      s.prev[j] = -2;
      if (s.prev[i] >= 0) push_pair(s.prev[i]);
      push_pair(int(i));
    }
  }
  for (int i = 0; i < n; i = s.next[i]) out.push_back(s.token[i]);
}

void Tokenizer::encode(std::string_view text, std::vector<int>& out) const {
  const size_t bad = find_invalid_utf8(text);
  if (bad != std::string_view::npos)
    throw std::invalid_argument(fmt::format("invalid UTF-8 at byte offset {}", bad));
  thread_local WordCache cache;
  cache.claim(serial_);
  thread_local std::vector<int> fresh;
  for (size_t pos = 0; pos < text.size();) {
    const size_t end = pretoken_end(text, pos);
    const std::string_view piece = text.substr(pos, end - pos);
    pos = end;
    if (piece.size() == 1) {
      out.push_back(byte_token_[static_cast<unsigned char>(piece[0])]);
      continue;
    }
    const uint64_t hash = hash_bytes(piece);
    uint32_t begin, stop;
    if (cache.find(piece, hash, begin, stop)) {
      out.insert(out.end(), cache.ids() + begin, cache.ids() + stop);
      continue;
    }
    fresh.clear();
    bpe(piece, fresh);
    cache.insert(piece, hash, fresh.data(), fresh.size());
    out.insert(out.end(), fresh.begin(), fresh.end());
  }
}

std::vector<int> Tokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  encode(text, ids);
  return ids;
}

const std::string& Tokenizer::token_bytes(int id) const {
  if (id < 0 || id >= vocab_size())
    throw std::out_of_range(fmt::format("token id {} is out of range [0, {})", id, vocab_size()));
  return token_bytes_[id];
}

std::string Tokenizer::decode(const std::vector<int>& ids) const {
  std::string text;
  for (const int id : ids) text += token_bytes(id);
  return text;
}

std::string default_encoder_path() { return "data/encoder.json"; }
std::string default_vocab_bpe_path() { return "data/vocab.bpe"; }

}  // namespace llmc
