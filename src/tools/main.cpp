// megaton: one binary, git-style subcommands. Errors are typed exceptions caught here, once (dist::guarded_run): the
// lowest rank that hit an error prints it, and every rank exits with the error's documented code, so no rank is left
// waiting in a collective (docs/errors.md lists the codes).
#include <algorithm>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "cli/parser.h"
#include "core/error.h"
#include "dist/guarded_run.h"
#include "tools/subcommands.h"

namespace {

using megaton::tools::Subcommand;

// clang-format off
const Subcommand kSubcommands[] = {
    {"preprocess", megaton::tools::run_preprocess, "tokenize JSONL text into Megatron .bin/.idx datasets"},
    {"merge-data", megaton::tools::run_merge_data, "concatenate preprocessed datasets"},
    {"train",      megaton::tools::run_train,      "pretrain a GPT with tensor, pipeline and data parallelism"},
    {"pretrain-prefix-lm", megaton::tools::run_train, "pretrain a prefix language model (pretrain_prefix_lm.py)"},
    {"finetune-t0", megaton::tools::run_train,     "fine-tune on packed prompts, causally (finetune_t0.py)"},
    {"finetune-t0-non-causal", megaton::tools::run_train,
     "fine-tune on packed prompts, inputs bidirectional (finetune_t0_non_causal_decoder.py)"},
    {"generate",   megaton::tools::run_generate,   "sample text from a checkpoint"},
    {"eval",       megaton::tools::run_eval,       "WikiText-103 perplexity, LAMBADA accuracy"},
    {"serve",      megaton::tools::run_serve,      "HTTP server: OpenAI completions API (lm-eval-harness), Megatron's /api"},
    {"reshard",    megaton::tools::run_reshard,    "convert a checkpoint to another TP/PP layout or dtype"},
    {"export-hf",  megaton::tools::run_export_hf,  "write a Hugging Face transformers directory"},
    {"import-hf",  megaton::tools::run_import_hf,  "read a Hugging Face transformers directory"},
    {"convert",    megaton::tools::run_convert,    "read or write Megatron-DeepSpeed checkpoints (DeepSpeed, universal, Megatron)"},
    {"inspect",    megaton::tools::run_inspect,    "list a checkpoint's tensors and metadata, verify checksums"},
    {"plan",       megaton::tools::run_plan,       "predict memory and step time of parallel layouts"},
    {"comm-bench", megaton::tools::run_comm_bench, "check and time every collective (like nccl-tests)"},
};
// clang-format on

void print_usage(std::ostream& os) {
  os << "usage: megaton <command> [options]   (megaton <command> --help for its options)\n\ncommands:\n";
  size_t width = 0;
  for (const auto& s : kSubcommands) width = std::max(width, std::strlen(s.name));
  for (const auto& s : kSubcommands)
    os << "  " << s.name << std::string(width + 2 - std::strlen(s.name), ' ') << s.summary << "\n";
  os << "\nalso installed: megaton-plot METRICS.jsonl   pictures of a run from its --metrics-file\n";
  os << "\nmegaton " << MEGATON_VERSION << "\n";
}

const Subcommand* find_subcommand(const char* name) {
  for (const auto& s : kSubcommands)
    if (!std::strcmp(name, s.name)) return &s;
  return nullptr;
}

int unknown_command(const char* name) {
  std::vector<std::string> names;
  for (const auto& s : kSubcommands) names.emplace_back(s.name);
  const std::string hint = megaton::cli::closest_word(name, names);
  std::cerr << "megaton: unknown command '" << name << "'" << (hint.empty() ? "" : " (did you mean '" + hint + "'?)")
            << "\n\n";
  print_usage(std::cerr);
  return static_cast<int>(megaton::ExitCode::kUsage);
}

}  // namespace

int main(int argc, char** argv) {
  // `megaton help CMD` is `megaton CMD --help`.
  if (argc == 3 && !std::strcmp(argv[1], "help")) {
    const Subcommand* s = find_subcommand(argv[2]);
    if (!s) return unknown_command(argv[2]);
    const char* args[] = {argv[2], "--help", nullptr};
    return megaton::dist::guarded_run([&] { return s->run(2, args); });
  }
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    print_usage(argc < 2 ? std::cerr : std::cout);
    return argc < 2 ? static_cast<int>(megaton::ExitCode::kUsage) : 0;
  }
  if (!std::strcmp(argv[1], "--version")) {
    std::cout << "megaton " << MEGATON_VERSION << "\n";
    return 0;
  }
  if (const Subcommand* s = find_subcommand(argv[1]))
    return megaton::dist::guarded_run([&] { return s->run(argc - 1, argv + 1); });
  return unknown_command(argv[1]);
}
