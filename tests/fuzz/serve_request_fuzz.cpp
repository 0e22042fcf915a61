// libFuzzer target: a request body of megaton serve (POST /v1/completions and Megatron's PUT /api), parsed and
// checked against a small model (byte vocabulary, 64 positions): bad input must be an ApiError naming the field, never
// a JSON library exception, a crash or a sanitizer report. The answer shaping runs on each accepted request.
#include <nlohmann/json.hpp>

#include "serve/api_error.h"
#include "serve/completion_request.h"
#include "serve/megatron_api.h"

namespace {

class ByteTokenizer : public megaton::data::Tokenizer {
 public:
  void encode_to(std::string_view text, std::vector<int32_t>& out) override {
    for (unsigned char c : text) out.push_back(c);
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string s;
    for (int32_t id : ids) s += static_cast<char>(id & 0xFF);
    return s;
  }
  int64_t vocab_size() const override { return 257; }
  int32_t eod() const override { return 256; }
  std::unique_ptr<megaton::data::Tokenizer> clone() const override { return std::make_unique<ByteTokenizer>(); }
  std::string name() const override { return "bytes"; }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json body =
      nlohmann::json::parse(reinterpret_cast<const char*>(data), reinterpret_cast<const char*>(data) + size, nullptr,
                            /*allow_exceptions=*/false);
  if (body.is_discarded()) return 0;
  ByteTokenizer tok;
  try {
    (void)megaton::serve::parse_completion_request(body, tok, 64, 8);
  } catch (const megaton::serve::ApiError&) {
  }
  try {
    const auto r = megaton::serve::parse_megatron_request(body, tok, 64, 8);
    (void)megaton::serve::megatron_rows(r, 1);
  } catch (const megaton::serve::ApiError&) {
  }
  return 0;
}
