// The checkpoint directory: tracker files (`latest`, and Megatron's latest_checkpointed_iteration.txt with the same
// text: an iteration number or "release"), crash-safe publication (write to a temporary name, fsync, rename, fsync
// the directory) and pruning to the newest K checkpoints. All of it is plain POSIX file work done by one rank.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace megaton::checkpoint {

/// The iteration named by <dir>/latest (falling back to latest_checkpointed_iteration.txt); kReleaseIteration for
/// "release"; nullopt when neither file exists. Throws CheckpointError naming the file for any other content.
/// When both exist and disagree (a save interrupted between the two, or an edit), the newer iteration whose
/// directory exists is taken and `warning` (if given) says so; the caller logs it.
std::optional<int64_t> read_latest_iteration(const std::string& dir, std::string* warning = nullptr);

/// Parses a tracker file's text ("100\n", "release"). Throws CheckpointError naming `where` otherwise.
int64_t parse_tracker_text(const std::string& text, const std::string& where);

/// Atomically replaces <dir>/<name> by `text`: writes <name>.tmp, fsyncs it, renames it over <name>, fsyncs dir.
void write_file_atomic(const std::string& dir, const std::string& name, const std::string& text);

/// Points both tracker files at `iteration`.
void write_latest(const std::string& dir, int64_t iteration);

/// fsync of a file or directory by path (throws RuntimeError on failure).
void fsync_path(const std::string& path);

/// Iterations of the complete iter_NNNNNNN directories in `dir`, ascending (temporary *.tmp-* dirs are not listed).
std::vector<int64_t> list_checkpoints(const std::string& dir);

/// Removes all but the newest `keep` iter_ directories, never removing `protect` (the one just published).
/// Returns the iterations removed.
std::vector<int64_t> prune_checkpoints(const std::string& dir, int keep, int64_t protect);

/// Publishes a finished temporary directory: fsync it, rename it to <dir>/iter_NNNNNNN (moving an existing one of the
/// same iteration aside until the rename succeeded), fsync <dir>, point the trackers at it, prune to `keep_last`
/// (0: keep all). Returns the pruned iterations.
std::vector<int64_t> publish_checkpoint(const std::string& dir, const std::string& tmp_dir, int64_t iteration,
                                        const std::string& job, int keep_last);

/// Left-over temporary directories (iter_NNNNNNN.tmp-<job>) of interrupted saves.
std::vector<std::string> stale_temporaries(const std::string& dir);

/// Records in `tmp_dir` (file .owner) which process writes it: this host, this pid, `job`.
void write_temporary_owner(const std::string& tmp_dir, const std::string& job);
/// Whether no job can still own the temporary directory `tmp_dir`: its .owner names `job` (this job, or a requeued
/// one with the same id), or a process of this host that no longer exists. `why` says which. A directory without
/// .owner, or owned by a live process or another host's job, is not orphaned.
bool temporary_is_orphaned(const std::string& tmp_dir, const std::string& job, std::string* why);

}  // namespace megaton::checkpoint
