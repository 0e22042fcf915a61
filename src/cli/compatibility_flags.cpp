#include "cli/compatibility_flags.h"

#include "core/error.h"

namespace megaton::cli {

namespace po = boost::program_options;

namespace {

// A flag taken with a value and ignored (the value is still type-checked by the parser).
template <typename T>
po::typed_value<T>* ignored() {
  return po::value<T>();
}

// A flag megaton refuses with `why` when it is given: a switch, or a flag with a value.
UsageError refusal(const char* flag, const char* why) {
  return UsageError(str("--", flag, " is not supported: ", why, " (docs/megatron-compat.md)"));
}

po::typed_value<bool>* refused_switch(const char* flag, const char* why) {
  return po::bool_switch()->notifier([flag, why](bool given) {
    if (given) throw refusal(flag, why);
  });
}

po::typed_value<std::string>* refused_value(const char* flag, const char* why) {
  return po::value<std::string>()->notifier([flag, why](const std::string&) { throw refusal(flag, why); });
}

}  // namespace

// clang-format off
void bind_compatibility_flags(po::options_description& d, CompatibilityFlags& c) {
  po::options_description aliases("aliases and launcher flags"), noop("accepted, no effect in megaton"),
      refused("refused (they would change the run in ways megaton does not implement)");
  aliases.add_options()
      ("encoder-seq-length", po::value(&c.encoder_seq_length)->default_value(0, "None"),
       "the same as --seq-length (pretrain_gpt.py's other name; give one of the two)")
      ("deepscale", po::bool_switch(), "DeepSpeed's deprecated helper flag; no effect, as in DeepSpeed")
      ("deepscale_config", po::value(&c.deepscale_config), "DeepSpeed's deprecated name of --deepspeed_config")
      ("local_rank", ignored<int>(), "set by torch.distributed/DeepSpeed launchers; megaton reads its rank from MPI")
      ("DDP-impl", po::value(&c.ddp_impl)->default_value("local"),
       "local | torch: either way, megaton's bucketed data-parallel all-reduce (the same sums)")
      ("use-contiguous-buffers-in-ddp", po::bool_switch(), "megaton's gradients always live in one contiguous buffer")
      ("inference", po::bool_switch(&c.inference), "generate/eval: no optimizer state (they never allocate one)");
  noop.add_options()
      ("onnx-safe", po::bool_switch(), "ONNX-export workarounds; megaton exports no ONNX (takes True/False)")
      ("lazy-mpu-init", po::bool_switch(), "external DDP management; megaton initialises its own groups")
      ("use-cpu-initialization", po::bool_switch(),
       "megaton initialises every weight from the seed on the CPU, identically at any layout")
      ("no-scatter-gather-tensors-in-pipeline", po::bool_switch(),
       "pipeline transfers are full per-rank activations; the same values either way")
      ("distribute-checkpointed-activations", po::bool_switch(), "activation memory layout only")
      ("partition-activations", po::bool_switch(), "DeepSpeed activation checkpointing: memory only")
      ("contigious-checkpointing", po::bool_switch(), "DeepSpeed activation checkpointing: memory only")
      ("checkpoint-in-cpu", po::bool_switch(), "DeepSpeed activation checkpointing: memory only")
      ("synchronize-each-layer", po::bool_switch(), "DeepSpeed activation checkpointing: synchronisation only")
      ("profile-backward", po::bool_switch(), "DeepSpeed activation checkpointing: profiling only")
      ("scattered-embeddings", po::bool_switch(), "memory only")
      ("split-transformers", po::bool_switch(), "memory only")
      ("memory-centric-tiled-linear", po::bool_switch(), "DeepSpeed ZeRO-3 tiling: memory only")
      ("tile-factor", ignored<int>(), "with --memory-centric-tiled-linear")
      ("zero-reduce-scatter", po::bool_switch(), "ZeRO-3 option; megaton's ZeRO-1 always reduce-scatters")
      ("zero-contigious-gradients", po::bool_switch(), "ZeRO-3 option: memory only")
      ("zero-reduce-bucket-size", ignored<int64_t>(), "ZeRO-3 option; see --dp-bucket-size-mb")
      ("zero-allgather-bucket-size", ignored<int64_t>(), "ZeRO-3 option")
      ("use-pin-memory", po::bool_switch(), "ZeRO-3 option: host memory only")
      ("remote-device", po::value(&c.remote_device)->default_value("none"),
       "ZeRO-3 parameter offload: none (cpu and nvme are refused)")
      ("cpu-optimizer", po::bool_switch(), "DeepSpeed's CPU Adam: the same update, run where the parameters live")
      ("cpu_torch_adam", po::bool_switch(), "with --cpu-optimizer")
      ("adlr-autoresume", po::bool_switch(),
       "NVIDIA's ADLR cluster library; on SLURM, megaton saves and exits on SIGUSR1/SIGTERM (docs/slurm.md)")
      ("adlr-autoresume-interval", ignored<int>(), "with --adlr-autoresume")
      ("decoder-seq-length", ignored<int>(), "encoder-decoder models only")
      ("vocab-extra-ids", ignored<int>(), "T5 sentinel tokens; GPT's tokenizers take none")
      ("mask-prob", ignored<double>(), "BERT/T5 masking only")
      ("short-seq-prob", ignored<double>(), "BERT only")
      ("noise-density", ignored<double>(), "T5 span corruption only")
      ("mean-noise-span-length", ignored<int>(), "T5 span corruption only")
      ("sample-rate", ignored<double>(), "ORQA retrieval data only")
      ("bert-load", ignored<std::string>(), "ICT/REALM only")
      ("bert-no-binary-head", po::bool_switch(), "BERT only")
      ("ict-head-size", ignored<int>(), "ICT/REALM only")
      ("ict-load", ignored<std::string>(), "ICT/REALM only")
      ("biencoder-projection-dim", ignored<int>(), "biencoder only")
      ("biencoder-shared-query-context-model", po::bool_switch(), "biencoder only")
      ("titles-data-path", ignored<std::string>(), "ICT only")
      ("query-in-block-prob", ignored<double>(), "ICT only")
      ("use-one-sent-docs", po::bool_switch(), "ICT only")
      ("evidence-data-path", ignored<std::string>(), "retrieval only")
      ("retriever-report-topk-accuracies", po::value<std::vector<int>>()->multitoken(), "retrieval only")
      ("retriever-score-scaling", po::bool_switch(), "retrieval only")
      ("retriever-seq-length", ignored<int>(), "retrieval only")
      ("block-data-path", ignored<std::string>(), "retrieval only")
      ("embedding-path", ignored<std::string>(), "retrieval only")
      ("indexer-batch-size", ignored<int>(), "retrieval only")
      ("indexer-log-interval", ignored<int>(), "retrieval only")
      ("num-classes", ignored<int>(), "ViT only")
      ("img-dim", ignored<int>(), "ViT only")
      ("num-channels", ignored<int>(), "ViT only")
      ("patch-dim", ignored<int>(), "ViT only");
  refused.add_options()
      ("batch-size", refused_value("batch-size", "Megatron-DeepSpeed refuses it too; use --micro-batch-size"))
      ("warmup", refused_value("warmup", "Megatron-DeepSpeed refuses it too; use --lr-warmup-iters or --lr-warmup-samples"))
      ("model-parallel-size", refused_value("model-parallel-size",
                                            "Megatron-DeepSpeed refuses it too; use --tensor-model-parallel-size"))
      ("mup-coord-check", refused_switch("mup-coord-check",
                                         "the muP branch's coordinate-check debugging mode is not implemented"));
  d.add(aliases).add(noop).add(refused);
}
// clang-format on

}  // namespace megaton::cli
