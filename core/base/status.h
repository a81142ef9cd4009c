// ingot::Status and ingot::StatusOr<T>: how the runtime returns errors instead of throwing.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace ingot {

/// Broad class of an error; the message carries the specifics.
enum class StatusCode {
  kOk = 0,
  kInvalidArgument,   // the caller passed something malformed
  kNotFound,          // a file, tensor or name does not exist
  kIoError,           // open/read/write/mmap failed
  kDataLoss,          // input is corrupt: bad checksum, truncated, fails verification
  kUnimplemented,     // valid input this build does not support (e.g. a newer format)
  kFailedPrecondition,
  kInternal,
};

/// Short lowercase name of a code ("data loss"), for messages.
inline const char* statusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kIoError: return "i/o error";
    case StatusCode::kDataLoss: return "data loss";
    case StatusCode::kUnimplemented: return "unimplemented";
    case StatusCode::kFailedPrecondition: return "failed precondition";
    case StatusCode::kInternal: return "internal error";
  }
  return "unknown";
}

/// Either ok, or an error code with a one-line message naming the problem.
class [[nodiscard]] Status {
 public:
  /// An ok status.
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  /// The one-line message (empty when ok).
  const std::string& message() const { return message_; }
  /// "ok", or the message alone (the code is for programs, the message for people).
  std::string toString() const { return ok() ? std::string("ok") : message_; }

  /// Returns a copy whose message is `prefix + ": " + message` (ok stays ok).
  Status withPrefix(const std::string& prefix) const {
    return ok() ? *this : Status(code_, prefix + ": " + message_);
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status okStatus() { return Status(); }
inline Status invalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status notFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status ioError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
inline Status dataLoss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status failedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status internalError(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

/// A value of type T, or the error Status explaining why there is none.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  /// Holds a value.
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  /// Holds an error; an ok Status here is a programming error and becomes kInternal.
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    if (status_.ok()) status_ = internalError("StatusOr constructed from an ok Status");
  }

  bool ok() const { return value_.has_value(); }
  /// Ok when a value is held, else the error.
  const Status& status() const { return status_; }

  /// The value; only call when ok().
  T& value() & { assert(ok()); return *value_; }
  const T& value() const& { assert(ok()); return *value_; }
  T&& value() && { assert(ok()); return std::move(*value_); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  Status status_;  // ok exactly when value_ is set
  std::optional<T> value_;
};

}  // namespace ingot

#define INGOT_STATUS_CONCAT_INNER_(a, b) a##b
#define INGOT_STATUS_CONCAT_(a, b) INGOT_STATUS_CONCAT_INNER_(a, b)

/// Returns from the enclosing function if `expr` (a Status) is an error.
#define INGOT_RETURN_IF_ERROR(expr)                   \
  do {                                                \
    ::ingot::Status ingot_status_tmp_ = (expr);       \
    if (!ingot_status_tmp_.ok()) return ingot_status_tmp_; \
  } while (0)

/// `INGOT_ASSIGN_OR_RETURN(auto x, makeX());` declares x from a StatusOr or returns its error.
#define INGOT_ASSIGN_OR_RETURN(lhs, expr) \
  INGOT_ASSIGN_OR_RETURN_IMPL_(INGOT_STATUS_CONCAT_(ingot_statusor_, __LINE__), lhs, expr)
#define INGOT_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
