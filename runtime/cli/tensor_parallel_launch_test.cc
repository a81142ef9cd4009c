// Tests of the --tp-mode / multi-node flag checks: every refusal names its flag.
#include "runtime/cli/tensor_parallel_launch.h"

#include "runtime/backend/tp/rank_backend.h"

#include <gtest/gtest.h>

namespace ingot {
namespace {

TensorParallelLaunch processes() {
  TensorParallelLaunch l;
  l.mode = "processes";
  return l;
}

std::string refusal(const TensorParallelLaunch& l, const std::string& device = "cpu") {
  Status s = checkTensorParallelLaunch(l, device);
  return s.ok() ? "ok" : s.message();
}

TEST(TensorParallelLaunch, AcceptsThreadsAndSingleHostProcesses) {
  EXPECT_EQ(refusal(TensorParallelLaunch()), "ok");
  EXPECT_EQ(refusal(processes()), "ok");
  TensorParallelLaunch l = processes();
  l.master_addr = "127.0.0.1";
  l.master_port = 29500;
  EXPECT_EQ(refusal(l), "ok");
}

TEST(TensorParallelLaunch, RefusesEachBadFlagByName) {
  TensorParallelLaunch l;
  l.mode = "fibers";
  EXPECT_NE(refusal(l).find("--tp-mode"), std::string::npos);
  l = processes();
  l.nnodes = 2;
  l.node_rank = 1;
  EXPECT_NE(refusal(l).find("--nnodes 2"), std::string::npos) << refusal(l);
  l = processes();
  l.node_rank = 1;
  EXPECT_NE(refusal(l).find("--node-rank"), std::string::npos);
  l = processes();
  l.nnodes = 0;
  EXPECT_NE(refusal(l).find("--nnodes"), std::string::npos);
  l = processes();
  l.master_addr = "localhost";
  EXPECT_NE(refusal(l).find("--master-addr"), std::string::npos);
  l = processes();
  l.master_port = 70000;
  EXPECT_NE(refusal(l).find("--master-port"), std::string::npos);
  l = TensorParallelLaunch();
  l.master_port = 29500;
  EXPECT_NE(refusal(l).find("need --tp-mode processes"), std::string::npos);
  // CUDA ranks as processes: accepted where the build has them, else refused saying why.
  if (cudaRanksBuilt())
    EXPECT_EQ(refusal(processes(), "cuda:1"), "ok");
  else
    EXPECT_NE(refusal(processes(), "cuda:1").find("NCCL"), std::string::npos);
}

}  // namespace
}  // namespace ingot
