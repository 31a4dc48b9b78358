// Picks the next token from logits: softmax(logits / temperature), optionally restricted to the
// top_k largest logits, sampled by inverting the cumulative distribution at `coin` (uniform in
// [0, 1), from the caller's Rng so that sampling is reproducible and resumable).
#pragma once

namespace llmc {

// temperature 0 = greedy (the first largest logit); top_k 0 or >= n = the whole vocabulary.
// Returns an index in [0, n).
int sample_token(const float* logits, int n, float temperature, int top_k, float coin);

}  // namespace llmc
