// Packing a gradient bucket's spans into one contiguous buffer and back (llmc/cuda/copy_spans.cuh),
// checked against host copies, then timed.
// The versions: kVersions below (or --help).
#include <algorithm>

#include "dev/cuda/versions.cuh"
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

// The flat gradients, the packed buffer, the spans between them and the host's copies.
struct Data {
  std::vector<llmc::CopySpan> spans;
  size_t flat_n, packed_n, largest;
  floatX *flat, *packed;
  llmc::CopySpan* device_spans;
  std::vector<float> flat0, packed0, flat_ref, packed_ref;
};

// One thread per element of a span row; the block size is copy_spans.cuh's own.
template <bool kToPacked>
void copy(Data& d, int) {
  llmc::copy_spans(d.flat, d.packed, d.device_spans, int(d.spans.size()), d.largest, kToPacked, 0);
}

// Each packed element read once and written once.
bench::Cost cost(const Data& d) { return {2.0 * d.packed_n * sizeof(floatX)}; }

using Version = bench::Version<Data>;

bool check_pack(Data& d, const Version& v, const std::string& tag, int block) {
  bench::poison(d.packed, d.packed_n * sizeof(floatX));
  v.launch(d, block);
  return bench::check(tag, bench::from_device(d.packed, d.packed_n), d.packed_ref, 1e-12);
}

bool check_unpack(Data& d, const Version& v, const std::string& tag, int block) {
  bench::upload(d.packed, d.packed0);
  bench::upload(d.flat, d.flat0);
  v.launch(d, block);
  return bench::check(tag + " (gaps untouched)", bench::from_device(d.flat, d.flat_n), d.flat_ref, 1e-12);
}

const std::vector<Version> kVersions = {
    {"pack", "flat -> packed: every span to its place in the packed buffer", {}, copy<true>, check_pack, cost},
    {"unpack", "packed -> flat: back into the flat gradients, leaving the gaps between spans untouched", {},
     copy<false>, check_unpack, cost},
};

bool run_case(const bench::Args& args, const std::string& name, const std::vector<llmc::CopySpan>& spans, bool timed) {
  Data d{};
  d.spans = spans;
  for (const auto& s : spans) {
    d.flat_n = std::max(d.flat_n, s.buffer_offset + s.count);
    d.packed_n = std::max(d.packed_n, s.packed_offset + s.count);
    d.largest = std::max(d.largest, s.count);
  }
  d.flat0 = bench::round_through<floatX>(bench::random_vector(d.flat_n, 71));
  d.packed0 = bench::round_through<floatX>(bench::random_vector(d.packed_n, 72));
  d.packed_ref.resize(d.packed_n);
  d.flat_ref = d.flat0;
  for (const auto& s : spans)
    for (size_t i = 0; i < s.count; ++i) {
      d.packed_ref[s.packed_offset + i] = d.flat0[s.buffer_offset + i];
      d.flat_ref[s.buffer_offset + i] = d.packed0[s.packed_offset + i];
    }

  d.flat = bench::to_device<floatX>(d.flat0);
  d.packed = bench::to_device<floatX>(d.packed0);
  CUDA_CHECK(cudaMalloc(&d.device_spans, spans.size() * sizeof(llmc::CopySpan)));
  CUDA_CHECK(cudaMemcpy(d.device_spans, spans.data(), spans.size() * sizeof(llmc::CopySpan), cudaMemcpyHostToDevice));
  const bool ok = bench::run_versions(args, kVersions, d, "copy_spans " + name + " ", timed);
  bench::free_device({d.flat, d.packed, d.device_spans});
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

int main(int argc, char** argv) {
  // GPT-2 124M's layer.
  const std::vector<bench::Dim> shape = {{"-C", "channels", 768}};
  return bench::run_main(argc, argv, shape, bench::infos(kVersions), run);
}
