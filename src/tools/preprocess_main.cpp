// megaton preprocess: Megatron's tools/preprocess_data.py — JSONL -> {output_prefix}_{key}_document.bin/.idx.
#include <cstdio>
#include <iostream>

#include "cli/parser.h"
#include "core/error.h"
#include "core/log.h"
#include "data/indexed_dataset.h"
#include "data/preprocess.h"
#include "data/tokenizer.h"
#include "tools/subcommands.h"

namespace megaton::tools {

namespace po = boost::program_options;

int run_preprocess(int argc, const char* const* argv) {
  data::PreprocessOptions o;
  std::string tokenizer_type, vocab_file, merge_file, name_or_path, dataset_impl = "mmap", log_level = "info";
  bool split_sentences = false, keep_newlines = false;
  int vocab_extra_ids = 0;
  po::options_description d;
  d.add_options()("input", po::value(&o.input)->required(),
                  "input JSONL file (.jsonl, .jsonl.gz or .jsonl.xz), one object per line")(
      "output-prefix", po::value(&o.output_prefix)->required(), "writes PREFIX_{key}_document.bin/.idx")(
      "json-keys", po::value(&o.json_keys)->multitoken(), "keys to extract (default: text)")(
      "tokenizer-type", po::value(&tokenizer_type)->required(), "GPT2BPETokenizer | PretrainedFromHF")(
      "vocab-file", po::value(&vocab_file), "GPT-2 vocab.json / encoder.json")("merge-file", po::value(&merge_file),
                                                                               "GPT-2 merges.txt / vocab.bpe")(
      "tokenizer-name-or-path", po::value(&name_or_path), "directory with a Hugging Face tokenizer.json")(
      "append-eod", po::bool_switch(&o.append_eod), "append the end-of-document token to every document")(
      "dataset-impl", po::value(&dataset_impl), "mmap (the only format written)")("workers", po::value(&o.workers),
                                                                                  "tokenizer threads (default 1)")(
      "log-interval", po::value(&o.log_interval), "documents between progress lines (default 100; at most 1/s)")(
      "skip-bad-lines", po::bool_switch(&o.skip_bad_lines), "skip and count malformed lines instead of stopping")(
      "split-sentences", po::bool_switch(&split_sentences), "not supported (Megatron uses NLTK punkt)")(
      "keep-newlines", po::bool_switch(&keep_newlines), "only meaningful with --split-sentences")(
      "vocab-extra-ids", po::value(&vocab_extra_ids), "T5 sentinels; must be 0")("log-level", po::value(&log_level),
                                                                                 "debug | info | warning | error");
  if (!cli::parse_args("preprocess", "Tokenize JSONL into Megatron-compatible .bin/.idx datasets.", argc, argv, d,
                       std::cout))
    return 0;
  MEGATON_CHECK(!split_sentences, UsageError,
                "--split-sentences is not supported by megaton preprocess (Megatron splits with NLTK punkt); "
                "preprocess one document per line, or split sentences beforehand and write one per JSON line");
  MEGATON_CHECK(dataset_impl == "mmap", UsageError, "--dataset-impl ", dataset_impl,
                " is not supported; only mmap (MMapIndexedDataset) is written");
  MEGATON_CHECK(vocab_extra_ids == 0, UsageError, "--vocab-extra-ids is not supported (T5 only)");
  if (o.json_keys.empty()) o.json_keys = {"text"};
  const Logger log(0, 1, parse_log_level(log_level));
  auto tok = data::make_tokenizer(tokenizer_type, vocab_file, merge_file, name_or_path);
  log.info("preprocess: ", o.input, " -> ", o.output_prefix, "_{", o.json_keys.size() == 1 ? o.json_keys[0] : "...",
           "}_document, tokenizer ", tok->name(), " (vocab ", tok->vocab_size(), ", ",
           data::dtype_name(data::best_fitting_dtype_code(tok->vocab_size())), " tokens), ", o.workers, " workers");
  const data::PreprocessStats s = data::preprocess_jsonl(o, *tok, log);
  const double secs = std::max(s.seconds, 1e-9);
  char rates[160];
  std::snprintf(rates, sizeof rates, "%.2f MB in %.1f s (%.0f docs/s, %.2f MB/s, %.0f tokens/s)", s.bytes / 1e6,
                s.seconds, s.documents / secs, s.bytes / 1e6 / secs, s.tokens / secs);
  log.info("preprocess: done: ", s.documents, " documents, ", s.tokens, " tokens, ", rates);
  if (s.empty_skipped) log.info("preprocess: ", s.empty_skipped, " empty texts produced no item (as in Megatron)");
  if (s.empty_kept)
    log.info("preprocess: ", s.empty_kept, " empty texts produced empty documents (so that the keys' datasets stay ",
             "aligned line by line)");
  if (s.blank_lines) log.info("preprocess: ", s.blank_lines, " blank lines ignored");
  if (s.bad_lines) {
    std::string first;
    for (int64_t l : s.first_bad_lines) first += str(first.empty() ? "" : ", ", l);
    log.warn("preprocess: skipped ", s.bad_lines, " malformed lines (--skip-bad-lines); first: ", o.input, " lines ",
             first);
  }
  for (const auto& p : s.outputs) log.info("preprocess: wrote ", p, ".bin / ", p, ".idx");
  return 0;
}

}  // namespace megaton::tools
