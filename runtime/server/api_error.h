// ApiError: an HTTP status plus the OpenAI error body ({"error": {message, type, param, code}}).
#pragma once

#include <string>

namespace ingot::server {

/// An error the server answers with; `toJson()` is OpenAI's error object.
struct ApiError {
  int status = 400;
  std::string message;
  /// OpenAI error type: "invalid_request_error", "not_found_error", "rate_limit_error", ...
  std::string type = "invalid_request_error";
  /// The request field at fault, empty for none (serialized as null).
  std::string param;
  /// A short machine-readable code, empty for none (serialized as null).
  std::string code;

  std::string toJson() const;
};

inline ApiError badRequest(std::string message, std::string param = {}, std::string code = {}) {
  return ApiError{400, std::move(message), "invalid_request_error", std::move(param),
                  std::move(code)};
}

}  // namespace ingot::server
