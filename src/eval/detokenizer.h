// Megatron's zero-shot detokenizers (tasks/zeroshot_gpt/detokenizer.py): they undo the tokenization of pre-tokenized
// corpora (WikiText's " @-@ ", spaced punctuation, "= = =" headings; PTB's " n't") before BPE, chosen by a substring
// of the data path ('ptb', 'wiki', 'lambada').
#pragma once
#include <functional>
#include <string>

namespace megaton::eval {

using Detokenizer = std::function<std::string(const std::string&)>;

std::string wikitext_detokenize(const std::string& text);
std::string ptb_detokenize(const std::string& text);

/// The detokenizer of the first key ('ptb', 'wiki', 'lambada', in that order) found in `path`; identity (and `*name`
/// = "none") when none is.
Detokenizer detokenizer_for_path(const std::string& path, std::string* name = nullptr);

}  // namespace megaton::eval
