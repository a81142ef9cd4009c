// Status and StatusOr: ok/error states, messages and the propagation macros.
#include "core/base/status.h"

#include <gtest/gtest.h>

#include <memory>

namespace ingot {
namespace {

StatusOr<int> half(int x) {
  if (x % 2) return invalidArgument(std::to_string(x) + " is odd");
  return x / 2;
}

StatusOr<int> quarter(int x) {
  INGOT_ASSIGN_OR_RETURN(int h, half(x));
  return half(h);
}

Status checkEven(int x) {
  INGOT_RETURN_IF_ERROR(half(x).status());
  return okStatus();
}

TEST(Status, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.toString(), "ok");
}

TEST(Status, ErrorCarriesCodeAndMessage) {
  Status s = dataLoss("bad bytes");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_EQ(s.message(), "bad bytes");
  EXPECT_EQ(s.withPrefix("f.ingot").message(), "f.ingot: bad bytes");
  EXPECT_TRUE(okStatus().withPrefix("x").ok());
}

TEST(StatusOr, PropagatesValuesAndErrors) {
  EXPECT_EQ(*quarter(8), 2);
  StatusOr<int> odd = quarter(6);
  ASSERT_FALSE(odd.ok());
  EXPECT_EQ(odd.status().message(), "3 is odd");
  EXPECT_TRUE(checkEven(4).ok());
  EXPECT_EQ(checkEven(5).code(), StatusCode::kInvalidArgument);
}

TEST(StatusOr, HoldsMoveOnlyValues) {
  StatusOr<std::unique_ptr<int>> p = std::make_unique<int>(7);
  ASSERT_TRUE(p.ok());
  std::unique_ptr<int> taken = std::move(p).value();
  EXPECT_EQ(*taken, 7);
}

TEST(StatusOr, OkStatusBecomesInternalError) {
  StatusOr<int> s = Status();
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace ingot
