// --tokenizer-name-or-path given a Hugging Face hub name ("bigscience/bloom") rather than a directory: the files are
// looked up where huggingface_hub caches them, laid out as it lays them out:
//   CACHE/models--bigscience--bloom/refs/main              the commit hash of the main revision
//   CACHE/models--bigscience--bloom/snapshots/HASH/...     that revision's files (tokenizer.json, config.json)
// Each CACHE is searched in turn: $HF_HUB_CACHE, $HUGGINGFACE_HUB_CACHE and $TRANSFORMERS_CACHE where set, then
// $HF_HOME/hub (else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub). megaton never downloads.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace megaton::data {

using GetEnv = std::function<const char*(const char*)>;

/// The hub cache directories to search, in order (only those whose variables are set; the default last).
std::vector<std::string> hf_hub_cache_dirs(const GetEnv& env);

/// `name_or_path` itself when it exists on disk; else, for a hub name (ORG/NAME or NAME), the cached snapshot
/// directory of its main revision (refs/main, or the only snapshot). DataError naming the name, the directories
/// searched and how to fetch the files when neither is found.
std::string resolve_hf_name_or_path(const std::string& name_or_path, const GetEnv& env);

}  // namespace megaton::data
