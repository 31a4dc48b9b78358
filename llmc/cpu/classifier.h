// Softmax cross-entropy over the real vocabulary, fused with its backward pass. logits are N x Vp
// (Vp = padded vocabulary); only the first V columns are real tokens, the padded columns get zero
// probability and zero gradient.
#pragma once

namespace llmc {

// losses[n] = -log softmax(logits[n, :V])[targets[n]] (computed in double).
void classifier_forward(float* losses, const float* logits, const int* targets, int N, int V, int Vp);

// Same losses; additionally overwrites logits in place with d(dloss * sum_n losses[n]) / dlogits
// = dloss * (softmax - onehot(target)), and 0 in the padded columns.
void classifier_forward_backward(float* losses, float* logits, const int* targets, int N, int V, int Vp,
                                 float dloss);

}  // namespace llmc
