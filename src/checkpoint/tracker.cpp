#include "checkpoint/tracker.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "checkpoint/format.h"
#include "core/error.h"
#include "core/remove_tree.h"
#include "core/safe_file.h"

namespace fs = std::filesystem;

namespace megaton::checkpoint {

int64_t parse_tracker_text(const std::string& text, const std::string& where) {
  std::string t = text;
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
  size_t b = 0;
  while (b < t.size() && std::isspace(static_cast<unsigned char>(t[b]))) ++b;
  t = t.substr(b);
  if (t == kReleaseName) return kReleaseIteration;
  // Megatron-DeepSpeed's own tracker may say "global_stepN".
  std::string digits = t.rfind("global_step", 0) == 0 ? t.substr(11) : t;
  if (!digits.empty() && digits.size() <= 15 && std::all_of(digits.begin(), digits.end(), ::isdigit))
    return std::stoll(digits);
  throw CheckpointError(str(where, ": expected an iteration number or 'release', found '",
                            t.size() > 40 ? t.substr(0, 40) + "..." : t, "'"));
}

std::optional<int64_t> read_latest_iteration(const std::string& dir, std::string* warning) {
  std::vector<std::pair<std::string, int64_t>> found;  // tracker file -> iteration
  for (const char* name : {kTrackerFile, kMegatronTrackerFile}) {
    const fs::path p = fs::path(dir) / name;
    if (!fs::exists(p)) continue;
    std::ifstream in(p);
    if (!in) throw CheckpointError(str(p.string(), ": cannot read: ", std::strerror(errno)));
    std::stringstream ss;
    ss << in.rdbuf();
    found.emplace_back(name, parse_tracker_text(ss.str(), p.string()));
  }
  if (found.empty()) return std::nullopt;
  if (found.size() == 1 || found[0].second == found[1].second) return found[0].second;
  // They disagree: the newer one whose directory exists (a release sorts last: it is never newer).
  auto exists = [&](int64_t it) { return fs::is_directory(fs::path(dir) / iteration_dir_name(it)); };
  const auto& newer = found[0].second > found[1].second ? found[0] : found[1];
  const auto& older = found[0].second > found[1].second ? found[1] : found[0];
  const auto& pick = exists(newer.second) || !exists(older.second) ? newer : older;
  if (warning)
    *warning = str(dir, ": '", found[0].first, "' says ", found[0].second, " but '", found[1].first, "' says ",
                   found[1].second, "; loading ", pick.second, " (the newer whose directory exists)");
  return pick.second;
}

void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw RuntimeError(str(path, ": cannot open for fsync: ", std::strerror(errno)));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // Some file systems refuse fsync on directories (EINVAL); the rename is still atomic there.
  if (rc != 0 && err != EINVAL) throw RuntimeError(str(path, ": fsync failed: ", std::strerror(err)));
}

void write_file_atomic(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string tmp = (fs::path(dir) / (name + ".tmp")).string();
  const std::string dst = (fs::path(dir) / name).string();
  refuse_symlink(dst, "checkpoint tracker");
  const int fd = create_exclusive(tmp, "checkpoint tracker");
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw RuntimeError(str(tmp, ": cannot write: ", std::strerror(err)));
    }
    done += static_cast<size_t>(n);
  }
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0 && err != EINVAL) throw RuntimeError(str(tmp, ": fsync failed: ", std::strerror(err)));
  if (std::rename(tmp.c_str(), dst.c_str()) != 0)
    throw RuntimeError(str("cannot rename ", tmp, " to ", dst, ": ", std::strerror(errno)));
  fsync_path(dir);
}

void write_latest(const std::string& dir, int64_t iteration) {
  const std::string text =
      (iteration == kReleaseIteration ? std::string(kReleaseName) : std::to_string(iteration)) + "\n";
  write_file_atomic(dir, kTrackerFile, text);
  write_file_atomic(dir, kMegatronTrackerFile, text);
}

std::vector<int64_t> list_checkpoints(const std::string& dir) {
  std::vector<int64_t> out;
  if (!fs::is_directory(dir)) return out;
  static const std::regex re("iter_([0-9]{7,})");
  for (const auto& e : fs::directory_iterator(dir)) {
    std::smatch m;
    const std::string n = e.path().filename().string();
    if (e.is_directory() && std::regex_match(n, m, re)) out.push_back(std::stoll(m[1]));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int64_t> prune_checkpoints(const std::string& dir, int keep, int64_t protect) {
  std::vector<int64_t> removed;
  if (keep <= 0) return removed;
  std::vector<int64_t> its = list_checkpoints(dir);
  while (static_cast<int>(its.size()) > keep) {
    const int64_t it = its.front();
    its.erase(its.begin());
    if (it == protect) continue;
    std::string why;
    if (!remove_tree((fs::path(dir) / iteration_dir_name(it)).string(), &why))
      throw CheckpointError(str("--keep-last: cannot prune checkpoint ", it, ": ", why));
    removed.push_back(it);
  }
  return removed;
}

namespace {
constexpr const char* kOwnerFile = ".owner";

std::string host_name() {
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  return host;
}
}  // namespace

void write_temporary_owner(const std::string& tmp_dir, const std::string& job) {
  write_file_atomic(tmp_dir, kOwnerFile, str(host_name(), " ", ::getpid(), " ", job, "\n"));
}

bool temporary_is_orphaned(const std::string& tmp_dir, const std::string& job, std::string* why) {
  std::ifstream in(fs::path(tmp_dir) / kOwnerFile);
  std::string host, owner_job;
  long long pid = 0;
  if (!(in >> host >> pid >> owner_job)) return false;
  if (owner_job == job) {
    if (why) *why = str("it belongs to this job (", job, ")");
    return true;
  }
  if (host == host_name() && pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
    if (why) *why = str("its writer, process ", pid, " on ", host, ", is gone");
    return true;
  }
  return false;
}

std::vector<int64_t> publish_checkpoint(const std::string& dir, const std::string& tmp_dir, int64_t iteration,
                                        const std::string& job, int keep_last) {
  const std::string final_dir = (fs::path(dir) / iteration_dir_name(iteration)).string();
  std::error_code ec;
  fs::remove(fs::path(tmp_dir) / kOwnerFile, ec);  // the published directory holds the checkpoint only
  fsync_path(tmp_dir);
  std::string old;
  if (fs::exists(final_dir)) {  // re-saving the same iteration: keep the old one until the new one is in place
    old = final_dir + ".old-" + job;
    remove_tree(old);
    fs::rename(final_dir, old, ec);
    if (ec) throw CheckpointError(str("cannot move aside ", final_dir, ": ", ec.message()));
  }
  fs::rename(tmp_dir, final_dir, ec);
  if (ec) throw CheckpointError(str("cannot rename ", tmp_dir, " to ", final_dir, ": ", ec.message()));
  fsync_path(dir);
  write_latest(dir, iteration);
  if (!old.empty()) remove_tree(old);
  if (keep_last > 0 && iteration != kReleaseIteration) return prune_checkpoints(dir, keep_last, iteration);
  return {};
}

std::vector<std::string> stale_temporaries(const std::string& dir) {
  std::vector<std::string> out;
  if (!fs::is_directory(dir)) return out;
  static const std::regex re("iter_[0-9]{7,}\\.tmp-.*|release\\.tmp-.*");
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (e.is_directory() && std::regex_match(n, re)) out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace megaton::checkpoint
