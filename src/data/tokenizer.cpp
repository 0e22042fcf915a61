#include "data/tokenizer.h"

#include "core/error.h"
#include "data/gpt2_tokenizer.h"
#include "data/hf_tokenizer.h"

namespace megaton::data {

int32_t Tokenizer::pad() const {
  throw DataError(str("the ", name(), " tokenizer has no padding token (packed prompt rows need one: use a ",
                      "PretrainedFromHF tokenizer whose tokenizer_config.json names a pad_token)"));
}

std::unique_ptr<Tokenizer> make_tokenizer(const std::string& type, const std::string& vocab_file,
                                          const std::string& merge_file, const std::string& name_or_path) {
  if (type == "GPT2BPETokenizer") {
    MEGATON_CHECK(!vocab_file.empty() && !merge_file.empty(), UsageError,
                  "--tokenizer-type GPT2BPETokenizer needs --vocab-file (vocab.json/encoder.json) and --merge-file "
                  "(merges.txt/vocab.bpe); `bash data/fetch_gpt2_tokenizer.sh` downloads them");
    return std::make_unique<Gpt2Tokenizer>(vocab_file, merge_file);
  }
  if (type == "PretrainedFromHF") {
    MEGATON_CHECK(
        !name_or_path.empty(), UsageError,
        "--tokenizer-type PretrainedFromHF needs --tokenizer-name-or-path DIR (a directory with tokenizer.json)");
    return std::make_unique<HfTokenizer>(name_or_path);
  }
  throw UsageError(str("--tokenizer-type '", type, "' is not supported; expected GPT2BPETokenizer or PretrainedFromHF",
                       type.empty() ? " (the flag is required)" : ""));
}

std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerOptions& a) {
  return make_tokenizer(a.tokenizer_type, a.vocab_file, a.merge_file, a.tokenizer_name_or_path);
}

uint8_t best_fitting_dtype_code(int64_t vocab_size) {
  return vocab_size < 65500 ? 8 : 4;
}

}  // namespace megaton::data
