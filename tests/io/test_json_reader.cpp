// detail/json.hpp, the strict JSON reader of safetensors headers: events and errors on hand-made
// documents, and the same verdict as nlohmann-json (an independent, widely used parser) on every
// single-byte mutation of a set of documents.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gradus/detail/json.hpp"

namespace {

using gradus::detail::read_json;
using Catch::Matchers::Contains;

/// The events of a reading, one word each: "{ k:a s:b ] i:3 f:0.5 t n }".
std::string float_word(double v) {
  if (v != 0 && std::fabs(v) < 1e-300) return "f:tiny";  // subnormal: the readers may differ in the last bits
  char buf[40];
  std::snprintf(buf, sizeof buf, "f:%.17g", v);
  return buf;
}

struct Log {
  std::string out;
  void add(const std::string& w) { out += (out.empty() ? "" : " ") + w; }
  void start_object() { add("{"); }
  void end_object() { add("}"); }
  void start_array() { add("["); }
  void end_array() { add("]"); }
  void key(std::string& k) { add("k:" + k); }
  void string(std::string& s) { add("s:" + s); }
  void number_unsigned(uint64_t v) { add("i:" + std::to_string(v)); }
  void number_integer(int64_t v) { add("i:" + std::to_string(v)); }
  void number_float(double v) { add(float_word(v)); }
  void boolean(bool b) { add(b ? "t" : "f"); }
  void null() { add("n"); }
};

/// The same log through nlohmann-json's SAX interface.
struct NlohmannLog {
  using json = nlohmann::json;
  Log log;
  bool null() { return log.null(), true; }
  bool boolean(bool b) { return log.boolean(b), true; }
  bool number_integer(json::number_integer_t v) {
    if (v >= 0) return log.number_unsigned(uint64_t(v)), true;  // "-0": read_json says unsigned 0
    return log.number_integer(v), true;
  }
  bool number_unsigned(json::number_unsigned_t v) { return log.number_unsigned(v), true; }
  bool number_float(json::number_float_t v, const json::string_t&) { return log.number_float(v), true; }
  bool string(json::string_t& s) { return log.string(s), true; }
  bool binary(json::binary_t&) { return false; }
  bool start_object(std::size_t) { return log.start_object(), true; }
  bool key(json::string_t& k) { return log.key(k), true; }
  bool end_object() { return log.end_object(), true; }
  bool start_array(std::size_t) { return log.start_array(), true; }
  bool end_array() { return log.end_array(), true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) { return false; }
};

/// read_json's events, or "error: <message>".
std::string ours(std::string_view text) {
  Log log;
  const std::string error = read_json(text, log);
  return error.empty() ? log.out : "error: " + error;
}

/// nlohmann's events, or "error".
std::string theirs(std::string_view text) {
  NlohmannLog h;
  const bool ok = nlohmann::json::sax_parse(text.begin(), text.end(), &h, nlohmann::json::input_format_t::json, true);
  return ok ? h.log.out : "error";
}

}  // namespace

