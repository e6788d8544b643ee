// libFuzzer harness: detail::read_json (the reader of safetensors headers) on arbitrary bytes.
// A text it rejects must get an error message; a text it accepts is written back as JSON from its
// events (objects and arrays balanced, strings escaped, numbers in a form that reads back as the
// same kind and value), and reading that must accept it with the same events. Anything else traps.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "fuzz_common.hpp"
#include "gradus/detail/json.hpp"

namespace {

/// The events of a reading as a log, and the same document written back as JSON.
struct Echo {
  std::string log, json;
  std::vector<bool> first;  // per open container: no member written yet
  bool after_key = false;

  void separate() {
    if (after_key) {
      after_key = false;
    } else if (!first.empty()) {
      if (!first.back()) json += ',';
      first.back() = false;
    }
  }
  void open(char c) {
    separate();
    json += c;
    first.push_back(true);
    log += c;
  }
  void close(char c) {
    if (first.empty()) __builtin_trap();  // a close without its open
    first.pop_back();
    json += c;
    log += c;
  }
  void text(std::string& s, char kind) {
    gradus::io::detail::append_json_string(json, s);
    log += kind;
    log += std::to_string(s.size()) + ':' + s;
  }
  void start_object() { open('{'); }
  void end_object() { close('}'); }
  void start_array() { open('['); }
  void end_array() { close(']'); }
  void key(std::string& k) {
    if (first.empty()) __builtin_trap();  // a key outside an object
    separate();
    text(k, 'k');
    json += ':';
    after_key = true;
  }
  void string(std::string& s) {
    separate();
    text(s, 's');
  }
  void number_unsigned(uint64_t v) {
    separate();
    json += std::to_string(v);
    log += 'u' + std::to_string(v);
  }
  void number_integer(int64_t v) {
    if (v >= 0) __builtin_trap();  // read_json passes integers >= 0 as unsigned
    separate();
    json += std::to_string(v);
    log += 'i' + std::to_string(v);
  }
  void number_float(double v) {
    if (!std::isfinite(v)) __builtin_trap();  // too large is an error, not infinity
    separate();
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    std::string f = buf;
    if (f.find_first_of(".e") == std::string::npos) f += ".0";  // stays a float when read back
    json += f;
    log += 'f' + f;
  }
  void boolean(bool b) {
    separate();
    json += b ? "true" : "false";
    log += b ? 't' : 'f';
  }
  void null() {
    separate();
    json += "null";
    log += 'n';
  }
};

}  // namespace

GRADUS_FUZZ_TARGET(json) {
  Echo first;
  const std::string error = gradus::detail::read_json(gradus::fuzz::bytes(data, size), first);
  if (!error.empty()) {
    if (error.rfind("byte ", 0) != 0) __builtin_trap();  // every error names its byte
    return 0;
  }
  if (!first.first.empty()) __builtin_trap();  // accepted with a container left open
  Echo second;
  if (!gradus::detail::read_json(first.json, second).empty() || second.log != first.log) __builtin_trap();
  return 0;
}
