// `megaton preprocess`: JSONL (.jsonl, .jsonl.gz, .jsonl.xz) -> one Megatron .bin/.idx pair per JSON key, named
// {output_prefix}_{key}_document. A reader thread cuts the input into ~1 MiB chunks of whole lines, `workers`
// threads parse + tokenize them (each with its own Tokenizer clone), and the calling thread writes the results in
// input order. Memory is bounded by the chunks in flight (4 per worker), not by the input size; the index arrays
// grow by 12 bytes per document as in Megatron.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "core/log.h"
#include "data/tokenizer.h"

namespace megaton::data {

struct PreprocessOptions {
  std::string input;
  std::string output_prefix;
  std::vector<std::string> json_keys{"text"};
  bool append_eod = false;
  bool skip_bad_lines = false;
  int workers = 1;
  int64_t log_interval = 100;    // documents between progress lines (at most one line per second)
  size_t chunk_bytes = 1 << 20;  // lines are handed to workers in chunks of about this size
};

struct PreprocessStats {
  int64_t lines = 0;
  int64_t documents = 0;                 // lines that produced at least one non-empty item
  int64_t empty_skipped = 0;             // (line, key) pairs whose text tokenized to nothing: no item, as in Megatron
  int64_t empty_kept = 0;                // the same with several --json-keys: an empty document keeps the keys aligned
  int64_t blank_lines = 0;               // whitespace-only lines, ignored
  int64_t bad_lines = 0;                 // malformed lines skipped under --skip-bad-lines
  std::vector<int64_t> first_bad_lines;  // up to 10 line numbers
  int64_t tokens = 0;
  uint64_t bytes = 0;  // decompressed input bytes
  double seconds = 0.0;
  std::vector<std::string> outputs;  // the prefixes written
};

/// The output prefix for one key: "{prefix}_{key}_document".
std::string output_prefix_for_key(const std::string& prefix, const std::string& key);

/// Runs the pipeline. `tokenizer` is cloned per worker. Throws DataError naming "file:line" and the reason at the
/// first malformed line (unless skip_bad_lines); on any failure no output pair is published.
PreprocessStats preprocess_jsonl(const PreprocessOptions& opts, const Tokenizer& tokenizer, const Logger& log);

}  // namespace megaton::data
