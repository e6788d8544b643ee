// gradus/detail/json.hpp — a strict JSON reader (RFC 8259) that streams what it reads to a
// handler: how gradus reads the one JSON document it reads, the header of a safetensors file.
//
//   std::string error = gradus::detail::read_json(text, handler);   // empty: the text is JSON
//
// The handler's functions are called in document order:
//   start_object()  key(std::string&)  end_object()  start_array()  end_array()
//   string(std::string&)     a string, unescaped, in UTF-8
//   number_unsigned(u64)     an integer >= 0 that fits in 64 bits ("-0" too)
//   number_integer(i64)      an integer < 0 that fits
//   number_float(double)     any other number: a fraction, an exponent, or an integer too large
//   boolean(bool)  null()
// A handler stops the reading by throwing. The first syntax error ends it with its description,
// "byte 12: expected ':' after an object key, got '}'", after the events before it.
//
// Strict, as a reader of untrusted files should be: one value with optional whitespace around it;
// no comments, trailing commas, leading zeros, NaN or byte order mark; strings of valid UTF-8
// (no overlong forms, surrogates or code points past U+10FFFF) without raw control characters;
// \u escapes with surrogates in pairs; a number too large for a double is an error, one too
// small is zero. Nesting costs a byte of heap per level and no stack: the reader does not recurse.
#pragma once
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "gradus/detail/utf8.hpp"

namespace gradus::detail {

/// A number as read_json passes it on: which handler function, with its value.
struct JsonNumber {
  enum Kind { unsigned_integer, negative_integer, floating } kind = unsigned_integer;
  uint64_t u = 0;
  int64_t i = 0;
  double d = 0;
};

/// The lexical half of read_json: a cursor over the text that reads one token at a time. Each
/// function returns false after putting the description of a syntax error in `error`.
class JsonLexer {
 public:
  explicit JsonLexer(std::string_view text) : s_(text) {}

  std::string error;

  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool at_end() const { return pos_ == s_.size(); }
  /// The next character, or '\0' at the end (a NUL inside the text is never valid where peeked).
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void advance() { ++pos_; }
  /// Consumes `c` if it is next; otherwise an error saying it was expected `where`.
  bool expect(char c, const char* where) {
    if (peek() == c) {  // never '\0', which peek() gives at the end
      ++pos_;
      return true;
    }
    const char quoted[] = {'\'', c, '\'', ' ', '\0'};
    return fail_here("expected ", quoted, where);
  }

  /// "byte 12: <what...>, got '}'" (or "got the end of the text"), at the cursor.
  [[gnu::cold]] bool fail_here(const char* what, const char* what2 = "", const char* what3 = "") {
    return fail_at(pos_, what, what2, what3, ", got ", describe_next().c_str());
  }
  /// "byte 12: <what...>".
  [[gnu::cold]] bool fail_at(size_t at, const char* what, const char* what2 = "", const char* what3 = "",
                             const char* what4 = "", const char* what5 = "") {
    error = "byte ";
    error.append(std::to_string(at)).append(": ").append(what).append(what2).append(what3).append(what4).append(what5);
    return false;
  }

  /// A string whose opening quote is next: its unescaped UTF-8 into `out`.
  bool string(std::string& out) {
    out.clear();
    ++pos_;  // the opening quote
    for (;;) {
      if (pos_ >= s_.size()) return fail_here("expected '\"' to end the string");
      const auto c = static_cast<unsigned char>(s_[pos_]);
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (c == '\\') {
        if (!escape(out)) return false;
      } else if (c < 0x20) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", unsigned(c));
        return fail_at(pos_, "a control character (", hex, ") in a string, where it must be escaped");
      } else if (c < 0x80) {
        out += char(c);
        ++pos_;
      } else if (!utf8(out)) {
        return false;
      }
    }
  }

