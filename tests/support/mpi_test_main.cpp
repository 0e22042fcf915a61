// main() of the multi-rank test binary: ctest runs it under `mpirun -np N`. Every rank runs every test; only rank 0
// prints; the exit code is non-zero if any test failed on any rank (summed with MPI_Allreduce).
#include <gtest/gtest.h>
#include <mpi.h>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  ::testing::InitGoogleTest(&argc, argv);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int local_failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int failed = 0;
  MPI_Allreduce(&local_failed, &failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0 && failed) std::fprintf(stderr, "multi-rank tests failed on %d rank(s)\n", failed);
  MPI_Finalize();
  return failed ? 1 : 0;
}
