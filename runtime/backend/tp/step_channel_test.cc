// Tests of the step channel: the codecs round-trip random steps and refuse damaged payloads;
// frames cross a socket and a silent peer times out.
#include "runtime/backend/tp/step_channel.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <random>

#include "testing/test_seed.h"
#include "schemas/region_bytecode.h"

namespace ingot {
namespace {

using Clock = StepChannel::Clock;

std::vector<int32_t> randomInts(std::mt19937& rng, size_t n) {
  std::vector<int32_t> v(n);
  for (int32_t& x : v) x = static_cast<int32_t>(rng());
  return v;
}

TEST(StepChannel, StepsWithExtraOperandsRoundTripExactly) {
  std::mt19937 rng(ingot::testing::testSeed());
  for (int trial = 0; trial < 20; ++trial) {
    StepInputs in;
    const size_t tokens = rng() % 50;
    in.tokens = randomInts(rng, tokens);
    in.positions = randomInts(rng, tokens);
    in.slot_mapping = randomInts(rng, tokens);
    in.num_requests = static_cast<int32_t>(rng() % 5);
    in.max_blocks_per_request = static_cast<int32_t>(rng() % 7);
    in.block_tables = randomInts(rng, in.num_requests * in.max_blocks_per_request);
    in.seq_lens = randomInts(rng, in.num_requests);
    in.query_start = randomInts(rng, in.num_requests + 1);
    in.logit_rows = randomInts(rng, rng() % 9);
    std::vector<int64_t> shape_a = {static_cast<int64_t>(rng() % 4)};
    std::vector<int64_t> shape_b = {2, static_cast<int64_t>(rng() % 3), 3};
    std::vector<int32_t> data_a = randomInts(rng, static_cast<size_t>(shape_a[0]));
    std::vector<int32_t> data_b = randomInts(rng, static_cast<size_t>(6 * shape_b[1]));
    in.extra_inputs = {{RegionType::kI32, shape_a.data(), 1, data_a.data()},
                       {RegionType::kI32, shape_b.data(), 3, data_b.data()},
                       {RegionType::kI32, shape_a.data(), 1, nullptr}};
    const std::vector<uint8_t> payload = encodeStep(in);
    ReceivedStep out;
    out.inputs.tokens = {-1};  // poison: must be replaced
    ASSERT_TRUE(decodeStep(payload, &out).ok());
    EXPECT_EQ(out.inputs.tokens, in.tokens);
    EXPECT_EQ(out.inputs.positions, in.positions);
    EXPECT_EQ(out.inputs.block_tables, in.block_tables);
    EXPECT_EQ(out.inputs.num_requests, in.num_requests);
    EXPECT_EQ(out.inputs.max_blocks_per_request, in.max_blocks_per_request);
    EXPECT_EQ(out.inputs.seq_lens, in.seq_lens);
    EXPECT_EQ(out.inputs.query_start, in.query_start);
    EXPECT_EQ(out.inputs.slot_mapping, in.slot_mapping);
    EXPECT_EQ(out.inputs.logit_rows, in.logit_rows);
    ASSERT_EQ(out.inputs.extra_inputs.size(), 3u);
    const RegionOperandView& b = out.inputs.extra_inputs[1];
    EXPECT_EQ(b.rank, 3u);
    EXPECT_EQ(std::vector<int64_t>(b.shape, b.shape + 3), shape_b);
    if (!data_b.empty())  // (an empty operand's data may be null)
      EXPECT_EQ(std::memcmp(b.data, data_b.data(), data_b.size() * 4), 0);
    EXPECT_EQ(out.inputs.extra_inputs[2].data, nullptr);

    // Every truncation and a stray byte are refused, never read past the end.
    for (size_t cut = 0; cut < payload.size(); cut += 1 + payload.size() / 40) {
      ReceivedStep damaged;
      EXPECT_FALSE(decodeStep(std::vector<uint8_t>(payload.begin(), payload.begin() + cut),
                              &damaged).ok());
    }
    std::vector<uint8_t> longer = payload;
    longer.push_back(0);
    ReceivedStep stray;
    EXPECT_FALSE(decodeStep(longer, &stray).ok());
  }
}

TEST(StepChannel, StatusHelloAndKvCommandsRoundTrip) {
  Status out;
  ASSERT_TRUE(decodeStatus(encodeStatus(invalidArgument("token 9 is outside")), &out).ok());
  EXPECT_EQ(out.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(out.message(), "token 9 is outside");
  ASSERT_TRUE(decodeStatus(encodeStatus(okStatus()), &out).ok());
  EXPECT_TRUE(out.ok());

  std::mt19937_64 rng(ingot::testing::testSeed());
  const uint64_t artifact_id = rng();
  WorkerHello hello{3, notFound("no such file"), 77, 256, 123456789012ull, 5, artifact_id};
  WorkerHello back;
  ASSERT_TRUE(decodeHello(encodeHello(hello), &back).ok());
  EXPECT_EQ(back.rank, 3);
  EXPECT_EQ(back.status.message(), "no such file");
  EXPECT_EQ(back.num_kv_blocks, 77);
  EXPECT_EQ(back.vocab_size, 256);
  EXPECT_EQ(back.matrix_bytes, 123456789012ull);
  EXPECT_EQ(back.num_threads, 5);
  EXPECT_EQ(back.artifact_id, artifact_id);

  int64_t src = 0, dst = 0;
  ASSERT_TRUE(decodeKvBlockCopy(encodeKvBlockCopy(-4, 1ll << 40), &src, &dst).ok());
  EXPECT_EQ(src, -4);
  EXPECT_EQ(dst, 1ll << 40);
  std::vector<std::pair<int32_t, int32_t>> moves = {{1, 2}, {-3, 4}}, moved;
  ASSERT_TRUE(decodeKvSlotMoves(encodeKvSlotMoves(moves), &moved).ok());
  EXPECT_EQ(moved, moves);
  EXPECT_FALSE(decodeKvBlockCopy({1, 2, 3}, &src, &dst).ok());
}

TEST(StepChannel, FramesCrossTheSocketAndASilentPeerTimesOut) {
  auto listener = StepChannelListener::listen("127.0.0.1");
  ASSERT_TRUE(listener.ok()) << listener.status().message();
  auto client = connectStepChannel("127.0.0.1", (*listener)->port(),
                                   Clock::now() + std::chrono::seconds(5));
  ASSERT_TRUE(client.ok()) << client.status().message();
  auto server = (*listener)->accept(Clock::now() + std::chrono::seconds(5));
  ASSERT_TRUE(server.ok()) << server.status().message();

  std::vector<uint8_t> big(3 << 20);
  std::mt19937 rng(5);
  for (uint8_t& b : big) b = static_cast<uint8_t>(rng());
  std::thread sender([&] {
    EXPECT_TRUE((*client)->send(StepCommand::kStep, big, Clock::now() + std::chrono::seconds(10)).ok());
  });
  StepCommand command{};
  std::vector<uint8_t> got;
  ASSERT_TRUE((*server)->receive(&command, &got, Clock::now() + std::chrono::seconds(10)).ok());
  sender.join();
  EXPECT_EQ(command, StepCommand::kStep);
  EXPECT_EQ(got, big);

  const auto start = Clock::now();
  Status silent = (*server)->receive(&command, &got, Clock::now() + std::chrono::milliseconds(100));
  EXPECT_FALSE(silent.ok());
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(90));
  (*client)->close();
  Status closed = (*server)->receive(&command, &got, Clock::now() + std::chrono::seconds(5));
  EXPECT_NE(closed.message().find("closed"), std::string::npos) << closed.message();
  EXPECT_FALSE(connectStepChannel("not-an-ip", 1, Clock::now()).ok());
}

}  // namespace
}  // namespace ingot
