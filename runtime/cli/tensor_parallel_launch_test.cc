// Tests of the --tp-mode / multi-node flag checks: every refusal names its flag.
#include "runtime/cli/tensor_parallel_launch.h"

#include "runtime/backend/tp/rank_backend.h"

#include <gtest/gtest.h>

#include <cmath>

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
  for (double bad : {0.0, -1.0, 0.05, 1e6, std::nan("")}) {
    l = processes();
    l.dist_timeout_s = bad;
    EXPECT_NE(refusal(l).find("--dist-timeout must be in [0.1, 86400] seconds"), std::string::npos)
        << bad;
  }
  l = TensorParallelLaunch();
  l.dist_timeout_s = 30;  // given, even at the default value
  EXPECT_NE(refusal(l).find("--dist-timeout needs --tp-mode processes"), std::string::npos);
  // CUDA ranks as processes: accepted where the build has them, else refused saying why.
  if (cudaRanksBuilt())
    EXPECT_EQ(refusal(processes(), "cuda:1"), "ok");
  else
    EXPECT_NE(refusal(processes(), "cuda:1").find("NCCL"), std::string::npos);
}

TEST(TensorParallelLaunch, DistTimeoutIsMillisecondsOfTheSecondsGiven) {
  TensorParallelLaunch l = processes();
  EXPECT_EQ(distTimeout(l), std::chrono::milliseconds(30000));
  EXPECT_EQ(distTimeoutText(l), "30 s");
  l.dist_timeout_s = 0.25;
  EXPECT_EQ(refusal(l), "ok");
  EXPECT_EQ(distTimeout(l), std::chrono::milliseconds(250));
  EXPECT_EQ(distTimeoutText(l), "250 ms");
  l.dist_timeout_s = 600;
  EXPECT_EQ(distTimeout(l), std::chrono::milliseconds(600000));
  EXPECT_EQ(distTimeoutText(l), "600 s");
  l.dist_timeout_s = 12345.67;
  EXPECT_EQ(distTimeoutText(l), "12345670 ms");
}

TensorParallelLaunch twoNodes(int node_rank) {
  TensorParallelLaunch l = processes();
  l.nnodes = 2;
  l.node_rank = node_rank;
  l.master_addr = "10.0.0.1";
  l.master_port = 29500;
  return l;
}

TEST(TensorParallelLaunch, AcceptsSeveralNodesWithAMasterAddressAndPort) {
  EXPECT_EQ(refusal(twoNodes(0)), "ok");
  EXPECT_EQ(refusal(twoNodes(1)), "ok");
  EXPECT_FALSE(isWorkerNode(twoNodes(0)));
  EXPECT_TRUE(isWorkerNode(twoNodes(1)));
  EXPECT_FALSE(isWorkerNode(processes()));
}

TEST(TensorParallelLaunch, RefusesEachBadMultiNodeFlagByName) {
  TensorParallelLaunch l = twoNodes(1);
  l.master_addr.clear();
  EXPECT_NE(refusal(l).find("--node-rank 1 needs --master-addr"), std::string::npos) << refusal(l);
  l = twoNodes(0);
  l.master_addr.clear();
  EXPECT_NE(refusal(l).find("--nnodes 2 needs --master-addr"), std::string::npos) << refusal(l);
  l = twoNodes(1);
  l.master_port = 0;
  EXPECT_NE(refusal(l).find("--nnodes 2 needs a fixed --master-port"), std::string::npos) << refusal(l);
  l = twoNodes(0);
  l.master_addr = "0.0.0.0";
  EXPECT_NE(refusal(l).find("0.0.0.0 is not an address"), std::string::npos) << refusal(l);
  l = twoNodes(1);
  l.mode = "threads";
  EXPECT_NE(refusal(l).find("--nnodes 2 needs --tp-mode processes"), std::string::npos) << refusal(l);
  l = twoNodes(2);
  EXPECT_NE(refusal(l).find("--node-rank must be in [0, 2)"), std::string::npos) << refusal(l);
  l = twoNodes(-1);
  EXPECT_NE(refusal(l).find("--node-rank must be in [0, 2)"), std::string::npos) << refusal(l);
}

}  // namespace
}  // namespace ingot
