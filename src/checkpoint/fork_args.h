// The `args` namespace Megatron-DeepSpeed saves in its checkpoints, as megaton's args and architecture JSON.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>

#include "checkpoint/py_value.h"

namespace megaton::checkpoint {

/// The namespace's attributes as JSON under their own names (Megatron's flag destinations, which megaton's args use
/// too); Megatron's enums become their names (position_embedding_type "alibi"), torch dtypes "torch.bfloat16".
nlohmann::json fork_args_json(const Py& args, const std::string& where);

/// megaton's architecture JSON (model::architecture_json's keys) for those args and a `vocab_size` of real tokens.
nlohmann::json fork_model_config(const nlohmann::json& args, int64_t vocab_size, const std::string& where);

/// The value of megatron.enums.PositionEmbeddingType named `name` ("alibi" -> 3).
int64_t position_embedding_enum(const std::string& name);

/// The params dtype of those args: bf16, fp16 or fp32.
torch::ScalarType fork_params_dtype(const nlohmann::json& args);

}  // namespace megaton::checkpoint
