#include "cli/commands.h"

#include "cli/checkpoint_args.h"
#include "cli/megatron_flags.h"
#include "cli/parser.h"
#include "core/error.h"

namespace megaton::cli {

namespace po = boost::program_options;

namespace {

// The training commands: one trainer, the objective of the fork script each replaces (named by
// data::objective_command).
struct TrainCommand {
  data::Objective objective;
  const char* summary;
};

const TrainCommand kTrainCommands[] = {
    {data::Objective::kCausalLm, "Pretrain a GPT model (replaces pretrain_gpt.py; takes its flags)."},
    {data::Objective::kPrefixLm,
     "Pretrain a prefix language model: a random prefix of each sample (or document) attends both ways (replaces "
     "pretrain_prefix_lm.py; takes its flags)."},
    {data::Objective::kPackedMtf,
     "Fine-tune on prompt pairs (inputs, targets) packed into rows, causally within each pair (replaces the fork's "
     "finetune_t0.py; takes its flags). --data-path PREFIX reads PREFIX_inputs_document and "
     "PREFIX_targets_document."},
    {data::Objective::kPackedMtfNonCausal,
     "Fine-tune on prompt pairs packed into rows, each pair's inputs attending to each other both ways, loss on the "
     "targets (replaces finetune_t0_non_causal_decoder.py; takes its flags). --data-path PREFIX reads "
     "PREFIX_inputs_document and PREFIX_targets_document."},
};

}  // namespace

bool parse_train_command(int argc, const char* const* argv, int world_size, train::TrainConfig& config,
                         std::ostream& help_out) {
  const std::string name = argc > 0 ? argv[0] : "train";
  const TrainCommand* command = &kTrainCommands[0];
  for (const auto& c : kTrainCommands)
    if (name == data::objective_command(c.objective)) command = &c;
  MegatronFlags f;
  f.config.data.objective = command->objective;
  po::options_description d;
  int dry_run_world_size = 0;
  const std::string command_name = data::objective_command(command->objective);
  po::options_description extra("megaton " + command_name);
  extra.add_options()("world-size", po::value<int>(&dry_run_world_size)->default_value(0),
                      "with --dry-run: the world size to plan for (default: the launcher's)")(
      "vocab-size", po::value<int64_t>(&f.config.vocab_size)->default_value(0),
      "vocabulary size when no tokenizer is given (default 50257, GPT-2)");
  d.add(extra);
  f.bind(d);
  std::vector<std::string> arguments;
  if (!parse_args(command_name, command->summary, argc, argv, d, help_out, "", nullptr, &arguments)) return false;
  MEGATON_CHECK(!f.compat.inference, UsageError,
                "--inference is for generation and evaluation (no optimizer state); megaton train cannot train without "
                "one: use megaton generate or megaton eval");
  int world = world_size;
  if (dry_run_world_size > 0) {
    MEGATON_CHECK(f.config.loop.dry_run, UsageError, "--world-size is only for --dry-run; the launcher sets the world");
    world = dry_run_world_size;
  }
  f.resolve();
  if (f.config.checkpoint.finetune) {
    const std::string taken = take_architecture_from_checkpoint(f.config);
    if (!taken.empty()) f.config.notes.push_back(taken);
  }
  f.default_tokenizer();
  // The layout first: a DeepSpeed JSON's gradient_accumulation_steps reads the data-parallel size.
  train::TrainConfig& c = f.config;
  c.model.validate();
  MEGATON_CHECK(c.model.seq_length > 0, UsageError, "--seq-length is required for megaton train");
  c.parallel.validate(world);
  f.apply_deepspeed();
  c.validate(world);
  // Megatron prints the job's world size; `--world-size` is megaton's --dry-run option, so its line gets the world.
  for (auto& line : arguments)
    if (line.rfind("  world_size ", 0) == 0) line = line.substr(0, line.rfind(' ') + 1) + std::to_string(world);
  c.arguments = std::move(arguments);
  config = std::move(c);
  return true;
}

infer::InferenceOptions inference_options(const train::TrainConfig& flags) {
  infer::InferenceOptions o;
  o.model = flags.model;
  o.kernels = flags.kernels;
  o.parallel = flags.parallel;
  o.dist = flags.dist;
  o.precision = flags.precision;
  o.tokenizer = flags.tokenizer;
  o.load = flags.checkpoint.load;
  o.seed = flags.loop.seed;
  o.micro_batch_size = flags.loop.micro_batch_size;
  o.log_level = flags.logging.log_level;
  o.reset_position_ids = flags.data.reset_position_ids;
  o.reset_attention_mask = flags.data.reset_attention_mask;
  return o;
}

namespace {

// A command's own group `own` (listed first by --help) and Megatron's flags; the model side becomes options.model, then
// options.validate(world_size).
template <typename Options>
bool parse_inference_command(const char* command, const char* summary, const po::options_description& own, int argc,
                             const char* const* argv, int world_size, Options& options, std::ostream& help_out) {
  MegatronFlags f;
  po::options_description d;
  d.add(own);
  f.bind(d);
  if (!parse_args(command, summary, argc, argv, d, help_out)) return false;
  f.resolve();
  const std::string taken = take_architecture_from_checkpoint(f.config);
  f.default_tokenizer();
  options.model = inference_options(f.config);
  options.model.notes = taken;
  options.validate(world_size);
  return true;
}

}  // namespace

// clang-format off
bool parse_generate_command(int argc, const char* const* argv, int world_size, infer::GenerateAppOptions& o,
                            std::ostream& help_out) {
  po::options_description g("text generation");
  g.add_options()
      ("temperature", po::value(&o.temperature)->default_value(1.0), "sampling temperature (> 0)")
      ("greedy", po::bool_switch(&o.greedy), "take the most likely token (no sampling)")
      ("top_p", po::value(&o.top_p)->default_value(0.0), "nucleus sampling mass; 0 = off")
      ("top_k", po::value(&o.top_k)->default_value(0), "sample among the k most likely tokens; 0 = off")
      ("out-seq-length", po::value(&o.out_seq_length)->default_value(1024),
       "at most this many tokens after the shortest prompt (also capped by --seq-length)")
      ("sample-input-file", po::value(&o.sample_input_file), "prompts, one a line")
      ("sample-output-file", po::value(&o.sample_output_file), "where conditional samples go (default INPUT.out)")
      ("num-samples", po::value(&o.num_samples)->default_value(0),
       "unconditional samples to write to --genfile; 0 = conditional (input file) or interactive")
      ("genfile", po::value(&o.genfile), "JSONL output of unconditional samples")
      ("recompute", po::bool_switch(&o.recompute), "no KV cache: run the whole prefix at every step")
      ("ignore-eos", po::bool_switch(&o.ignore_eos),
       "(megaton) do not stop a row at the end-of-document token: fixed-length decoding for benchmarks");
  return parse_inference_command("generate", "Generate text from a GPT checkpoint (tools/generate_samples_gpt.py).", g,
                                 argc, argv, world_size, o, help_out);
}

bool parse_eval_command(int argc, const char* const* argv, int world_size, eval::EvalOptions& o,
                        std::ostream& help_out) {
  po::options_description e("zero-shot evaluation");
  e.add_options()
      ("task", po::value(&o.task), "WIKITEXT103 (perplexity) | LAMBADA (last-word accuracy)")
      ("valid-data", po::value(&o.valid_data)->multitoken(), "the evaluation file (WikiText raw text / LAMBADA JSONL)")
      ("overlapping-eval", po::value(&o.overlapping_eval)->default_value(32),
       "sliding-window stride in tokens for WIKITEXT103 (= --seq-length: no overlap)")
      ("strict-lambada", po::bool_switch(&o.strict_lambada), "LAMBADA: predict the whole last word, not its last token")
      ("results-file", po::value(&o.results_file), "also write the numbers as JSON here");
  return parse_inference_command("eval", "Zero-shot evaluation of a GPT checkpoint (tasks/main.py: WIKITEXT103, LAMBADA).",
                                 e, argc, argv, world_size, o, help_out);
}

bool parse_serve_command(int argc, const char* const* argv, int world_size, serve::ServeOptions& o,
                         std::ostream& help_out) {
  po::options_description s("HTTP server");
  s.add_options()
      ("host", po::value(&o.host)->default_value("127.0.0.1"),
       "address to listen on (0.0.0.0: every interface; the server has no authentication)")
      ("port", po::value(&o.port)->default_value(5000), "TCP port; 0 picks a free one (logged)")
      ("max-batch-size", po::value(&o.max_batch_size)->default_value(16),
       "rows (prompts x n) decoded together; concurrent requests share a batch up to this")
      ("request-timeout", po::value(&o.request_timeout)->default_value(600.0),
       "seconds a request may wait for its answer before 504")
      ("max-request-bytes", po::value(&o.max_request_bytes)->default_value(16 << 20), "larger bodies get 413")
      ("served-model-name", po::value(&o.served_model_name),
       "the model's name in the API (default: --load's directory name, else megaton)")
      ("http-threads", po::value(&o.http_threads)->default_value(0),
       "connections handled at once; 0: max(16, 2 x --max-batch-size), since each request of a batch holds one")
      ("batch-window-ms", po::value(&o.batch_window_ms)->default_value(30),
       "once a request is queued, how long to wait for more to fill the batch (0: decode what is there)");
  return parse_inference_command("serve",
                                 "Serve a GPT checkpoint over HTTP: the OpenAI completions API (lm-eval-harness's "
                                 "local-completions) and Megatron-LM's PUT /api.",
                                 s, argc, argv, world_size, o, help_out);
}
// clang-format on

}  // namespace megaton::cli
