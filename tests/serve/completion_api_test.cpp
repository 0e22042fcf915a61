// The OpenAI and Megatron request checks and the shaping of decoded rows into answers (stop strings, EOS, echo,
// offsets, streamed chunks), on the tests' byte tokenizer (id = byte value, EOD = 256).
#include <gtest/gtest.h>

#include <cmath>

#include "infer/infer_test_util.h"
#include "serve/api_error.h"
#include "serve/completion_request.h"
#include "serve/completion_response.h"
#include "serve/megatron_api.h"

namespace megaton::serve {
namespace {

using json = nlohmann::json;

using infertest::ByteTokenizer;

CompletionRequest parse(const std::string& body, int64_t seq = 32, int64_t rows = 8) {
  ByteTokenizer tok;
  return parse_completion_request(json::parse(body), tok, seq, rows);
}

// The error parse() raises: its status and field.
std::pair<int, std::string> error_of(const std::string& body, int64_t seq = 32, int64_t rows = 8) {
  try {
    parse(body, seq, rows);
  } catch (const ApiError& e) {
    return {e.status, e.param};
  }
  return {0, "accepted"};
}

RowResult row(const std::string& prompt, const std::string& generated, Finish finish, bool eos = false) {
  RowResult r;
  for (unsigned char c : prompt) r.tokens.push_back(c);
  r.prompt_len = static_cast<int64_t>(r.tokens.size());
  for (unsigned char c : generated) r.tokens.push_back(c);
  if (eos) r.tokens.push_back(256);
  r.finish = finish;
  r.logprobs.assign(r.tokens.size(), -1.0f);
  r.logprobs[0] = std::nanf("");
  r.top.assign(r.tokens.size(), {});
  for (size_t i = 1; i < r.tokens.size(); ++i) r.top[i] = {{r.tokens[i], -1.0f}, {'z', -2.0f}};
  return r;
}

TEST(CompletionRequest, PromptForms) {
  EXPECT_EQ(parse(R"({"prompt": "ab"})").prompts, (std::vector<std::vector<int32_t>>{{'a', 'b'}}));
  EXPECT_EQ(parse(R"({"prompt": ["a", "bc"]})").prompts.size(), 2u);
  EXPECT_EQ(parse(R"({"prompt": [1, 2, 3]})").prompts, (std::vector<std::vector<int32_t>>{{1, 2, 3}}));
  auto r = parse(R"({"prompt": [[1], [2, 256]], "max_tokens": 3, "logprobs": 2, "echo": true, "stop": "x"})");
  EXPECT_EQ(r.prompts, (std::vector<std::vector<int32_t>>{{1}, {2, 256}}));
  EXPECT_EQ(r.max_tokens, 3);
  EXPECT_EQ(*r.logprobs, 2);
  EXPECT_TRUE(r.echo);
  EXPECT_EQ(r.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(parse(R"({"prompt": "a"})").max_tokens, 16);  // OpenAI's default
}

TEST(CompletionRequest, RefusalsNameTheField) {
  EXPECT_EQ(error_of(R"({"max_tokens": 3})"), (std::pair<int, std::string>{400, "prompt"}));
  EXPECT_EQ(error_of(R"({"prompt": []})").second, "prompt");
  EXPECT_EQ(error_of(R"({"prompt": [1, 257]})").second, "prompt");  // outside the vocabulary
  EXPECT_EQ(error_of(R"({"prompt": [1, -1]})").second, "prompt");
  EXPECT_EQ(error_of(R"({"prompt": [{"a": 1}]})").second, "prompt");
  EXPECT_EQ(error_of(R"({"prompt": "abc", "max_tokens": 30})").second, "max_tokens");  // 3 + 30 > 32
  EXPECT_EQ(error_of(R"({"prompt": "abc", "max_tokens": 29})").first, 0);
  EXPECT_EQ(error_of(R"({"prompt": "a", "max_tokens": 0})").second, "max_tokens");  // nothing without echo
  EXPECT_EQ(error_of(R"({"prompt": "a", "temperature": -0.5})").second, "temperature");
  EXPECT_EQ(error_of(R"({"prompt": "a", "temperature": "hot"})").second, "temperature");
  EXPECT_EQ(error_of(R"({"prompt": "a", "top_p": 0})").second, "top_p");
  EXPECT_EQ(error_of(R"({"prompt": "a", "stop": ["1","2","3","4","5"]})").first, 0);  // more than OpenAI's 4
  nlohmann::json many = {{"prompt", "a"}, {"stop", nlohmann::json::array()}};
  for (int i = 0; i <= kMaxStops; ++i) many["stop"].push_back(std::to_string(i));
  EXPECT_EQ(error_of(many.dump()).second, "stop");
  EXPECT_EQ(error_of(R"({"prompt": "a", "stop": [""]})").second, "stop");
  EXPECT_EQ(error_of(R"({"prompt": "a", "logprobs": 21})").second, "logprobs");
  EXPECT_EQ(error_of(R"({"prompt": "a", "logprobs": true})").second, "logprobs");
  EXPECT_EQ(error_of(R"({"prompt": "a", "echo": "yes"})").second, "echo");
  EXPECT_EQ(error_of(R"({"prompt": "a", "presence_penalty": 0.5})").second, "presence_penalty");
  EXPECT_EQ(error_of(R"({"prompt": "a", "stream_options": {"include_usage": true}})").second, "stream_options");
  EXPECT_EQ(error_of(R"({"prompt": ["a", "b", "c"], "n": 3})", 32, 8).second, "prompt");  // 9 rows > 8
  EXPECT_EQ(error_of(R"([1, 2])").first, 400);
}

TEST(CompletionResponse, EosEndsTheTextButStaysAToken) {
  CompletionRequest req = parse(R"({"prompt": "ab", "logprobs": 1, "echo": true})");
  ChoiceView v = view_row(row("ab", "cd", Finish::kEos, true), ByteTokenizer(), req, true);
  EXPECT_EQ(v.text, "abcd");
  EXPECT_EQ(v.finish_reason, "stop");
  EXPECT_EQ(v.tokens, (std::vector<std::string>{"a", "b", "c", "d", ""}));  // the byte tokenizer decodes EOD to ""
  EXPECT_EQ(v.text_offset, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(std::isnan(v.token_logprobs[0]));
  EXPECT_TRUE(v.top_logprobs[0].is_null());
  EXPECT_EQ(v.top_logprobs[2], (json{{"c", -1.0}, {"z", -2.0}}));
}

TEST(CompletionResponse, StopStringCutsTextAndTokens) {
  CompletionRequest req = parse(R"({"prompt": "pq", "logprobs": 0, "stop": ["XY", "never"]})");
  ChoiceView v = view_row(row("pq", "abXYc", Finish::kStop), ByteTokenizer(), req, true);
  EXPECT_EQ(v.text, "ab");
  EXPECT_EQ(v.finish_reason, "stop");
  // Without echo: the completion's tokens before the cut, offsets counted from the prompt's start.
  EXPECT_EQ(v.tokens, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(v.text_offset, (std::vector<int64_t>{2, 3}));
  ChoiceView len = view_row(row("pq", "abc", Finish::kLength), ByteTokenizer(), req, true);
  EXPECT_EQ(len.text, "abc");
  EXPECT_EQ(len.finish_reason, "length");
}

TEST(CompletionResponse, StreamHoldsBackWhatMayBecomeAStop) {
  CompletionRequest req = parse(R"({"prompt": "p", "stop": ["XYZ"], "stream": true})");
  ChoiceStream s(req, 0);
  ByteTokenizer tok;
  std::string sent;
  auto feed = [&](const std::string& gen, bool done, Finish f = Finish::kLength) {
    json c = s.next(row("p", gen, f), tok, done);
    if (!c.is_null()) sent += c["text"].get<std::string>();
    return c;
  };
  feed("ab", false);
  EXPECT_EQ(sent, "");  // the last 2 bytes may begin "XYZ": held back
  feed("abcX", false);
  EXPECT_EQ(sent, "ab");
  feed("abcXY", false);
  EXPECT_EQ(sent, "abc");
  json last = feed("abcXYZ", true, Finish::kStop);
  EXPECT_EQ(sent, "abc");  // the stop string never leaks
  EXPECT_EQ(last["finish_reason"], "stop");
  EXPECT_TRUE(s.finished());
  EXPECT_TRUE(s.next(row("p", "abcXYZ", Finish::kStop), tok, true).is_null());
}

TEST(CompletionResponse, StreamWaitsForACutCharacter) {
  CompletionRequest req = parse(R"({"prompt": "p", "stream": true})");
  ChoiceStream s(req, 0);
  ByteTokenizer tok;
  // "é" is C3 A9: after its first byte nothing new is final.
  EXPECT_EQ(s.next(row("p", "a", Finish::kLength), tok, false)["text"], "a");
  EXPECT_TRUE(s.next(row("p", "a\xC3", Finish::kLength), tok, false).is_null());
  EXPECT_EQ(s.next(row("p", "a\xC3\xA9", Finish::kLength), tok, true)["text"], "\xC3\xA9");
}

TEST(MegatronApi, RequestsAndAnswers) {
  ByteTokenizer tok;
  auto err = [&](const std::string& body) -> std::string {
    try {
      parse_megatron_request(json::parse(body), tok, 32, 8);
    } catch (const ApiError& e) {
      return e.what();
    }
    return "accepted";
  };
  EXPECT_EQ(err(R"({"tokens_to_generate": 4})"), "prompts argument required");
  EXPECT_EQ(err(R"({"prompts": [], "tokens_to_generate": 4})"), "prompts is empty");
  EXPECT_EQ(err(R"({"prompts": ["a"], "max_len": 4})"), "max_len is no longer used.  Replace with tokens_to_generate");
  EXPECT_EQ(err(R"({"prompts": ["a"], "tokens_to_generate": 0})"),
            "tokens_to_generate=0 implies logprobs should be True");
  EXPECT_EQ(err(R"({"prompts": [""]})"), "Empty prompts require add_BOS=true");
  EXPECT_EQ(err(R"({"prompts": ["a"], "top_k": 2, "top_p": 0.5})"), "cannot set both top-k and top-p samplings.");
  EXPECT_EQ(err(R"({"prompts": ["a"], "tokens_to_generate": 4})"), "accepted");
  MegatronRequest r = parse_megatron_request(json::parse(R"({"prompts": [""], "add_BOS": true, "top_k": 1,
                                                             "tokens_to_generate": 4, "logprobs": true, "stop_on_eol": true})"),
                                             tok, 32, 8);
  EXPECT_EQ(r.prompts[0], std::vector<int32_t>{256});
  std::vector<RowSpec> rows = megatron_rows(r, 5);
  EXPECT_EQ(rows[0].temperature, 0.0);  // top_k = 1 is Megatron's greedy
  EXPECT_EQ(rows[0].stop, std::vector<std::string>{"\n"});
  json a = megatron_response(r, {row("ab", "c\n", Finish::kStop)}, tok);
  EXPECT_EQ(a["text"][0], "abc\n");  // Megatron keeps the newline it stopped at
  EXPECT_EQ(a["segments"][0].size(), 4u);
  EXPECT_EQ(a["logprobs"][0].size(), 3u);  // every token after the first
}

}  // namespace
}  // namespace megaton::serve
