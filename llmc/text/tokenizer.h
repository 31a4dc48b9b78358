// GPT-2's byte-level BPE tokenizer: the pre-tokenizer (llmc/text/pretokenize.h) splits text into
// pieces, each piece's UTF-8 bytes start as one token per byte, and BPE merges adjacent tokens,
// lowest merge rank first, as OpenAI's Python encoder does. Algorithm notes: docs/tokenizer.md.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace llmc {

class Tokenizer {
 public:
  static constexpr int kEndOfText = 50256;
  // Loads GPT-2's encoder.json and vocab.bpe; throws std::runtime_error naming the file and the problem.
  Tokenizer(const std::string& encoder_json_path, const std::string& vocab_bpe_path);
  int vocab_size() const;  // 50257 for GPT-2
  // Appends the ids of UTF-8 `text` to `out`. Safe to call concurrently from many threads on one
  // Tokenizer (const; any merge cache is per thread). Invalid UTF-8 throws std::invalid_argument
  // whose message gives the byte offset.
  void encode(std::string_view text, std::vector<int>& out) const;
  std::vector<int> encode(std::string_view text) const;
  const std::string& token_bytes(int id) const;  // throws std::out_of_range naming the id
  std::string decode(const std::vector<int>& ids) const;  // raw bytes, may be invalid UTF-8

 private:
  struct Merge {
    int left;
    int right;
    int merged;
  };

  void load_encoder(const std::string& path);
  void load_merges(const std::string& path);
  // The rank of merging tokens (left, right), or -1 if they never merge.
  int merge_rank(int left, int right) const;
  // Appends the BPE tokens of one pre-token (at least 2 bytes long).
  void bpe(std::string_view piece, std::vector<int>& out) const;

  std::vector<std::string> token_bytes_;  // id -> raw bytes
  int byte_token_[256];                   // byte -> id of the one-byte token
  std::vector<Merge> merges_;             // by rank
  // Open-addressing hash table from the pair key (left << 32 | right) to its rank; the capacity
  // is a power of two at least twice the number of merges, so probes stay short.
  std::vector<uint64_t> pair_keys_;
  std::vector<int> pair_ranks_;
  uint64_t serial_;  // tells the per-thread caches which Tokenizer they hold words of
};

// "data/encoder.json" and "data/vocab.bpe" relative to the repo root (the default vocabulary location).
std::string default_encoder_path();
std::string default_vocab_bpe_path();

}  // namespace llmc
