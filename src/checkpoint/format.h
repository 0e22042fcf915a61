// The names and constants of the checkpoint format (checkpoints-format/SPEC.md is the specification; change both in
// the same commit). A checkpoint directory holds iter_NNNNNNN/ (or release/) sub-directories, each with one parallel
// HDF5 file, and the tracker files `latest` and `latest_checkpointed_iteration.txt` naming the newest complete one.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

namespace megaton::checkpoint {

/// Bumped on any incompatible change of the file layout; readers refuse versions they do not know.
inline constexpr int kFormatVersion = 1;
inline constexpr const char* kFormatName = "megaton-checkpoint";
inline constexpr const char* kFileName = "model_optim.h5";
inline constexpr const char* kTrackerFile = "latest";
/// Megatron's tracker name, written alongside `latest` with the same content so existing scripts keep working.
inline constexpr const char* kMegatronTrackerFile = "latest_checkpointed_iteration.txt";
inline constexpr const char* kReleaseName = "release";
/// The iteration value that stands for a release checkpoint (directory release/, tracker text "release").
inline constexpr int64_t kReleaseIteration = -1;

// Groups of the file. Tensors are "<section>/<canonical name>".
inline constexpr const char* kModelSection = "model";
inline constexpr const char* kOptimSection = "optim";  // optim/<state>/<name>: master, exp_avg, exp_avg_sq, ...
inline constexpr const char* kRngSection = "rng";      // rng/<generator>: [world, nbytes] uint8, row = global rank
inline constexpr const char* kMetaSection = "meta";    // meta/<what>.json: uint8 JSON text
inline constexpr const char* kMetaChecksums =
    "checksums.json";  // meta/checksums.json: blob -> CRC-32 (meta_checksums.h)
/// Suffix of the dataset that holds the vocabulary padding rows of a padded tensor ("<path>.vocab_padding").
inline constexpr const char* kPaddingSuffix = ".vocab_padding";

/// "iter_0000100", or "release" for kReleaseIteration.
std::string iteration_dir_name(int64_t iteration);

/// "float32" | "float64" | "float16" | "bfloat16" | "int64" | "int32" | "uint8" (the dtype attribute's values).
std::string dtype_name(torch::ScalarType t);
/// Inverse of dtype_name; throws CheckpointError naming `where` for an unknown name.
torch::ScalarType dtype_from_name(const std::string& name, const std::string& where);
/// The bytes of a tensor stored as `dtype_name` with `shape` (CheckpointError naming `where` for an unknown dtype).
int64_t stored_bytes(const std::string& dtype_name, const std::vector<int64_t>& shape, const std::string& where);

}  // namespace megaton::checkpoint
