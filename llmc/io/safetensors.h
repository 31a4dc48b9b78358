// Reader and writer of the safetensors format (Hugging Face's tensor container):
//   8 bytes   N, the header length, unsigned little-endian
//   N bytes   a JSON object: {"<name>": {"dtype": "F32", "shape": [d0, d1, ...],
//             "data_offsets": [begin, end]}, ..., "__metadata__": {"<key>": "<string>", ...}}
//             (may end in spaces, which writers use to align the data)
//   the rest  the byte buffer; each tensor is bytes [begin, end) of it, row-major, little-endian.
// The reader trusts nothing: every offset, size, shape and dtype is checked, the tensors must tile
// the buffer exactly (no overlap, no hole, nothing after the last one), names must be unique, and
// every error names the file and the tensor.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace llmc {

enum class DType { F32, BF16, F16 };

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);  // "F32", "BF16", "F16" as written in the header

struct SafeTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<size_t> shape;
  size_t begin = 0, end = 0;  // byte range in the data buffer
  size_t numel() const;       // product of shape (1 for a scalar)
};

struct SafeTensorsFile {
  std::string path;                             // for error messages
  std::vector<SafeTensor> tensors;              // in the order of their data
  std::map<std::string, std::string> metadata;  // "__metadata__"
  std::vector<char> data;                       // the byte buffer after the header

  // The tensor named `name`, or nullptr.
  const SafeTensor* find(const std::string& name) const;
  // The tensor's values converted to fp32 (bf16 and f16 widen exactly).
  std::vector<float> to_float(const SafeTensor& tensor) const;
};

// Reads and checks a whole file; throws std::runtime_error naming the file (and tensor).
SafeTensorsFile read_safetensors(const std::string& path);

// A tensor to write: `data` holds numel(shape) * dtype_size(dtype) bytes in the dtype's layout.
struct TensorToWrite {
  std::string name;
  DType dtype = DType::F32;
  std::vector<size_t> shape;
  const void* data = nullptr;
};

// Writes the header (padded with spaces to a multiple of 8 bytes, so every tensor starts 8-byte
// aligned when the tensors' sizes are multiples of 8), then the tensors in the given order, each
// streamed from its own buffer. Atomic: path + ".tmp", then rename. Throws on a duplicate or
// empty name, the reserved name "__metadata__", or a missing data pointer.
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata);

// IEEE half precision to fp32 (exact: every f16 value, subnormals, inf and NaN included).
float f16_to_float(uint16_t h);

}  // namespace llmc
