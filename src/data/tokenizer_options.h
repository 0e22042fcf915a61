// Which tokenizer a command uses (Megatron's --tokenizer-type and its files).
#pragma once
#include <string>

namespace megaton::data {

struct TokenizerOptions {
  std::string tokenizer_type;          // GPT2BPETokenizer | PretrainedFromHF; "" where pre-tokenized data needs none
  std::string tokenizer_name_or_path;  // PretrainedFromHF: a directory with tokenizer.json
  std::string vocab_file;              // GPT2BPETokenizer: vocab.json / encoder.json
  std::string merge_file;              // GPT2BPETokenizer: merges.txt / vocab.bpe
};

}  // namespace megaton::data
