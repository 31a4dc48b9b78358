// Packing a gradient bucket's spans into one contiguous buffer and back (llmc/cuda/copy_spans.cuh),
// checked against host copies, then timed.
// The versions: kVersions at the end (or --help).
#include <algorithm>

#include "dev/cuda/common.cuh"
#include "llmc/cuda/copy_spans.cuh"

using llmc::floatX;

namespace {

// Spans of the given counts laid over a flat buffer with a gap of `gap` elements before each (the
// parts of tensors a bucket does not cover), packed back to back.
std::vector<llmc::CopySpan> spans_of(const std::vector<size_t>& counts, size_t gap) {
  std::vector<llmc::CopySpan> spans;
  size_t flat = 0, packed = 0;
  for (size_t count : counts) {
    flat += gap;
    spans.push_back({flat, packed, count});
    flat += count;
    packed += count;
  }
  return spans;
}

bool run_case(const bench::Args& args, const std::string& name, const std::vector<llmc::CopySpan>& spans, bool timed) {
  const std::string tag = "copy_spans " + name + " ";
  bool ok = true;
  size_t flat_n = 0, packed_n = 0, largest = 0;
  for (const auto& s : spans) {
    flat_n = std::max(flat_n, s.buffer_offset + s.count);
    packed_n = std::max(packed_n, s.packed_offset + s.count);
    largest = std::max(largest, s.count);
  }
  const auto flat = bench::round_through<floatX>(bench::random_vector(flat_n, 71));
  const auto packed = bench::round_through<floatX>(bench::random_vector(packed_n, 72));
  std::vector<float> packed_ref(packed_n), flat_ref = flat;
  for (const auto& s : spans)
    for (size_t i = 0; i < s.count; ++i) {
      packed_ref[s.packed_offset + i] = flat[s.buffer_offset + i];
      flat_ref[s.buffer_offset + i] = packed[s.packed_offset + i];
    }

  floatX* d_flat = bench::to_device<floatX>(flat);
  floatX* d_packed = bench::to_device<floatX>(packed);
  llmc::CopySpan* d_spans = nullptr;
  CUDA_CHECK(cudaMalloc(&d_spans, spans.size() * sizeof(llmc::CopySpan)));
  CUDA_CHECK(cudaMemcpy(d_spans, spans.data(), spans.size() * sizeof(llmc::CopySpan), cudaMemcpyHostToDevice));
  const int num = int(spans.size());

  if (bench::selected(args, "pack")) {
    bench::poison(d_packed, packed_n * sizeof(floatX));
    llmc::copy_spans(d_flat, d_packed, d_spans, num, largest, true, 0);
    ok &= bench::check(tag + "pack", bench::from_device(d_packed, packed_n), packed_ref, 1e-12);
  }
  if (bench::selected(args, "unpack")) {
    bench::upload(d_packed, packed);
    llmc::copy_spans(d_flat, d_packed, d_spans, num, largest, false, 0);
    ok &= bench::check(tag + "unpack (gaps untouched)", bench::from_device(d_flat, flat_n), flat_ref, 1e-12);
  }
  if (timed && !args.check_only && ok) {
    const double bytes = 2.0 * packed_n * sizeof(floatX);  // each packed element read once, written once
    for (const bool to_packed : {true, false}) {
      const std::string v = to_packed ? "pack" : "unpack";
      if (bench::selected(args, v))
        bench::report(tag + v,
                      bench::time_ms([&] { llmc::copy_spans(d_flat, d_packed, d_spans, num, largest, to_packed, 0); }),
                      bytes, 0);
    }
  }
  bench::free_device({d_flat, d_packed, d_spans});
  return ok;
}

bool run(const bench::Args& args) {
  bool ok = true;
  if (!args.small) {
    // One layer's gradients at C channels: ln1, qkv, attproj, ln2, fc, fcproj weights and biases.
    const size_t C = size_t(args.dim("-C"));
    ok &= run_case(args, fmt::format("layer C={}", C),
                   spans_of({C, C, 3 * C * C, 3 * C, C * C, C, C, C, 4 * C * C, 4 * C, 4 * C * C, C}, 0), true);
  }
  if (args.shape_given) return ok;  // a shape of one's own: that shape alone
  // Small spans with gaps: fewer elements than a block, one block row per span, and one span long
  // enough for several blocks per row.
  ok &= run_case(args, "small", spans_of({8, 96, 24, 264, 8, 40, 1600, 8}, 16), false);
  ok &= run_case(args, "long", spans_of({8, 300000, 96}, 24), false);
  return ok;
}

}  // namespace

const std::vector<bench::VersionInfo> kVersions = {
    {"pack", "flat -> packed: every span to its place in the packed buffer"},
    {"unpack", "packed -> flat: back into the flat gradients, leaving the gaps between spans untouched"},
};

int main(int argc, char** argv) {
  // GPT-2 124M's layer.
  const std::vector<bench::Dim> shape = {{"-C", "channels", 768}};
  return bench::run_main(argc, argv, shape, kVersions, run);
}
