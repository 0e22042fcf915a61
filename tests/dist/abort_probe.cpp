// A misbehaving multi-rank job, for tests/dist/abort_test.sh: one rank fails while the others wait in a
// collective. megaton must end the whole job promptly with the documented exit code, never hang.
//   abort_probe throw   rank 1 throws DataError before the all-reduce         -> every rank exits 3 (data error)
//   abort_probe hang    rank 1 never joins the all-reduce; timeout 2 s         -> exit 5 (communication error)
//   abort_probe exit    rank 1 exits(0) without MPI_Finalize                   -> the launcher ends the job, non-zero
//   abort_probe ok      everyone joins                                         -> exit 0
#include <mpi.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "core/error.h"
#include "dist/guarded_run.h"
#include "dist/launch_env.h"
#include "dist/mpi_session.h"
#include "dist/process_groups.h"

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "ok";
  return megaton::dist::guarded_run([&] {
    megaton::dist::MpiSession session(megaton::dist::detect_launch_env());
    auto groups = megaton::dist::build_process_groups(megaton::dist::RankGrid(session.size(), 1, 1),
                                                      megaton::dist::Backend::kMpi, 2.0);
    torch::Tensor t = torch::ones({4});
    if (session.rank() == 1) {
      if (mode == "throw") throw megaton::DataError("corpus.jsonl:17: expected a JSON object (probe)");
      if (mode == "hang") std::this_thread::sleep_for(std::chrono::hours(1));
      if (mode == "exit") std::_Exit(0);
    }
    groups.world->all_reduce(t);
    MEGATON_CHECK(t[0].item<float>() == session.size(), megaton::InternalError, "wrong all-reduce result");
    return 0;
  });
}
