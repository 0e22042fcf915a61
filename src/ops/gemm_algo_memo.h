// What cuBLASLt's heuristic ranks first for each GEMM a model layer runs through ops/cublaslt_gemm.h, asked once per
// GEMM key (shapes, layouts, epilogue, dtype, alignments, device) and then reused: the heuristic's answer depends on
// the key alone, and asking it costs host time on every call. One per TransformerLayer (its MLP's two epilogue
// GEMMs) and one per FP8 linear layer (in its slots), owned there and passed down explicitly; not shared between
// threads. In a build without CUDA it stays empty.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace megaton::ops {

class GemmAlgoMemo {
 public:
  using Key = std::vector<int64_t>;
  using Algo = std::vector<uint64_t>;  // the algorithm descriptor's bytes (cublasLtMatmulAlgo_t is plain data)

  /// The remembered answer for `key`: nullopt when never asked; an empty Algo when cuBLASLt offered none.
  std::optional<Algo> find(const Key& key) const;
  void remember(const Key& key, Algo algo);
  size_t size() const { return algos_.size(); }

 private:
  std::map<Key, Algo> algos_;
};

}  // namespace megaton::ops
