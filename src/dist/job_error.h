// How a job ends on an error: printed once, by the lowest rank that hit it, and every rank exits with its documented
// code (docs/errors.md).
//
// Before MPI starts (flag parsing) every rank finds the same usage error: the launcher's rank 0 prints it and exits
// with its code, the others exit 0 without a word. After MPI starts, a failing rank sends its error to every other rank
// (point to point, on a tag nothing else uses) and listens for theirs for a gather window. When every rank failed
// (an error found everywhere: a bad flag, a missing file, a checkpoint that does not match), the lowest rank's error
// (one that is not a peer's timeout) is printed with any different ones, and all ranks end through MPI_Finalize with
// its code: no MPI_Abort and no banner. When some ranks did not fail (they wait in a collective), the failing ranks
// print what is theirs to print and MPI_Abort takes the job down.
#pragma once
#include <string>
#include <vector>

namespace megaton::dist {

/// One rank's error: the exit code, the kind ("usage error") and the message.
struct RankError {
  int rank = 0;
  int code = 1;
  std::string kind;
  std::string what;
};

/// The error that ended the job among those heard (sorted by rank): the lowest rank's that is not a communication
/// error (ranks that time out waiting for a failed peer report those), else the lowest rank's.
const RankError& primary_error(const std::vector<RankError>& heard);

/// The lines the primary error's rank prints for the errors heard (sorted by rank): the primary error, then each
/// different one once, tagged with its rank, at most `max_lines` in all and then a count of the rest; communication
/// errors behind a primary error of another kind are counted in one line.
std::vector<std::string> error_lines(const std::vector<RankError>& heard, int world, size_t max_lines = 4);

/// Prints `mine` as described above and ends the process. `same_on_every_rank` is for errors found before MPI starts.
[[noreturn]] void end_job_with_error(const RankError& mine, bool same_on_every_rank);

}  // namespace megaton::dist