  /// A number whose first character ('-' or a digit) is next, into `out`.
  bool number(JsonNumber& out) {
    const size_t start = pos_;
    const bool negative = peek() == '-';
    if (negative) ++pos_;
    if (!is_digit(peek())) return fail_here(negative ? "expected a digit after '-'" : "expected a number");
    if (peek() == '0' && pos_ + 1 < s_.size() && is_digit(s_[pos_ + 1]))
      return fail_at(pos_, "a number with a leading zero");
    const size_t int_begin = pos_;
    while (is_digit(peek())) ++pos_;
    const size_t int_end = pos_;
    size_t frac_begin = pos_, frac_end = pos_;
    bool integer = true;
    if (peek() == '.') {
      ++pos_;
      if (!is_digit(peek())) return fail_here("expected a digit after the decimal point");
      frac_begin = pos_;
      while (is_digit(peek())) ++pos_;
      frac_end = pos_;
      integer = false;
    }
    int64_t exponent = 0;
    if (peek() == 'e' || peek() == 'E') {
      ++pos_;
      bool exponent_negative = false;
      if (peek() == '+' || peek() == '-') exponent_negative = s_[pos_++] == '-';
      if (!is_digit(peek())) return fail_here("expected a digit in the exponent");
      for (; is_digit(peek()); ++pos_)
        if (exponent < int64_t(1) << 40) exponent = exponent * 10 + (s_[pos_] - '0');  // saturates: only its sign matters then
      if (exponent_negative) exponent = -exponent;
      integer = false;
    }
    const char* first = s_.data() + start;
    const char* last = s_.data() + pos_;
    if (integer) {
      if (negative) {
        int64_t v = 0;
        if (const auto r = std::from_chars(first, last, v); r.ec == std::errc() && r.ptr == last) {
          if (v == 0)
            out.kind = JsonNumber::unsigned_integer, out.u = 0;
          else
            out.kind = JsonNumber::negative_integer, out.i = v;
          return true;
        }
      } else {
        uint64_t v = 0;
        if (const auto r = std::from_chars(first, last, v); r.ec == std::errc() && r.ptr == last) {
          out.kind = JsonNumber::unsigned_integer, out.u = v;
          return true;
        }
      }
    }
    double v = 0;
    const auto r = std::from_chars(first, last, v);
    if (r.ec == std::errc::result_out_of_range) {
      // Out of a double's range one way or the other: the position of the leading significant
      // digit plus the exponent says which. Too large is an error; too small is (signed) zero.
      int64_t lead = 0;
      bool nonzero = false;
      for (size_t i = int_begin; i < int_end && !nonzero; ++i)
        if (s_[i] != '0') nonzero = true, lead = int64_t(int_end - i) - 1;
      for (size_t i = frac_begin; i < frac_end && !nonzero; ++i)
        if (s_[i] != '0') nonzero = true, lead = -int64_t(i - frac_begin) - 1;
      if (nonzero && lead + exponent > 0)
        return fail_at(start, "the number ", std::string(first, last).c_str(), " is too large for a double");
      v = negative ? -0.0 : 0.0;
    } else if (r.ec != std::errc() || r.ptr != last) {
      return fail_at(start, "the number ", std::string(first, last).c_str(), " could not be read");
    }
    out.kind = JsonNumber::floating, out.d = v;
    return true;
  }

  /// `word` (true, false or null) is next.
  bool literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return fail_here("expected a value");
    pos_ += word.size();
    return true;
  }

 private:
  static bool is_digit(char c) { return c >= '0' && c <= '9'; }

  std::string describe_next() const {
    if (pos_ >= s_.size()) return "the end of the text";
    const auto c = static_cast<unsigned char>(s_[pos_]);
    if (c >= 0x20 && c < 0x7f) return std::string("'") + char(c) + "'";
    char hex[16];
    std::snprintf(hex, sizeof hex, "byte 0x%02x", unsigned(c));
    return hex;
  }

  /// Four hex digits at the cursor, as a number; -1 if they are not.
  int hex4() {
    if (s_.size() - pos_ < 4) return -1;
    int v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s_[pos_ + size_t(i)];
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) return -1;
      v = v * 16 + d;
    }
    pos_ += 4;
    return v;
  }

  bool escape(std::string& out) {
    const size_t at = pos_;
    ++pos_;  // the backslash
    const char c = peek();
    if (at_end()) return fail_here("expected an escape after '\\'");
    ++pos_;
    switch (c) {
      case '"': out += '"'; return true;
      case '\\': out += '\\'; return true;
      case '/': out += '/'; return true;
      case 'b': out += '\b'; return true;
      case 'f': out += '\f'; return true;
      case 'n': out += '\n'; return true;
      case 'r': out += '\r'; return true;
      case 't': out += '\t'; return true;
      case 'u': break;
      default: {
        const char escaped[] = {c, '\0'};
        return fail_at(at, "an unknown escape '\\", escaped, "' in a string");
      }
    }
    int cp = hex4();
    if (cp < 0) return fail_at(at, "expected four hex digits after '\\u'");
    if (cp >= 0xDC00 && cp <= 0xDFFF)
      return fail_at(at, "a low surrogate (\\u", hex_of(cp).c_str(), ") without a high one before it");
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      const int low = s_.substr(pos_, 2) == "\\u" ? (pos_ += 2, hex4()) : -1;
      if (low < 0xDC00 || low > 0xDFFF)
        return fail_at(at, "a high surrogate (\\u", hex_of(cp).c_str(), ") not followed by a low surrogate (\\uDC00-\\uDFFF)");
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
    append_utf8(out, uint32_t(cp));
    return true;
  }

  static std::string hex_of(int v) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "%04X", unsigned(v));
    return hex;
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += char(cp);
    } else if (cp < 0x800) {
      out += char(0xC0 | (cp >> 6));
      out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += char(0xE0 | (cp >> 12));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    } else {
      out += char(0xF0 | (cp >> 18));
      out += char(0x80 | ((cp >> 12) & 0x3F));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    }
  }

  /// A multi-byte UTF-8 sequence at the cursor, checked (detail/utf8.hpp) and copied to `out`.
  bool utf8(std::string& out) {
    const size_t n = utf8_sequence(s_.substr(pos_));
    if (n == 0) return fail_at(pos_, "a string that is not valid UTF-8");
    out.append(s_.data() + pos_, n);
    pos_ += n;
    return true;
  }

  std::string_view s_;
  size_t pos_ = 0;
};

