#include "cli/checkpoint_args.h"

#include "checkpoint/file.h"
#include "checkpoint/fork_checkpoint.h"
#include "checkpoint/load_path.h"
#include "core/error.h"

namespace megaton::cli {

namespace {

using nlohmann::json;

// A value from the checkpoint's JSON when it holds `key` with the right type.
template <typename T>
bool take(const json& j, const char* key, T& field) {
  if (!j.contains(key) || j[key].is_null()) return false;
  try {
    field = j[key].get<T>();
  } catch (const json::exception&) {
    return false;
  }
  return true;
}

}  // namespace

std::string take_architecture_from_checkpoint(train::TrainConfig& flags) {
  if (flags.checkpoint.load.empty() || flags.model.num_layers != 0) return "";
  // A Megatron-DeepSpeed checkpoint: its args, read without converting it (every rank of the job parses the flags;
  // the conversion happens once, at load).
  std::string path;
  checkpoint::CheckpointState meta;
  if (const auto foreign = checkpoint::detect_foreign_checkpoint(flags.checkpoint.load)) {
    path = foreign->dir;
    meta = checkpoint::read_foreign_meta(*foreign);
  } else {
    path = checkpoint::resolve_checkpoint_path(flags.checkpoint.load);
    meta = checkpoint::CheckpointFile(path).meta();
  }
  const json& arch = meta.model_config;
  const json& args = meta.args;
  model::GptOptions& m = flags.model;
  const model::GptOptions defaults;
  std::string taken;
  auto note = [&](const std::string& flag, const json& v) { taken += " --" + flag + " " + v.dump(); };
  // Numbers and strings: taken where the command line left the default.
  auto number = [&](const char* key, const char* flag, auto& field, auto unset) {
    if (field == unset && take(arch, key, field) && field != unset) note(flag, arch[key]);
  };
  number("num_layers", "num-layers", m.num_layers, defaults.num_layers);
  number("hidden_size", "hidden-size", m.hidden_size, defaults.hidden_size);
  number("ffn_hidden_size", "ffn-hidden-size", m.ffn_hidden_size, defaults.ffn_hidden_size);
  number("num_attention_heads", "num-attention-heads", m.num_attention_heads, defaults.num_attention_heads);
  number("kv_channels", "kv-channels", m.kv_channels, defaults.kv_channels);
  number("max_position_embeddings", "max-position-embeddings", m.max_position_embeddings,
         defaults.max_position_embeddings);
  number("layernorm_epsilon", "layernorm-epsilon", m.layernorm_epsilon, defaults.layernorm_epsilon);
  number("position_embedding_type", "position-embedding-type", m.position_embedding_type,
         defaults.position_embedding_type);
  number("glu_activation", "glu-activation", m.glu_activation, defaults.glu_activation);
  // Switches: the checkpoint's true turns them on; one given on the command line stays on (and is checked).
  auto on = [&](const char* key, const char* flag, bool& field) {
    bool v = false;
    if (!field && take(arch, key, v) && v) field = true, taken += std::string(" --") + flag;
  };
  on("embed_layernorm", "embed-layernorm", m.embed_layernorm);
  on("mup", "mup", m.mup);
  number("mup_input_mult", "mup-input-mult", m.mup_input_mult, defaults.mup_input_mult);
  number("mup_output_mult", "mup-output-mult", m.mup_output_mult, defaults.mup_output_mult);
  number("mup_attn_mult", "mup-attn-mult", m.mup_attn_mult, defaults.mup_attn_mult);
  on("openai_gelu", "openai-gelu", m.openai_gelu);
  on("apply_residual_connection_post_layernorm", "apply-residual-connection-post-layernorm",
     m.apply_residual_connection_post_layernorm);
  on("untie_embeddings_and_output_weights", "untie-embeddings-and-output-weights",
     m.untie_embeddings_and_output_weights);
  bool exact_gelu = false;
  if (m.bias_gelu_fusion && take(arch, "no_bias_gelu_fusion", exact_gelu) && exact_gelu)
    m.bias_gelu_fusion = false, taken += " --no-bias-gelu-fusion";
  // The run's settings: sequence length, vocabulary padding, tokenizer, precision.
  if (m.pad_vocab_size_to == 0 && take(args, "pad_vocab_size_to", m.pad_vocab_size_to) && m.pad_vocab_size_to > 0)
    note("pad-vocab-size-to", m.pad_vocab_size_to);
  if (m.make_vocab_size_divisible_by == defaults.make_vocab_size_divisible_by)
    take(args, "make_vocab_size_divisible_by", m.make_vocab_size_divisible_by);
  if (m.seq_length == 0) {
    if (!take(args, "seq_length", m.seq_length) || m.seq_length <= 0) m.seq_length = m.max_position_embeddings;
    if (m.seq_length > 0) note("seq-length", m.seq_length);
  }
  data::TokenizerOptions& tok = flags.tokenizer;
  if (tok.tokenizer_type.empty() && tok.vocab_file.empty() && tok.tokenizer_name_or_path.empty() &&
      take(args, "tokenizer_type", tok.tokenizer_type) && !tok.tokenizer_type.empty()) {
    take(args, "vocab_file", tok.vocab_file);
    take(args, "merge_file", tok.merge_file);
    take(args, "tokenizer_name_or_path", tok.tokenizer_name_or_path);
    note("tokenizer-type", tok.tokenizer_type);
  }
  optim::PrecisionOptions& p = flags.precision;
  if (!p.fp16 && !p.bf16) {
    if (take(args, "bf16", p.bf16) && p.bf16) taken += " --bf16";
    if (take(args, "fp16", p.fp16) && p.fp16) taken += " --fp16";
  }
  MEGATON_CHECK(m.num_layers > 0, CheckpointError, path,
                ": holds no architecture (model_config.json has no num_layers); give the model flags");
  return taken.empty() ? "" : str("from ", path, ":", taken);
}

}  // namespace megaton::cli
