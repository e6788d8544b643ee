// gradus/core/error.hpp — the exceptions every gradus API throws on bad input.
#pragma once
#include <initializer_list>
#include <iostream>
#include <span>
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
/// One argument of a message, as `std::ostream <<` would print it by default (text, integers,
/// floating point as %g with 6 significant digits, a char, a bool as 0 or 1); a type of its own
/// goes through its operator<<. `str` and GRADUS_CHECK gather their arguments as pieces and join
/// them in one function compiled once, so a message costs its call site a few stores, not a
/// function of its own per list of argument types.
struct MessagePiece {
  enum class Kind : unsigned char { text, signed_integer, unsigned_integer, floating, character, streamed };
  using Print = void (*)(std::ostream&, const void*);

  template <class T>
  MessagePiece(const T& v) {  // NOLINT: implicit, from each argument of str() or GRADUS_CHECK
    if constexpr (std::is_convertible_v<const T&, std::string_view>) {
      kind = Kind::text, text = std::string_view(v);
    } else if constexpr (std::is_same_v<T, char> || std::is_same_v<T, signed char> || std::is_same_v<T, unsigned char>) {
      kind = Kind::character, character = char(v);
    } else if constexpr (std::is_same_v<T, bool>) {
      kind = Kind::character, character = v ? '1' : '0';
    } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
      kind = Kind::signed_integer, signed_integer = static_cast<long long>(v);
    } else if constexpr (std::is_integral_v<T>) {
      kind = Kind::unsigned_integer, unsigned_integer = static_cast<unsigned long long>(v);
    } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      kind = Kind::floating, floating = double(v);
    } else {
      kind = Kind::streamed, streamed = {[](std::ostream& os, const void* p) { os << *static_cast<const T*>(p); }, &v};
    }
  }

  Kind kind;
  union {
    std::string_view text;
    long long signed_integer;
    unsigned long long unsigned_integer;
    double floating;
    char character;
    struct {
      Print print;
      const void* value;
    } streamed;
  };
};

/// The pieces printed one after another.
std::string join_message(const MessagePiece* pieces, size_t count);

/// The arguments printed one after another, as `(os << ... << args)` would print them.
template <class... Args>
std::string str(const Args&... args) {
  const MessagePiece pieces[] = {MessagePiece(args)...};
  return join_message(pieces, sizeof...(Args));
}
inline std::string str() { return {}; }
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

namespace gradus::detail {
/// Throws `Exc` with the pieces joined: a failed GRADUS_CHECK's one call, compiled once per
/// exception type, so a check costs its site the pieces' stores and a call, not an exception's
/// allocation, construction and cleanup of its own. The pieces (and the temporaries they refer to)
/// live until the end of the call's full-expression, past the join.
template <class Exc>
[[noreturn, gnu::cold, gnu::noinline]] void throw_error(std::initializer_list<MessagePiece> pieces) {
  throw Exc(join_message(pieces.begin(), pieces.size()));
}
}  // namespace gradus::detail

/// Throws `Exc` with the streamed message when `cond` is false:
/// GRADUS_CHECK(shape_error, a == b, "add: shapes differ: ", a, " vs ", b).
#define GRADUS_CHECK(Exc, cond, ...) \
  do {                               \
    if (!(cond)) [[unlikely]]        \
      ::gradus::detail::throw_error<::gradus::Exc>({__VA_ARGS__}); \
  } while (0)

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
#include <cstdio>
namespace gradus::detail {
GRADUS_INLINE std::string join_message(const MessagePiece* pieces, size_t count) {
  std::string out;
  for (const MessagePiece& p : std::span(pieces, count)) {
    switch (p.kind) {
      case MessagePiece::Kind::text: out += p.text; break;
      case MessagePiece::Kind::signed_integer: out += std::to_string(p.signed_integer); break;
      case MessagePiece::Kind::unsigned_integer: out += std::to_string(p.unsigned_integer); break;
      case MessagePiece::Kind::character: out += p.character; break;
      case MessagePiece::Kind::floating: {
        char buf[32];
        const int n = std::snprintf(buf, sizeof buf, "%g", p.floating);  // what std::ostream prints by default
        out.append(buf, size_t(n));
        break;
      }
      case MessagePiece::Kind::streamed: {
        std::ostringstream os;
        p.streamed.print(os, p.streamed.value);
        out += os.str();
        break;
      }
    }
  }
  return out;
}
}  // namespace gradus::detail
#endif  // GRADUS_DEFINE_COMPILED
