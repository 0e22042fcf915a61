// libFuzzer target: a Hugging Face tokenizer.json loaded by HfTokenizer, then used on a short text: malformed files
// must be DataErrors naming the problem, never a crash, an escaping JSON exception or a huge allocation.
#include "core/error.h"
#include "data/hf_tokenizer.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  megaton::fuzz::write_scratch("tokenizer.json", data, size);
  try {
    megaton::data::HfTokenizer tok(megaton::fuzz::scratch_dir());
    const auto ids = tok.encode("Hello world, 12 tokens <s> and </s>.");
    (void)tok.decode(ids);
  } catch (const megaton::Error&) {
  }
  return 0;
}
