// DeepSpeed's type-based pipeline partition over Megatron-DeepSpeed's GPTModelPipe layer list. Expected values come
// from an independent Python transcription of DeepSpeed's partition_balanced (binary search + _lprobe, the version
// BigScience's runs used), run over the same layer lists.
#include "model/deepspeed_partition.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "model/gpt_config.h"

using megaton::model::deepspeed_type_partition;

TEST(ModelDeepSpeedPartition, BloomsTransformerAndEmbeddingSplit) {
  // BLOOM-176B (70 layers, 12 stages, bf16): the embeddings count as layers, so the end stages hold 5.
  EXPECT_EQ(deepspeed_type_partition("type:transformer|embedding", 70, 12, true),
            (std::vector<int>{5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 5}));
  // The fork's default, type:transformer: the old partition leaves the remainder on the last stage.
  EXPECT_EQ(deepspeed_type_partition("type:transformer", 70, 12, true),
            (std::vector<int>{6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 4}));
  EXPECT_EQ(deepspeed_type_partition("type:transformer|embedding", 24, 4, true), (std::vector<int>{6, 7, 7, 4}));
  EXPECT_EQ(deepspeed_type_partition("type:transformer|embedding", 30, 4, true), (std::vector<int>{7, 8, 8, 7}));
  EXPECT_EQ(deepspeed_type_partition("type:transformer", 7, 3, true), (std::vector<int>{3, 3, 1}));
  EXPECT_EQ(deepspeed_type_partition("type:Transformer", 40, 4, true), (std::vector<int>{10, 10, 10, 10}));
}

TEST(ModelDeepSpeedPartition, StagesWithoutTransformerLayersAsDeepSpeedPlacesThem) {
  // 24 layers over 8 stages by transformer|embedding: DeepSpeed's old partition leaves the last stage no layer.
  EXPECT_EQ(deepspeed_type_partition("type:transformer|embedding", 24, 8, true),
            (std::vector<int>{3, 4, 4, 4, 4, 4, 1, 0}));
  megaton::model::GptConfig c;
  c.model.num_layers = 24;
  c.dtype = torch::kBFloat16;
  c.pp_partition_method = "type:transformer|embedding";
  EXPECT_EQ(megaton::model::partition_layers(c, 8), (std::vector<int>{3, 4, 4, 4, 4, 4, 1, 0}));
  // BLOOMZ (tr13): 70 layers over 72 stages, the embedding alone first and the LM head alone last.
  c.model.num_layers = 70;
  std::vector<int> bloomz(72, 1);
  bloomz.front() = bloomz.back() = 0;
  EXPECT_EQ(megaton::model::partition_layers(c, 72), bloomz);
  c.pp_partition_method = "uniform";  // other methods still need a layer per stage
  EXPECT_THROW(megaton::model::partition_layers(c, 72), megaton::UsageError);
  EXPECT_THROW(deepspeed_type_partition("type:transformer(", 4, 2, true), megaton::UsageError);
}
