// Result<T>: a value or an error message that callers cannot silently drop.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace sprout {

// Error is a human-readable message that already says what failed and how to fix it.
struct Error {
  std::string message;
};

// Result holds either a T or an Error; [[nodiscard]] makes ignoring it a warning.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &std::get<T>(v_); }
  const T* operator->() const { return &std::get<T>(v_); }
  T& operator*() & { return std::get<T>(v_); }
  const std::string& error() const { return std::get<Error>(v_).message; }

 private:
  std::variant<T, Error> v_;
};

// Status is a Result with no value.
struct Ok {};
using Status = Result<Ok>;

// Fail builds an Error from a message; reads well at return sites.
inline Error Fail(std::string message) { return Error{std::move(message)}; }

}  // namespace sprout
