#include "dist/launch_env.h"

#include <gtest/gtest.h>

#include "core/error.h"

using namespace megaton::dist;

TEST(LaunchEnv, SlurmVariables) {
  auto e = detect_launch_env(env_from_map({{"SLURM_PROCID", "5"},
                                           {"SLURM_NTASKS", "8"},
                                           {"SLURM_LOCALID", "1"},
                                           {"SLURM_NODEID", "2"},
                                           {"SLURM_NTASKS_PER_NODE", "4"},
                                           {"SLURM_JOB_ID", "1234"},
                                           {"OMPI_COMM_WORLD_RANK", "0"},
                                           {"OMPI_COMM_WORLD_SIZE", "1"}}));
  EXPECT_EQ(e.launcher, "slurm");
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.size, 8);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_size, 4);
  EXPECT_EQ(e.node_id, 2);
  EXPECT_EQ(e.job_id, "1234");
}

TEST(LaunchEnv, SbatchScriptWithoutStepIsNotAStep) {
  // The batch script itself has SLURM_NTASKS but no SLURM_PROCID: it is not a task of a step.
  auto e = detect_launch_env(env_from_map({{"SLURM_NTASKS", "8"}}));
  EXPECT_EQ(e.launcher, "singleton");
}

TEST(LaunchEnv, OpenMpiVariables) {
  auto e = detect_launch_env(env_from_map({{"OMPI_COMM_WORLD_RANK", "3"},
                                           {"OMPI_COMM_WORLD_SIZE", "4"},
                                           {"OMPI_COMM_WORLD_LOCAL_RANK", "3"},
                                           {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}));
  EXPECT_EQ(e.launcher, "openmpi");
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.local_rank, 3);
}

TEST(LaunchEnv, PmiVariables) {
  auto e = detect_launch_env(env_from_map({{"PMI_RANK", "2"}, {"PMI_SIZE", "6"}, {"MPI_LOCALRANKID", "0"}}));
  EXPECT_EQ(e.launcher, "pmi");
  EXPECT_EQ(e.rank, 2);
  EXPECT_EQ(e.size, 6);
}

TEST(LaunchEnv, SingletonWhenNothingIsSet) {
  auto e = detect_launch_env(env_from_map({}));
  EXPECT_EQ(e.launcher, "singleton");
  EXPECT_EQ(e.rank, 0);
  EXPECT_EQ(e.size, 1);
}

TEST(LaunchEnv, RejectsGarbageAndInconsistentValues) {
  EXPECT_THROW(detect_launch_env(env_from_map({{"SLURM_PROCID", "x"}, {"SLURM_NTASKS", "4"}})), megaton::UsageError);
  EXPECT_THROW(detect_launch_env(env_from_map({{"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "4"}})), megaton::UsageError);
}