/// Reads `text` as one JSON value, calling `h` for each part (see the top of this file); returns
/// the empty string, or the description of the first syntax error.
template <class H>
std::string read_json(std::string_view text, H& h) {
  JsonLexer in(text);
  std::vector<char> open;  // '{' or '[' for each container being read, innermost last
  std::string text_value;
  enum class Want { value, value_or_close, key, key_or_close, comma_or_close };
  Want want = Want::value;
  const auto close = [&] {  // the innermost container ends: its closing character is next
    in.advance();
    if (open.back() == '{')
      h.end_object();
    else
      h.end_array();
    open.pop_back();
    want = Want::comma_or_close;
  };
  for (;;) {
    in.skip_space();
    switch (want) {
      case Want::value_or_close:
        if (in.peek() == ']') {
          close();
          break;
        }
        [[fallthrough]];
      case Want::value:
        switch (in.peek()) {
          case '{':
            in.advance();
            open.push_back('{');
            h.start_object();
            want = Want::key_or_close;
            continue;
          case '[':
            in.advance();
            open.push_back('[');
            h.start_array();
            want = Want::value_or_close;
            continue;
          case '"':
            if (!in.string(text_value)) return in.error;
            h.string(text_value);
            break;
          case 't':
            if (!in.literal("true")) return in.error;
            h.boolean(true);
            break;
          case 'f':
            if (!in.literal("false")) return in.error;
            h.boolean(false);
            break;
          case 'n':
            if (!in.literal("null")) return in.error;
            h.null();
            break;
          default: {
            if (in.peek() != '-' && (in.peek() < '0' || in.peek() > '9')) {
              in.fail_here("expected a value");
              return in.error;
            }
            JsonNumber number;
            if (!in.number(number)) return in.error;
            if (number.kind == JsonNumber::unsigned_integer)
              h.number_unsigned(number.u);
            else if (number.kind == JsonNumber::negative_integer)
              h.number_integer(number.i);
            else
              h.number_float(number.d);
          }
        }
        want = Want::comma_or_close;
        break;
      case Want::key_or_close:
        if (in.peek() == '}') {
          close();
          break;
        }
        [[fallthrough]];
      case Want::key:
        if (in.peek() != '"') {
          in.fail_here("expected a string as the key of an object member");
          return in.error;
        }
        if (!in.string(text_value)) return in.error;
        h.key(text_value);
        in.skip_space();
        if (!in.expect(':', "after an object key")) return in.error;
        want = Want::value;
        break;
      case Want::comma_or_close: {
        if (open.empty()) {
          if (!in.at_end()) {
            in.fail_here("expected the end of the text after the JSON value");
            return in.error;
          }
          return {};
        }
        const bool object = open.back() == '{';
        if (in.peek() == ',') {
          in.advance();
          want = object ? Want::key : Want::value;
        } else if (in.peek() == (object ? '}' : ']')) {
          close();
        } else {
          in.fail_here(object ? "expected ',' or '}' after an object member" : "expected ',' or ']' after an array element");
          return in.error;
        }
        break;
      }
    }
  }
}

}  // namespace gradus::detail
