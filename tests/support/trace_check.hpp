// Checks that a parsed Chrome trace (the JSON of gd::profile::chrome_trace_json) draws as proper
// nesting: on each (pid, tid), every complete event ("ph":"X") either contains the next one or
// ends before it starts. Usable on hand-made and on real traces:
//
//   CHECK(trace_nesting_problem(nlohmann::json::parse(gd::profile::chrome_trace_json(events))) == "");
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace gradus_test {

/// "" when every lane of `trace` (an object with "traceEvents") nests properly, else a sentence
/// naming the first two events that overlap without one containing the other, or what is
/// malformed. ts and dur (microseconds) are compared as whole nanoseconds (rounded), so the
/// decimal form of an exact nanosecond time compares exactly. In each lane the events are taken
/// by start time, the longer first at equal starts.
inline std::string trace_nesting_problem(const nlohmann::json& trace) {
  struct Span {
    int64_t start, end;
    std::string name;
  };
  if (!trace.is_object() || !trace.contains("traceEvents") || !trace["traceEvents"].is_array())
    return "trace is not an object with a \"traceEvents\" array";
  std::map<std::pair<int64_t, int64_t>, std::vector<Span>> lanes;
  for (const auto& e : trace["traceEvents"]) {
    if (!e.is_object() || e.value("ph", "") != "X") continue;
    if (!e.contains("ts") || !e["ts"].is_number() || !e.contains("dur") || !e["dur"].is_number() ||
        !e.contains("pid") || !e.contains("tid"))
      return "complete event without numeric ts/dur or without pid/tid: " + e.dump();
    const int64_t start = std::llround(e["ts"].get<double>() * 1000.0);
    const int64_t dur = std::llround(e["dur"].get<double>() * 1000.0);
    if (dur < 0) return "event with negative dur: " + e.dump();
    lanes[{e["pid"].get<int64_t>(), e["tid"].get<int64_t>()}].push_back({start, start + dur, e.value("name", "")});
  }
  for (auto& [lane, spans] : lanes) {
    std::stable_sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
      return a.start != b.start ? a.start < b.start : a.end > b.end;
    });
    std::vector<const Span*> open;  // the events enclosing the current one, outermost first
    for (const Span& s : spans) {
      while (!open.empty() && open.back()->end <= s.start && !(open.back()->end == s.start && s.end == s.start &&
                                                               open.back()->start == s.start))
        open.pop_back();
      if (!open.empty() && s.end > open.back()->end) {
        std::ostringstream why;
        why << "pid " << lane.first << " tid " << lane.second << ": '" << open.back()->name << "' ["
            << open.back()->start << ", " << open.back()->end << "] ns and '" << s.name << "' [" << s.start << ", "
            << s.end << "] ns overlap without one containing the other";
        return why.str();
      }
      open.push_back(&s);
    }
  }
  return "";
}

}  // namespace gradus_test
