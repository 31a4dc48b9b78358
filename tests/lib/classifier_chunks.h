// test_gpt2cu's checks of the classifier's chunks of rows (llmc/cuda/forward_backward.cu).
// Every backend the test makes takes chunks of a third of T rows (test_classifier_chunk_rows), so
// that both a training batch (B*T rows) and sampling (T rows) span several chunks, the last one
// shorter where 3 does not divide T; a test whose batch fit in one chunk would prove nothing, so
// check_chunked_classifier first asserts that they span several. The speed switches' variants
// hold the chunked gradients to the CPU oracle; this holds the rest of what the chunks compute to
// it: the logits (copied chunk by chunk), the training loss, every position's loss, and sampling's
// logits from the last chunk.
#pragma once
#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "llmc/cpu/cpu_backend.h"
#include "llmc/cuda/cuda_backend.h"
#include "llmc/cuda/memory_plan.h"

// The rows of a classifier chunk at the test's T: a third of it, at least 1.
inline int test_classifier_chunk_rows(int T) { return std::max(1, T / 3); }

// `chunked`: a backend with test_classifier_chunk_rows(T) rows a chunk, holding the parameters of
// `cpu`. `report` is test_gpt2cu's Report, `rel_l2` its relative L2 distance, `bar` its tensor bar.
template <class Report, class Distance>
void check_chunked_classifier(Report& report, Distance rel_l2, llmc::CudaBackend& chunked, llmc::CpuBackend& cpu,
                              const int* inputs, const int* targets, int B, int T, double bar) {
  const size_t V = size_t(chunked.config().vocab_size), Vp = size_t(chunked.config().padded_vocab_size);
  const size_t BT = size_t(B) * size_t(T);
  const size_t rows = chunked.memory_plan().find(llmc::BufferId::kLogits)->elements / Vp;
  const size_t batch_chunks = (BT + rows - 1) / rows, sample_chunks = (size_t(T) + rows - 1) / rows;
  const bool spans = rows == size_t(test_classifier_chunk_rows(T)) && batch_chunks >= 2 && sample_chunks >= 2;
  report.check(fmt::format("classifier chunks: {} of {} rows (B*T={}), {} sampling", batch_chunks, rows, BT,
                           sample_chunks),
               spans ? 0.0 : 1.0, 0.5, "not spanned");

  const std::vector<float> logits = chunked.forward_logits(inputs, B, T);
  const float* cpu_logits = cpu.forward_logits(inputs, B, T);
  report.check("classifier chunks: logits", rel_l2(logits.data(), cpu_logits, logits.size()), bar, "rel_l2");

  chunked.zero_grad();
  chunked.forward_backward(inputs, targets, B, T, 1.0f);
  report.loss("classifier chunks: loss", chunked.accumulated_loss(), cpu.forward_loss(inputs, targets, B, T));

  std::vector<float> losses(BT), cpu_losses(BT);
  chunked.forward_losses(inputs, targets, B, T, losses.data());
  cpu.forward_losses(inputs, targets, B, T, cpu_losses.data());
  report.check("classifier chunks: forward_losses", rel_l2(losses.data(), cpu_losses.data(), BT), bar, "rel_l2");

  // The whole context of T tokens: its last row lies in the last chunk.
  std::vector<float> next(V), cpu_next(V);
  chunked.next_token_logits(inputs, T, next.data());
  cpu.next_token_logits(inputs, T, cpu_next.data());
  report.check(fmt::format("classifier chunks: next_token_logits (context {})", T),
               rel_l2(next.data(), cpu_next.data(), V), bar, "rel_l2");
}
