// Which implementation each fusible piece of the model runs: the fused kernels and cuBLASLt epilogues are the
// defaults; each field false selects the plain ATen path (Megatron's --no-* flags and megaton's own). None of them
// changes what is computed beyond rounding, so none is stored in checkpoints. Most apply on CUDA only; on the CPU the
// ATen path runs whatever they say.
#pragma once

namespace megaton::ops {

struct KernelOptions {
  bool fused_layernorm = true;               // megaton's LayerNorm kernels (with the residual add)
  bool gemm_epilogue = true;                 // fc1's bias and GELU in its GEMM's cuBLASLt epilogue
  bool gemm_dgelu_epilogue = true;           // GELU's derivative in fc2's input-gradient GEMM's epilogue
  bool qkv_grad_fusion = true;               // the QKV gradient and its bias gradient in one pass
  bool masked_softmax_fusion = true;         // a fused attention kernel (SDPA) instead of scores, mask, softmax
  bool varlen_attention = true;              // --reset-attention-mask's documents through variable-length flash
  bool alibi_fold = true;                    // ALiBi folded into extra head dimensions of causal SDPA
  bool dropout_layernorm_fusion = true;      // the hidden dropout drawn inside the LayerNorm kernels
  bool fused_lm_head_loss = true;            // the LM head and its cross-entropy as one op
  bool gradient_accumulation_fusion = true;  // weight gradients added straight into the fp32 main grads
  // --gemm-epilogue-fusion given explicitly: the trainer warns where the MLP cannot take the epilogue.
  bool gemm_epilogue_asked = false;
};

}  // namespace megaton::ops
