#include "model/gpt_options.h"

#include "core/error.h"

namespace megaton::model {

void GptOptions::validate() {
  GptOptions& m = *this;
  MEGATON_CHECK(m.num_layers > 0, UsageError, "--num-layers is required and must be > 0 (got ", m.num_layers, ")");
  MEGATON_CHECK(m.hidden_size > 0, UsageError, "--hidden-size is required and must be > 0 (got ", m.hidden_size, ")");
  MEGATON_CHECK(m.num_attention_heads > 0, UsageError, "--num-attention-heads is required and must be > 0 (got ",
                m.num_attention_heads, ")");
  MEGATON_CHECK(!m.mup || m.kv_channels == 0 || m.kv_channels * m.num_attention_heads == m.hidden_size, UsageError,
                "--mup with --kv-channels ", m.kv_channels, " (not --hidden-size / --num-attention-heads): the fork ",
                "refuses it too (\"mup isn't implemented for variable kv channels\")");
  MEGATON_CHECK(!m.mup || (m.mup_base_hidden_size > 0 && m.mup_base_ffn_hidden_size > 0), UsageError,
                "--mup-base-hidden-size and --mup-base-ffn-hidden-size must be > 0");
  if (m.kv_channels == 0) {
    MEGATON_CHECK(m.hidden_size % m.num_attention_heads == 0, UsageError, "--hidden-size (", m.hidden_size,
                  ") must be divisible by --num-attention-heads (", m.num_attention_heads, ")");
    m.kv_channels = m.hidden_size / m.num_attention_heads;
  }
  if (m.ffn_hidden_size == 0) m.ffn_hidden_size = 4 * m.hidden_size;
  MEGATON_CHECK(m.position_embedding_type == "absolute" || m.position_embedding_type == "rotary" ||
                    m.position_embedding_type == "alibi",
                UsageError, "--position-embedding-type: expected absolute|rotary|alibi, got '",
                m.position_embedding_type, "'");
  MEGATON_CHECK(m.glu_activation.empty() || m.glu_activation == "geglu" || m.glu_activation == "swiglu" ||
                    m.glu_activation == "reglu" || m.glu_activation == "liglu",
                UsageError, "--glu-activation: expected geglu|swiglu|reglu|liglu, got '", m.glu_activation, "'");
  MEGATON_CHECK(m.seq_length >= 0, UsageError, "--seq-length must be > 0 (got ", m.seq_length, ")");
  if (m.position_embedding_type == "absolute") {
    if (m.max_position_embeddings == 0) m.max_position_embeddings = m.seq_length;
    MEGATON_CHECK(m.max_position_embeddings >= m.seq_length, UsageError, "--max-position-embeddings (",
                  m.max_position_embeddings, ") must be >= --seq-length (", m.seq_length, ")");
  }
  MEGATON_CHECK(m.hidden_dropout >= 0 && m.hidden_dropout < 1, UsageError, "--hidden-dropout must be in [0, 1), got ",
                m.hidden_dropout);
  MEGATON_CHECK(m.attention_dropout >= 0 && m.attention_dropout < 1, UsageError,
                "--attention-dropout must be in [0, 1), got ", m.attention_dropout);
  MEGATON_CHECK(m.make_vocab_size_divisible_by > 0, UsageError, "--make-vocab-size-divisible-by must be > 0");
  MEGATON_CHECK(m.checkpoint_num_layers >= 1, UsageError, "--checkpoint-num-layers must be >= 1");
}

int64_t GptOptions::padded_vocab_size(int64_t vocab, int tp) const {
  const GptOptions& m = *this;
  if (m.pad_vocab_size_to > 0) {
    MEGATON_CHECK(m.pad_vocab_size_to >= vocab, UsageError, "--pad-vocab-size-to (", m.pad_vocab_size_to,
                  ") is smaller than the tokenizer's vocabulary (", vocab, ")");
    MEGATON_CHECK(m.pad_vocab_size_to % tp == 0, UsageError, "--pad-vocab-size-to (", m.pad_vocab_size_to,
                  ") is not divisible by --tensor-model-parallel-size (", tp, ")");
    return m.pad_vocab_size_to;
  }
  const int64_t multiple = static_cast<int64_t>(m.make_vocab_size_divisible_by) * tp;
  return (vocab + multiple - 1) / multiple * multiple;
}

}  // namespace megaton::model
