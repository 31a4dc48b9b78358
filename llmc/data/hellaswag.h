// llm.c's multiple-choice eval file (HellaSwag; written by scripts/hellaswag_to_evalfile.py) and
// its scoring.
//
// File layout, all little-endian:
//   256 int32 header: [0] = 20240522 (magic), [1] = 1 (version), [2] = number of examples,
//                     [3] = the longest example record in bytes
//   then per example a record of uint16 values:
//     65535 (start-of-example delimiter), record length in bytes (delimiter included),
//     example index (0, 1, 2, ... in file order), label (index of the right completion),
//     number of completions, context length, context tokens,
//     then per completion: its length, its tokens.
//
// Scoring: each completion becomes one row "context + completion"; the model's cross-entropy at
// the positions whose target is a completion token is averaged per row, and the row with the
// lowest mean loss is the prediction (ties: the lowest index). This is llm.c's C evaluation and
// the "acc_norm" of its dev/data/hellaswag.py (the length-normalised likelihood).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace llmc {

constexpr int32_t kEvalMagic = 20240522;
constexpr int32_t kEvalVersion = 1;

struct EvalExample {
  int index = 0;
  int label = 0;
  std::vector<int> context;
  std::vector<std::vector<int>> completions;
};

// Reads and validates the whole file: magic, version, example count, the longest-record field,
// every delimiter, record length, index and label, non-empty context and completions, tokens
// below vocab_size, and nothing after the last record. Errors name the file and the example.
std::vector<EvalExample> read_eval_file(const std::string& path, int vocab_size = 50257);

// One example as completions.size() rows of T positions. Row c holds the tokens
// context + completions[c]; position p has input token p and target token p + 1, and
// mask = 1 exactly where that target is a completion token. Positions past the row's end are
// padding (input and target `pad_token`, mask 0). Needs context + completion - 1 <= T.
struct EvalRows {
  int rows = 0, T = 0;
  std::vector<int> inputs, targets;  // rows * T
  std::vector<uint8_t> mask;         // rows * T
};
EvalRows build_eval_rows(const EvalExample& example, int T, int pad_token = 50256);

// The longest row of the example: the T that fits all its rows.
int eval_rows_length(const EvalExample& example);

// The predicted completion from the per-position losses (rows * T, same layout as the rows): the
// row with the lowest mean loss over its masked positions, the first on ties.
int predict_completion(const EvalRows& rows, const float* losses);

}  // namespace llmc
