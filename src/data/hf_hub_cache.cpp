#include "data/hf_hub_cache.h"

#include <cctype>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace fs = std::filesystem;

namespace megaton::data {
namespace {

bool set(const char* v) {
  return v != nullptr && *v != '\0';
}

// ORG/NAME or NAME, as the hub spells repository ids: letters, digits, '-', '_', '.', at most one '/'.
bool is_hub_name(const std::string& s) {
  if (s.empty() || s.front() == '/' || s.front() == '.' || s.back() == '/') return false;
  int slashes = 0;
  for (const char c : s) {
    if (c == '/') {
      ++slashes;
    } else if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      return false;
    }
  }
  return slashes <= 1 && s.find("..") == std::string::npos;
}

// The snapshot directory of `repo` (models--ORG--NAME) for the main revision, or "" when there is none.
std::string snapshot_of(const fs::path& repo) {
  std::error_code ec;
  if (!fs::is_directory(repo / "snapshots", ec)) return "";
  std::ifstream ref(repo / "refs" / "main");
  std::string hash;
  if (ref && std::getline(ref, hash) && !hash.empty() && fs::is_directory(repo / "snapshots" / hash, ec))
    return (repo / "snapshots" / hash).string();
  std::vector<fs::path> snapshots;
  for (const auto& e : fs::directory_iterator(repo / "snapshots", ec))
    if (e.is_directory()) snapshots.push_back(e.path());
  if (snapshots.size() == 1) return snapshots.front().string();
  if (snapshots.empty()) return "";
  throw DataError(str(repo.string(), ": ", snapshots.size(),
                      " snapshots and no refs/main naming one; give the snapshot directory itself"));
}

}  // namespace

std::vector<std::string> hf_hub_cache_dirs(const GetEnv& env) {
  std::vector<std::string> dirs;
  for (const char* var : {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_CACHE"})
    if (set(env(var))) dirs.emplace_back(env(var));
  if (set(env("HF_HOME")))
    dirs.push_back((fs::path(env("HF_HOME")) / "hub").string());
  else if (set(env("XDG_CACHE_HOME")))
    dirs.push_back((fs::path(env("XDG_CACHE_HOME")) / "huggingface" / "hub").string());
  else if (set(env("HOME")))
    dirs.push_back((fs::path(env("HOME")) / ".cache" / "huggingface" / "hub").string());
  return dirs;
}

std::string resolve_hf_name_or_path(const std::string& name_or_path, const GetEnv& env) {
  std::error_code ec;
  if (fs::exists(name_or_path, ec) || !is_hub_name(name_or_path)) return name_or_path;
  std::string repo_dir = "models--" + name_or_path;
  for (size_t i = 0; (i = repo_dir.find('/', i)) != std::string::npos;) repo_dir.replace(i, 1, "--");
  const std::vector<std::string> dirs = hf_hub_cache_dirs(env);
  std::string searched;
  for (const auto& d : dirs) {
    const std::string snap = snapshot_of(fs::path(d) / repo_dir);
    if (!snap.empty()) return snap;
    searched += (searched.empty() ? "" : ", ") + (fs::path(d) / repo_dir).string();
  }
  throw DataError(str("--tokenizer-name-or-path '", name_or_path,
                      "': no such directory, and no Hugging Face hub cache holds it (searched ",
                      searched.empty() ? std::string("nothing: HF_HOME and HOME are unset") : searched,
                      "). megaton does not download: on a machine with network run `huggingface-cli download ",
                      name_or_path, " tokenizer.json` (it fills the same cache), or give the directory"));
}

}  // namespace megaton::data
