// gradus/profile/trace.hpp — a profiled run as a Chrome trace: the JSON Trace Event Format that
// chrome://tracing and https://ui.perfetto.dev open, one lane per thread, ops drawn nested.
//
//   gd::profile::write_chrome_trace("step.trace.json", profiler.events());
//
// writes (one event a line here; the file has no line breaks):
//
//   {"displayTimeUnit":"ms","traceEvents":[
//   {"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":"gradus"}},
//   {"name":"thread_name","ph":"M","pid":1,"tid":0,"args":{"name":"thread 0"}},
//   {"name":"matmul","cat":"forward","ph":"X","ts":0.1,"dur":0.3,"pid":1,"tid":0,
//    "args":{"scope":"net/dense1","input_shapes":[[2,3],[3,4]],"output_shape":[2,4],
//            "dtype":"float32","flops":48,"bytes":80,"alloc_bytes":32,"peak_bytes":64,
//            "self_us":0.3,"node":7,"input_nodes":[1,2]}},
//   ...]}
//
// Every Event is a complete event ("ph":"X"): name = the op (or Scope label), cat = "forward",
// "backward" or "scope", ts/dur in microseconds (exact: the nanoseconds with three decimals,
// trailing zeros dropped), pid 1, tid = Event::thread. args hold the module scope, the shapes,
// the dtype (left out when empty), flops, bytes, alloc/peak bytes, the self time in
// microseconds, and the tape node (left out when 0) and input nodes. Metadata events ("ph":"M")
// name the process "gradus" and each thread's lane "thread <n>". Events are written per thread in
// the order they nest (start time, then depth), so viewers that break ties by file order nest them
// right. Strings are escaped as JSON requires; bytes that are not UTF-8 become U+FFFD.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "gradus/core/compiled.hpp"
#include "gradus/core/error.hpp"
#include "gradus/detail/utf8.hpp"
#include "gradus/io/file.hpp"
#include "gradus/profile/event.hpp"
#include "gradus/profile/report.hpp"

namespace gradus::profile {

namespace detail {

/// Appends `s` as a JSON string literal.
void json_string(std::string& out, std::string_view s);

/// Appends `ns` nanoseconds as a JSON number of microseconds, exactly: "1234.5" for 1234500.
void json_micros(std::string& out, int64_t ns);

/// Appends `v` as a JSON number that reads back as `v` (null when it is not finite).
void json_number(std::string& out, double v);

void json_shape(std::string& out, const Shape& s);

}  // namespace detail

/// `events` as a Chrome trace (Trace Event Format, JSON object form; see the top of this file).
/// value_error when the events are not well formed (an event that ends before it starts, events
/// of a thread that overlap without nesting).
///   std::string json = chrome_trace_json(profiler.events());
std::string chrome_trace_json(const std::vector<Event>& events);

/// Writes chrome_trace_json(events) to `path` atomically (a temporary file renamed over it, so a
/// reader never sees half a trace); io_error naming the path when it cannot be written.
///   write_chrome_trace("runs/step_10.trace.json", profiler.events());  // open in ui.perfetto.dev
void write_chrome_trace(const std::filesystem::path& path, const std::vector<Event>& events);

}  // namespace gradus::profile

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::profile {
GRADUS_INLINE void detail::json_string(std::string& out, std::string_view s) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\', out += char(c), ++i;
    } else if (c < 0x20) {
      static constexpr char hex[] = "0123456789abcdef";
      const char* named = c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : nullptr;
      if (named) out += named;
      else out += "\\u00", out += hex[c >> 4], out += hex[c & 15];
      ++i;
    } else if (const size_t n = ::gradus::detail::utf8_sequence(s.substr(i)); n > 0) {
      out.append(s.substr(i, n)), i += n;
    } else {
      out += "\\ufffd", ++i;
    }
  }
  out += '"';
}

GRADUS_INLINE void detail::json_micros(std::string& out, int64_t ns) {
  const uint64_t mag = ns < 0 ? uint64_t(0) - uint64_t(ns) : uint64_t(ns);
  if (ns < 0) out += '-';
  out += std::to_string(mag / 1000);
  if (uint64_t frac = mag % 1000; frac != 0) {
    char digits[4];
    std::snprintf(digits, sizeof digits, "%03u", unsigned(frac));
    std::string_view d(digits, 3);
    while (d.back() == '0') d.remove_suffix(1);
    out += '.';
    out += d;
  }
}

GRADUS_INLINE void detail::json_number(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  out += buf;
}

GRADUS_INLINE void detail::json_shape(std::string& out, const Shape& s) {
  out += '[';
  for (int i = 0; i < s.rank(); ++i) {  // appended piece by piece: GCC 12 -O2 warns (-Wrestrict,
    if (i) out += ',';                  // a false positive) on "," + std::to_string(...)
    out += std::to_string(s[i]);
  }
  out += ']';
}

GRADUS_INLINE std::string chrome_trace_json(const std::vector<Event>& events) {
  using detail::json_micros;
  using detail::json_number;
  using detail::json_string;
  const detail::Nesting nesting = detail::nest_events(events, "chrome_trace_json");
  std::set<int> threads;
  for (const Event& e : events) threads.insert(e.thread);

  std::string out = R"({"displayTimeUnit":"ms","traceEvents":[)";
  out += R"({"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":"gradus"}})";
  for (int t : threads) {
    out += R"(,{"name":"thread_name","ph":"M","pid":1,"tid":)" + std::to_string(t) + R"(,"args":{"name":"thread )" +
           std::to_string(t) + "\"}}";
  }
  for (size_t i : nesting.order) {
    const Event& e = events[i];
    out += R"(,{"name":)";
    json_string(out, e.name);
    out += R"(,"cat":")";
    out += to_string(e.kind);
    out += R"(","ph":"X","ts":)";
    json_micros(out, e.start_ns);
    out += R"(,"dur":)";
    json_micros(out, e.duration_ns());
    out += R"(,"pid":1,"tid":)" + std::to_string(e.thread) + R"(,"args":{"scope":)";
    json_string(out, e.scope);
    out += R"(,"input_shapes":[)";
    for (size_t k = 0; k < e.input_shapes.size(); ++k) {
      if (k) out += ',';
      detail::json_shape(out, e.input_shapes[k]);
    }
    out += R"(],"output_shape":)";
    detail::json_shape(out, e.output_shape);
    if (!e.dtype.empty()) {
      out += R"(,"dtype":)";
      json_string(out, e.dtype);
    }
    out += R"(,"flops":)";
    json_number(out, e.flops);
    out += R"(,"bytes":)";
    json_number(out, e.bytes);
    // appended piece by piece: GCC 12 at -O3 warns (-Wrestrict, a false positive) on a literal +
    // a temporary string
    out.append(R"(,"alloc_bytes":)").append(std::to_string(e.alloc_bytes));
    out.append(R"(,"peak_bytes":)").append(std::to_string(e.peak_bytes));
    out += R"(,"self_us":)";
    json_micros(out, e.self_ns());
    if (e.node != 0) out.append(R"(,"node":)").append(std::to_string(e.node));
    out += R"(,"input_nodes":[)";
    for (size_t k = 0; k < e.input_nodes.size(); ++k) out.append(k ? "," : "").append(std::to_string(e.input_nodes[k]));
    out += "]}}";
  }
  out += "]}";
  return out;
}

GRADUS_INLINE void write_chrome_trace(const std::filesystem::path& path, const std::vector<Event>& events) {
  io::write_file_atomic(path, chrome_trace_json(events));
}
}  // namespace gradus::profile
#endif  // GRADUS_DEFINE_COMPILED
