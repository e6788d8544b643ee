// gradus/core/error.hpp — the exceptions every gradus API throws on bad input.
#pragma once
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include "gradus/core/compiled.hpp"

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
// The pieces of a message, each appended as `std::ostream <<` would print it by default (text,
// integers, floating point as %g with 6 significant digits), by functions compiled once; a type
// of its own goes through its operator<<.
void append_text(std::string& out, std::string_view text);
void append_signed(std::string& out, long long v);
void append_unsigned(std::string& out, unsigned long long v);
void append_floating(std::string& out, double v);
void append_streamed(std::string& out, void (*print)(std::ostream&, const void*), const void* v);

template <class T>
void append(std::string& out, const T& v) {
  if constexpr (std::is_convertible_v<const T&, std::string_view>)
    append_text(out, std::string_view(v));
  else if constexpr (std::is_same_v<T, char> || std::is_same_v<T, signed char> || std::is_same_v<T, unsigned char>)
    out += char(v);
  else if constexpr (std::is_same_v<T, bool>)
    out += v ? '1' : '0';
  else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>)
    append_signed(out, static_cast<long long>(v));
  else if constexpr (std::is_integral_v<T>)
    append_unsigned(out, static_cast<unsigned long long>(v));
  else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>)
    append_floating(out, double(v));
  else
    append_streamed(out, [](std::ostream& os, const void* p) { os << *static_cast<const T*>(p); }, &v);
}

/// The arguments printed one after another, as `(os << ... << args)` would print them.
template <class... Args>
std::string str(const Args&... args) {
  std::string out;
  (append(out, args), ...);
  return out;
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

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
#include <cstdio>
namespace gradus::detail {
GRADUS_INLINE void append_text(std::string& out, std::string_view text) { out += text; }
GRADUS_INLINE void append_signed(std::string& out, long long v) { out += std::to_string(v); }
GRADUS_INLINE void append_unsigned(std::string& out, unsigned long long v) { out += std::to_string(v); }
GRADUS_INLINE void append_floating(std::string& out, double v) {
  char buf[32];
  const int n = std::snprintf(buf, sizeof buf, "%g", v);  // what std::ostream prints by default
  out.append(buf, size_t(n));
}
GRADUS_INLINE void append_streamed(std::string& out, void (*print)(std::ostream&, const void*), const void* v) {
  std::ostringstream os;
  print(os, v);
  out += os.str();
}
}  // namespace gradus::detail
#endif  // GRADUS_DEFINE_COMPILED
