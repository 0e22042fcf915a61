// Tokenizer throughput on the bundled corpus (data/downloaded/corpus/fortunes.jsonl, texts concatenated): GPT-2 BPE
// with a warm cache (steady state of a long preprocess run) and with a cold cache (every word merged), and the
// pre-tokenizer regex alone. Reports bytes/s and tokens/s. Needs `bash data/fetch_gpt2_tokenizer.sh`; run from the
// repository root or set MEGATON_SOURCE_DIR.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "data/gpt2_pretokenizer.h"
#include "data/gpt2_tokenizer.h"
#include "data/regex_splitter.h"

namespace {

using megaton::data::Gpt2Tokenizer;

// The source tree (for data/downloaded/): $MEGATON_SOURCE_DIR, else the current directory (run from the repo root).
std::string source_dir() {
  if (const char* d = std::getenv("MEGATON_SOURCE_DIR")) return d;
#ifdef MEGATON_SOURCE_DIR
  return MEGATON_SOURCE_DIR;
#else
  return ".";
#endif
}

const std::string& corpus() {
  static const std::string text = [] {
    std::ifstream in(source_dir() + "/data/downloaded/corpus/fortunes.jsonl");
    std::string line, all;
    while (std::getline(in, line)) all += nlohmann::json::parse(line)["text"].get<std::string>() + "\n";
    return all;
  }();
  return text;
}

std::unique_ptr<Gpt2Tokenizer> gpt2() {
  const std::string d = source_dir() + "/data/downloaded/gpt2/";
  return std::make_unique<Gpt2Tokenizer>(d + "vocab.json", d + "merges.txt");
}

void BM_Gpt2EncodeWarm(benchmark::State& state) {
  if (corpus().empty()) return state.SkipWithError("corpus not found: run data/fetch_gpt2_tokenizer.sh");
  auto tok = gpt2();
  std::vector<int32_t> ids;
  tok->encode_to(corpus(), ids);  // warm the BPE cache
  int64_t tokens = 0;
  for (auto _ : state) {
    ids.clear();
    tok->encode_to(corpus(), ids);
    tokens += static_cast<int64_t>(ids.size());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(corpus().size()));
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Gpt2EncodeWarm)->Unit(benchmark::kMillisecond);

void BM_Gpt2EncodeCold(benchmark::State& state) {
  if (corpus().empty()) return state.SkipWithError("corpus not found");
  auto proto = gpt2();
  int64_t tokens = 0;
  for (auto _ : state) {
    auto tok = proto->clone();  // fresh cache
    std::vector<int32_t> ids;
    tok->encode_to(corpus(), ids);
    tokens += static_cast<int64_t>(ids.size());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(corpus().size()));
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Gpt2EncodeCold)->Unit(benchmark::kMillisecond);

void BM_Gpt2PreTokenize(benchmark::State& state) {
  megaton::data::RegexSplitter re(megaton::data::kGpt2Pattern, "bench");
  megaton::data::RegexSplitter::Matcher m(re);
  const std::string& text = corpus();
  int64_t pieces = 0;
  for (auto _ : state) {
    size_t pos = 0, b = 0, e = 0;
    while (pos < text.size() && m.find(text, pos, b, e)) pos = e, ++pieces;
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
  state.counters["jit"] = re.jit();
  state.counters["pieces/s"] = benchmark::Counter(static_cast<double>(pieces), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Gpt2PreTokenize)->Unit(benchmark::kMillisecond);

void BM_Gpt2Scanner(benchmark::State& state) {
  const megaton::data::Gpt2PreTokenizer scanner;
  const std::string& text = corpus();
  int64_t pieces = 0;
  for (auto _ : state) {
    for (size_t pos = 0; pos < text.size(); ++pieces) pos = scanner.next(text, pos);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
  state.counters["pieces/s"] = benchmark::Counter(static_cast<double>(pieces), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Gpt2Scanner)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
