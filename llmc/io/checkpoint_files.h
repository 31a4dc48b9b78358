// The files of a checkpoint directory and how they are written, named, verified and retired.
//
// A checkpoint at step k in DIR is DIR/model_%08d.bin, one DIR/state_%08d_%05d.bin per rank and,
// written last, DIR/DONE_%08d. Every file is written crash-safely (write_file_atomically): to
// "<name>.tmp", flushed and fsync'ed, renamed into place, then the directory is fsync'ed, so a
// process killed at any moment (or a machine losing power) leaves either the complete old file,
// the complete new one, or a .tmp that nothing ever reads. Integrity is checked with a 64-bit
// checksum (Checksum64): the state file's header stores its own payload's and the model file's.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace llmc {

// A 64-bit FNV-1a-style hash over 8-byte little-endian words: h = (h ^ word) * prime for every
// full word, the trailing 0..7 bytes packed into one last word together with their count, then a
// SplitMix64 finaliser so that every input bit affects every output bit. Word-wise rather than
// FNV-1a's byte-wise so that hashing a 500 MB checkpoint costs a fraction of writing it. Not a
// cryptographic hash: it detects torn writes and bit rot, not tampering. Streaming: update() may
// be called with any split of the bytes and gives the same result.
class Checksum64 {
 public:
  void update(const void* data, size_t bytes);
  uint64_t digest() const;

 private:
  void mix(uint64_t word) { h_ = (h_ ^ word) * 0x100000001B3ull; }
  uint64_t h_ = 0xCBF29CE484222325ull;
  uint8_t pending_[8] = {};
  size_t pending_bytes_ = 0;
};

// A stdio file that closes itself.
using FileHandle = std::unique_ptr<FILE, int (*)(FILE*)>;
// Opens path for binary reading; throws std::runtime_error "<path>: cannot open: <reason>".
FileHandle open_for_reading(const std::string& path);

uint64_t checksum_of(const void* data, size_t bytes);
// The checksum of a whole file's bytes; throws std::runtime_error naming the file.
uint64_t file_checksum(const std::string& path);

// Writes `path` crash-safely: `write` fills the FILE* of path + ".tmp" (returning false, or a
// failing stdio call, is an error), which is then flushed, fsync'ed, closed, renamed to path, and
// the directory fsync'ed. On any error the .tmp is removed and std::runtime_error names the file
// and the system's reason (e.g. "File too large" under `ulimit -f`, "No space left on device").
// Between the complete .tmp and the rename it calls test_hook_pause_before_rename (llmc/test_hooks.h).
void write_file_atomically(const std::string& path, const std::function<bool(FILE*)>& write);

// Removes path (if present) and fsyncs its directory; throws std::runtime_error naming the file.
void remove_durably(const std::string& path);

std::string checkpoint_model_path(const std::string& dir, int step);
std::string checkpoint_state_path(const std::string& dir, int step, int rank);
std::string checkpoint_done_path(const std::string& dir, int step);

// Steps that have a DONE marker in dir, newest first; throws std::runtime_error naming dir if it
// cannot be listed.
std::vector<int> completed_checkpoints(const std::string& dir);

// Writes DIR/DONE_<step> (its content is the step) crash-safely.
void write_done_marker(const std::string& dir, int step);

// Deletes the complete checkpoints that neither are among the newest `keep_last` (0 = keep all)
// nor fall on a multiple of `major_every` (0 = none is major). The DONE marker goes first, so a
// run killed while deleting leaves an incomplete checkpoint that resume ignores, never a DONE
// marker without its files. State files of ranks from world_size on (a checkpoint written by more
// ranks than this run has) are deleted too. Returns the deleted steps.
std::vector<int> retire_checkpoints(const std::string& dir, int keep_last, int major_every, int world_size);

// Removes the *.tmp files a killed run may have left behind (model_*, state_*, DONE_*, main.log);
// returns how many. They are never read, this only reclaims their space.
int remove_stale_temporaries(const std::string& dir);

}  // namespace llmc