TEST_CASE("json reader: the events of valid documents", "[io][json]") {
  CHECK(ours("{}") == "{ }");
  CHECK(ours(" [ ] ") == "[ ]");
  CHECK(ours("\t\r\n7\n") == "i:7");
  CHECK(ours(R"({"a":[1,-2,3.5,true,false,null,"x"],"b":{}})") == "{ k:a [ i:1 i:-2 f:3.5 t f n s:x ] k:b { } }");
  CHECK(ours(R"([[[]],[{}]])") == "[ [ [ ] ] [ { } ] ]");
  // numbers: integers that fit, -0, and the rest as doubles
  CHECK(ours("18446744073709551615") == "i:18446744073709551615");
  CHECK(ours("18446744073709551616") == "f:1.8446744073709552e+19");
  CHECK(ours("-9223372036854775808") == "i:-9223372036854775808");
  CHECK(ours("-9223372036854775809") == "f:-9.2233720368547758e+18");
  CHECK(ours("-0") == "i:0");
  CHECK(ours("[0,1E2,1e+2,25e-1,-0.0]") == "[ i:0 f:100 f:100 f:2.5 f:-0 ]");
  CHECK(ours("1e-400") == "f:0");                    // below the smallest double: zero
  CHECK(ours("0.00000000000000000001e-390") == "f:0");
  CHECK(ours("-1e-400") == "f:-0");
  // escapes, and UTF-8 passed through or written from \u
  CHECK(ours(R"("\"\\\/\b\f\n\r\t")") == "s:\"\\/\b\f\n\r\t");
  CHECK(ours(R"("\u0041\u00e9\u20AC\ud83d\ude00")") == "s:A\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
  CHECK(ours("\"A\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"") == "s:A\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
  CHECK(ours(R"("\u0000")") == std::string("s:") + '\0');
  // deep nesting does not recurse
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  Log log;
  CHECK(read_json(deep, log).empty());
}

TEST_CASE("json reader: what it rejects, with the byte and the reason", "[io][json]") {
  const auto rejects = [](std::string_view text, const std::string& message) {
    INFO("text: " << text);
    const std::string got = ours(text);
    CHECK_THAT(got, Contains("error: ") && Contains(message));
  };
  rejects("", "byte 0: expected a value, got the end of the text");
  rejects("   ", "byte 3: expected a value");
  rejects("{\"a\" 1}", "byte 5: expected ':' after an object key, got '1'");
  rejects("{\"a\":1,}", "byte 7: expected a string as the key of an object member, got '}'");
  rejects("[1,]", "byte 3: expected a value, got ']'");
  rejects("[1 2]", "byte 3: expected ',' or ']' after an array element, got '2'");
  rejects("{\"a\":1]", "expected ',' or '}' after an object member, got ']'");
  rejects("{} x", "byte 3: expected the end of the text after the JSON value, got 'x'");
  rejects("{}{}", "expected the end of the text");
  rejects("[", "expected a value, got the end of the text");
  rejects("{", "expected a string as the key of an object member, got the end of the text");
  rejects("{1:2}", "expected a string as the key");
  rejects("01", "byte 0: a number with a leading zero");
  rejects("-", "expected a digit after '-'");
  rejects("1.", "expected a digit after the decimal point");
  rejects(".5", "expected a value, got '.'");
  rejects("+1", "expected a value, got '+'");
  rejects("1e", "expected a digit in the exponent");
  rejects("1e999", "the number 1e999 is too large for a double");
  rejects("-123456789e400", "too large");
  rejects("NaN", "expected a value, got 'N'");
  rejects("tru", "expected a value");
  rejects("nul", "expected a value");
  rejects("// x\n1", "expected a value, got '/'");
  rejects("\"abc", "expected '\"' to end the string, got the end of the text");
  rejects("\"a\tb\"", "byte 2: a control character (0x09) in a string");
  rejects(R"("\x")", "an unknown escape '\\x'");
  rejects(R"("\u12")", "expected four hex digits after '\\u'");
  rejects(R"("\udc00")", "a low surrogate (\\uDC00) without a high one");
  rejects(R"("\ud800")", "a high surrogate (\\uD800) not followed by a low surrogate");
  rejects(R"("\ud800\u0041")", "not followed by a low surrogate");
  rejects("\"\xff\"", "byte 1: a string that is not valid UTF-8");
  rejects("\"\xc0\x80\"", "not valid UTF-8");          // overlong NUL
  rejects("\"\xe0\x80\xaf\"", "not valid UTF-8");      // overlong '/'
  rejects("\"\xed\xa0\x80\"", "not valid UTF-8");      // an encoded surrogate
  rejects("\"\xf4\x90\x80\x80\"", "not valid UTF-8");  // past U+10FFFF
  rejects("\"\xe2\x82\"", "not valid UTF-8");          // truncated
  rejects("\"\xe2\x82", "byte 1: a string that is not valid UTF-8");  // cut short
  rejects("\xef\xbb\xbf{}", "expected a value, got byte 0xef");  // no byte order mark
  rejects(std::string("[1,\0]", 5), "expected a value, got byte 0x00");
}

TEST_CASE("json reader: the same verdict and events as nlohmann-json on every single-byte mutation",
          "[io][json]") {
  const std::vector<std::string> documents = {
      R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})",
      R"([1,-2,3.25,-0.5e-3,1E+2,0,-0,true,false,null])",
      R"({"a":"\u00e9\ud83d\ude00\n\"","b":[{},[]],"":""})",
      "{\"k\":\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"}",
      R"([18446744073709551615,18446744073709551616,-9223372036854775808,-9223372036854775809])",
      R"(  {"x" : [ 1 , { "y" : null } ] }  )",
  };
  static constexpr char kAscii[] = "{}[]\",:\\/0159-+.eEtfnu \t\n";
  static constexpr char kOther[] = "\0\x1f\x7f\x80\xbf\xc2\xc3\xe0\xed\xf0\xf4\xff";  // NUL, controls, UTF-8 lead and tail bytes
  const std::string inserts = std::string(kAscii, sizeof kAscii - 1) + std::string(kOther, sizeof kOther - 1);
  int compared = 0, accepted = 0;
  const auto compare = [&](const std::string& text) {
    if (text.starts_with("\xef\xbb\xbf")) return;  // nlohmann skips a byte order mark; read_json rejects it
    const std::string a = ours(text), b = theirs(text);
    const bool ok_a = !a.starts_with("error: "), ok_b = b != "error";
    if (ok_b && a.ends_with("after the JSON value, got byte 0x00")) return;  // nlohmann ends its input at a NUL
    ++compared;
    accepted += ok_a;
    if (ok_a != ok_b || (ok_a && a != b)) {
      INFO("text: " << text);
      CHECK(a == b);
    }
  };
  for (const std::string& doc : documents) {
    REQUIRE(ours(doc) == theirs(doc));
    for (size_t i = 0; i <= doc.size(); ++i) {
      if (i < doc.size()) compare(doc.substr(0, i) + doc.substr(i + 1));  // a byte deleted
      for (char c : inserts) {
        compare(doc.substr(0, i) + c + doc.substr(i));                                  // a byte inserted
        if (i < doc.size()) compare(doc.substr(0, i) + c + doc.substr(i + 1));          // a byte replaced
      }
      compare(doc.substr(0, i));  // cut short
    }
  }
  INFO(compared << " texts compared, " << accepted << " accepted");
  CHECK(compared > 20000);
  CHECK(accepted > 2000);  // both verdicts occur often
}
