// gradus/core/error.hpp — the exceptions every gradus API throws on bad input.
#pragma once
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace gradus {

/// Base of every gradus exception: the message names the op, what it expected and what it got.
struct error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
/// Shapes that do not fit together: `matmul: inner dimensions differ: [32,784] x [500,10]`.
struct shape_error : error {
  using error::error;
};
/// A value out of its domain: a bad axis, a negative size, a non-scalar `item()`.
struct value_error : error {
  using error::error;
};
/// A device that is not there or cannot be used (no CUDA driver, no GPU, a kernel that does not
/// compile), or tensors of different devices in one op.
struct device_error : error {
  using error::error;
};
/// A file that is missing, truncated or corrupt.
struct io_error : error {
  using error::error;
};

namespace detail {
template <class... Args>
std::string str(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

/// Runs a program's body and turns a gd::error that escapes it into one clean line on `err`,
/// "error: <what()>", and exit status 1 (instead of std::terminate's "terminate called after
/// throwing an instance of ..." and an abort). `body` returns the exit status, or nothing (0).
/// Other exceptions pass through untouched.
///   int main() { return gd::guard_main([] { /* the program */ return 0; }); }
template <class F>
int guard_main(F&& body, std::ostream& err = std::cerr) {
  try {
    if constexpr (std::is_void_v<std::invoke_result_t<F&>>) {
      body();
      return 0;
    } else {
      return int(body());
    }
  } catch (const error& e) {
    err << "error: " << e.what() << '\n';
    return 1;
  }
}

}  // namespace gradus

/// Throws `Exc` with the streamed message when `cond` is false:
/// GRADUS_CHECK(shape_error, a == b, "add: shapes differ: ", a, " vs ", b).
#define GRADUS_CHECK(Exc, cond, ...) \
  do {                               \
    if (!(cond)) [[unlikely]]        \
      throw ::gradus::Exc(::gradus::detail::str(__VA_ARGS__)); \
  } while (0)
