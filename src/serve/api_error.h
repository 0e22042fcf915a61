// A request the server cannot take: the HTTP status, the error's type and the request field it concerns, as the
// OpenAI API reports them ({"error": {"message", "type", "param", "code"}}).
#pragma once
#include <stdexcept>
#include <string>

namespace megaton::serve {

struct ApiError : std::runtime_error {
  ApiError(int status, std::string param, const std::string& message)
      : std::runtime_error(message), status(status), param(std::move(param)) {}
  int status;         // 400 bad field, 404 unknown model or route, 413 too large, 503 shutting down, 504 timed out
  std::string param;  // the offending field ("" when none)
  /// "invalid_request_error" for 4xx, "server_error" for 5xx.
  std::string type() const { return status >= 500 ? "server_error" : "invalid_request_error"; }
};

}  // namespace megaton::serve
