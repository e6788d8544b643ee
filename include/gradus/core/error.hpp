// gradus/core/error.hpp — the exceptions every gradus API throws on bad input.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

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

}  // namespace gradus

/// Throws `Exc` with the streamed message when `cond` is false:
/// GRADUS_CHECK(shape_error, a == b, "add: shapes differ: ", a, " vs ", b).
#define GRADUS_CHECK(Exc, cond, ...) \
  do {                               \
    if (!(cond)) [[unlikely]]        \
      throw ::gradus::Exc(::gradus::detail::str(__VA_ARGS__)); \
  } while (0)
