#include "dist/job_error.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include "core/error.h"
#include "dist/launch_env.h"

namespace megaton::dist {
namespace {

constexpr int kErrorTag = 31457;  // below the MPI-guaranteed MPI_TAG_UB of 32767; megaton's own messages use tag 0
constexpr auto kGatherWindow = std::chrono::seconds(10);   // how long the failing ranks wait to hear from the others
constexpr auto kQuietGrace = std::chrono::seconds(20);     // a quiet rank's wait for the printing rank's MPI_Abort
constexpr auto kFinalizeLimit = std::chrono::seconds(30);  // MPI_Finalize gets this long before the process just exits

std::string tag(int rank, int world) {
  return str("[r", rank, "/", world, "] megaton: ");
}

std::string encode(const RankError& e) {
  return str(e.code, "\n", e.kind, "\n", e.what);
}

RankError decode(int rank, const std::string& s) {
  RankError e;
  e.rank = rank;
  const size_t a = s.find('\n'), b = a == std::string::npos ? a : s.find('\n', a + 1);
  if (b == std::string::npos) {
    e.kind = "error";
    e.what = s;
    return e;
  }
  e.code = std::atoi(s.substr(0, a).c_str());
  e.kind = s.substr(a + 1, b - a - 1);
  e.what = s.substr(b + 1);
  return e;
}

// The log lines still buffered for stdout: written before an error (whole lines, so the error does not land inside
// one) and before the process ends (std::_Exit does not flush).
void flush_stdout() {
  std::cout << std::flush;
  std::fflush(stdout);
}

void print(const std::vector<std::string>& lines) {
  flush_stdout();
  for (const auto& l : lines) std::cerr << l << "\n";
  std::cerr << std::flush;
}

// Sends `mine` to every other rank and collects what the other failing ranks send, until all have been heard or the
// window closes. Returns the errors heard, `mine` included, keyed by rank.
std::map<int, RankError> gather_errors(const RankError& mine, int world, std::vector<MPI_Request>& sends,
                                       std::string& payload) {
  payload = encode(mine);
  for (int r = 0; r < world; ++r) {
    if (r == mine.rank) continue;
    MPI_Request req;
    if (MPI_Isend(payload.data(), static_cast<int>(payload.size()), MPI_CHAR, r, kErrorTag, MPI_COMM_WORLD, &req) ==
        MPI_SUCCESS)
      sends.push_back(req);
  }
  std::map<int, RankError> heard{{mine.rank, mine}};
  const auto deadline = std::chrono::steady_clock::now() + kGatherWindow;
  while (static_cast<int>(heard.size()) < world && std::chrono::steady_clock::now() < deadline) {
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kErrorTag, MPI_COMM_WORLD, &flag, &st) != MPI_SUCCESS) break;
    if (!flag) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      continue;
    }
    int n = 0;
    MPI_Get_count(&st, MPI_CHAR, &n);
    std::string buf(static_cast<size_t>(std::max(n, 0)), '\0');
    MPI_Recv(buf.data(), n, MPI_CHAR, st.MPI_SOURCE, kErrorTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    heard[st.MPI_SOURCE] = decode(st.MPI_SOURCE, buf);
  }
  return heard;
}

[[noreturn]] void finalize_and_exit(int code) {
  flush_stdout();
  std::thread([code] {
    std::this_thread::sleep_for(kFinalizeLimit);
    std::_Exit(code);
  }).detach();
  MPI_Finalize();
  std::_Exit(code);
}

}  // namespace

const RankError& primary_error(const std::vector<RankError>& heard) {
  for (const auto& e : heard)
    if (e.code != static_cast<int>(ExitCode::kComm)) return e;
  return heard.front();
}

std::vector<std::string> error_lines(const std::vector<RankError>& heard, int world, size_t max_lines) {
  const RankError& primary = primary_error(heard);
  const bool causes_known = primary.code != static_cast<int>(ExitCode::kComm);
  std::vector<std::string> lines{tag(primary.rank, world) + primary.kind + ": " + primary.what};
  std::set<std::pair<std::string, std::string>> printed{{primary.kind, primary.what}};
  size_t rest = 0, waiting = 0;
  for (const auto& e : heard) {
    if (causes_known && e.code == static_cast<int>(ExitCode::kComm)) {
      ++waiting;
      continue;
    }
    if (!printed.insert({e.kind, e.what}).second) continue;
    if (lines.size() < max_lines)
      lines.push_back(tag(e.rank, world) + e.kind + ": " + e.what);
    else
      ++rest;
  }
  if (rest) lines.push_back(str(tag(primary.rank, world), "... and ", rest, " more different errors on other ranks"));
  if (waiting)
    lines.push_back(str(tag(primary.rank, world), waiting, waiting == 1 ? " other rank" : " other ranks",
                        " stopped waiting for it (communication error)"));
  return lines;
}

void end_job_with_error(const RankError& given, bool same_on_every_rank) {
  RankError mine = given;
  int initialized = 0, finalized = 0, world = 1;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) {
    // Before MPI starts (flag parsing), the launcher's place in the job. A usage error is every rank's alike, so only
    // the first rank prints it and ends the job with its code. The others exit quietly with status 0: a launcher
    // (mpirun) ends every process as soon as one exits non-zero, which could stop rank 0 before it has printed.
    const LaunchEnv env = detect_launch_env();
    mine.rank = env.rank;
    if (same_on_every_rank && env.rank != 0) std::_Exit(0);
    print({tag(env.rank, env.size) + mine.kind + ": " + mine.what});
    std::_Exit(mine.code);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &mine.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world == 1) {
    print({tag(0, 1) + mine.kind + ": " + mine.what});
    finalize_and_exit(mine.code);
  }

  std::vector<MPI_Request> sends;
  std::string payload;
  const std::map<int, RankError> heard_map = gather_errors(mine, world, sends, payload);
  std::vector<RankError> heard;
  for (const auto& [r, e] : heard_map) heard.push_back(e);
  const RankError& primary = primary_error(heard);
  const bool everyone = static_cast<int>(heard.size()) == world;

  if (everyone) {
    // Every rank holds the same errors: the primary error's rank prints, all end through MPI_Finalize with its code.
    if (mine.rank == primary.rank) print(error_lines(heard, world));
    MPI_Waitall(static_cast<int>(sends.size()), sends.data(), MPI_STATUSES_IGNORE);
    finalize_and_exit(primary.code);
  }
  // Some ranks did not fail: they may wait in a collective that never completes, so MPI_Abort ends the job.
  if (mine.rank == primary.rank) {
    std::vector<std::string> lines = error_lines(heard, world);
    lines.push_back(str(tag(mine.rank, world), "aborting all ", world, " ranks with exit code ", primary.code));
    print(lines);
    MPI_Abort(MPI_COMM_WORLD, primary.code);
    std::_Exit(primary.code);
  }
  // Another rank prints what it heard; this rank's error may not have reached it in time, so one that differs is
  // printed here as well. That rank's MPI_Abort ends this process; if it does not come, abort here.
  if (mine.kind != primary.kind || mine.what != primary.what)
    print({tag(mine.rank, world) + mine.kind + ": " + mine.what});
  std::this_thread::sleep_for(kQuietGrace);
  MPI_Abort(MPI_COMM_WORLD, primary.code);
  std::_Exit(primary.code);
}

}  // namespace megaton::dist
