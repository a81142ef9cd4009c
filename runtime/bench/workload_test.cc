// Bench workloads: Poisson arrivals keep their rate and seed; lengths files parse or say why.
#include "runtime/bench/workload.h"

#include <cmath>
#include <numeric>

#include <gtest/gtest.h>

namespace ingot {
namespace {

TEST(PoissonArrivals, MeanGapMatchesTheRateAndGapsAreExponential) {
  const double rate = 40;
  const int32_t n = 40000;
  std::vector<double> t = poissonArrivals(rate, n, 7);
  ASSERT_EQ(t.size(), static_cast<size_t>(n));
  std::vector<double> gaps(t.size());
  std::adjacent_difference(t.begin(), t.end(), gaps.begin());
  for (double g : gaps) ASSERT_GT(g, 0);
  double mean = t.back() / n;
  double var = 0;
  for (double g : gaps) var += (g - mean) * (g - mean);
  var /= n;
  // The sample mean of 40k exponential gaps is within 1.5% of 1/rate with overwhelming odds
  // (its relative standard error is 1/sqrt(n) = 0.5%); an exponential has sd == mean.
  EXPECT_NEAR(mean * rate, 1.0, 0.015);
  EXPECT_NEAR(std::sqrt(var) / mean, 1.0, 0.03);
}

TEST(PoissonArrivals, SameSeedSameTimesOtherSeedOtherTimes) {
  EXPECT_EQ(poissonArrivals(5, 100, 3), poissonArrivals(5, 100, 3));
  EXPECT_NE(poissonArrivals(5, 100, 3), poissonArrivals(5, 100, 4));
  EXPECT_TRUE(poissonArrivals(0, 10, 1).empty());
}

TEST(LengthsFile, ParsesJsonLinesSkippingBlanksAndComments) {
  StatusOr<std::vector<RequestLengths>> r = parseLengths(
      "# prompt and output tokens\n"
      "{\"prompt_tokens\": 12, \"output_tokens\": 3}\n"
      "\n"
      "  {\"output_tokens\": 7, \"prompt_tokens\": 100, \"note\": \"ignored\"}\r\n",
      "x.jsonl");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].prompt_tokens, 12);
  EXPECT_EQ((*r)[0].output_tokens, 3);
  EXPECT_EQ((*r)[1].prompt_tokens, 100);
  EXPECT_EQ((*r)[1].output_tokens, 7);
}

TEST(LengthsFile, ErrorsNameTheFileLineAndTheProblem) {
  const std::string good = "{\"prompt_tokens\": 1, \"output_tokens\": 1}\n";
  struct Case {
    std::string line, expected;
  } cases[] = {
      {"{\"prompt_tokens\": 5", "x.jsonl:3: expected a JSON object"},
      {"[5, 6]", "x.jsonl:3: expected a JSON object"},
      {"5,6", "x.jsonl:3: expected a JSON object"},
      {"{\"prompt_tokens\": 5}", "x.jsonl:3: missing \"output_tokens\""},
      {"{\"output_tokens\": 5}", "x.jsonl:3: missing \"prompt_tokens\""},
      {"{\"prompt_tokens\": 0, \"output_tokens\": 5}", "\"prompt_tokens\" must be a positive"},
      {"{\"prompt_tokens\": 5, \"output_tokens\": -2}", "\"output_tokens\" must be a positive"},
      {"{\"prompt_tokens\": 2.5, \"output_tokens\": 5}", "got 2.5"},
      {"{\"prompt_tokens\": \"5\", \"output_tokens\": 5}", "got \"5\""},
      {"{\"prompt_tokens\": 5000000000, \"output_tokens\": 5}", "must be a positive integer"},
  };
  for (const Case& c : cases) {
    StatusOr<std::vector<RequestLengths>> r = parseLengths(good + "\n" + c.line + "\n", "x.jsonl");
    ASSERT_FALSE(r.ok()) << c.line;
    EXPECT_NE(r.status().message().find(c.expected), std::string::npos)
        << c.line << " -> " << r.status().message();
  }
  StatusOr<std::vector<RequestLengths>> empty = parseLengths("\n# nothing\n", "e.jsonl");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("e.jsonl: no requests"), std::string::npos);
  EXPECT_FALSE(loadLengthsFile("/nonexistent/lengths.jsonl").ok());
}

TEST(PlanWorkload, FileLengthsAreUsedInOrderAndCycled) {
  WorkloadOptions o;
  o.lengths = {{3, 2}, {5, 4}};
  o.num_requests = 0;  // one per entry
  StatusOr<std::vector<PlannedRequest>> plan = planWorkload(o, 50);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->size(), 2u);
  EXPECT_EQ((*plan)[1].prompt.size(), 5u);
  EXPECT_EQ((*plan)[1].max_tokens, 4);
  o.num_requests = 5;
  plan = planWorkload(o, 50);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->size(), 5u);
  EXPECT_EQ((*plan)[4].prompt.size(), 3u);
  for (const PlannedRequest& r : *plan) {
    EXPECT_EQ(r.arrival_s, 0);  // closed loop: everything is ready at the start
    for (int32_t id : r.prompt) EXPECT_LT(id, 50);
  }
}

TEST(PlanWorkload, SeededAndOpenLoopArrivalsIncrease) {
  WorkloadOptions o;
  o.num_requests = 20;
  o.prompt_min = 2;
  o.prompt_max = 9;
  o.output_min = 1;
  o.output_max = 4;
  o.request_rate = 10;
  o.seed = 5;
  StatusOr<std::vector<PlannedRequest>> a = planWorkload(o, 1000), b = planWorkload(o, 1000);
  ASSERT_TRUE(a.ok() && b.ok());
  for (size_t i = 0; i < a->size(); ++i) {
    EXPECT_EQ((*a)[i].prompt, (*b)[i].prompt);
    EXPECT_EQ((*a)[i].arrival_s, (*b)[i].arrival_s);
    EXPECT_GE((*a)[i].prompt.size(), 2u);
    EXPECT_LE((*a)[i].prompt.size(), 9u);
    if (i > 0) EXPECT_GT((*a)[i].arrival_s, (*a)[i - 1].arrival_s);
  }
  o.request_rate = -1;
  EXPECT_FALSE(planWorkload(o, 1000).ok());
  o.request_rate = 0;
  o.num_requests = 0;  // no lengths file to take the count from
  EXPECT_FALSE(planWorkload(o, 1000).ok());
}

}  // namespace
}  // namespace ingot
