// Error reporting for the guest library: no exceptions cross its API, because guest stacks (C
// runtimes, drivers) often build without them. Every failure carries a negative errno, so callers
// can map it to their own error space, and a message saying what went wrong for logs.
#pragma once

#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace rvgl::guest {

struct Error {
  int code = 0;  // negative errno
  std::string message;
};

inline Error make_error(int code, std::string message) {
  return Error{code, std::move(message)};
}

// The outcome of an operation that returns nothing on success.
class Status {
 public:
  Status() = default;
  Status(Error e) : error_(std::move(e)), failed_(true) {}  // NOLINT: implicit by design

  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const Error &error() const { return error_; }
  int code() const { return failed_ ? error_.code : 0; }

 private:
  Error error_;
  bool failed_ = false;
};

// A value or an Error. value() on a failed result is a programming error and aborts, rather than
// handing back garbage.
template <class T>
class Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(Error e) : v_(std::in_place_index<1>, std::move(e)) {}      // NOLINT: implicit by design

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T &value() & {
    if (!ok()) std::abort();
    return std::get<0>(v_);
  }
  const T &value() const & {
    if (!ok()) std::abort();
    return std::get<0>(v_);
  }
  T &&value() && {
    if (!ok()) std::abort();
    return std::get<0>(std::move(v_));
  }
  T *operator->() { return &value(); }
  const T *operator->() const { return &value(); }
  T &operator*() & { return value(); }
  const T &operator*() const & { return value(); }
  T &&operator*() && { return std::move(*this).value(); }

  const Error &error() const {
    if (ok()) std::abort();
    return std::get<1>(v_);
  }
  int code() const { return ok() ? 0 : std::get<1>(v_).code; }
  Status status() const { return ok() ? Status() : Status(error()); }

 private:
  std::variant<T, Error> v_;
};

}  // namespace rvgl::guest
