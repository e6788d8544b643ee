// gradus/profile/report.hpp — tables of where a profiled run spent its time, FLOPs and memory
// (tfprof's `op`, `scope` and parameter views), computed from the profiler's events alone.
//
//   auto rows = gd::profile::report(profiler.events(), {.group_by = gd::profile::GroupBy::op, .top = 10});
//   std::cout << gd::profile::format_report(rows, "ops by self time");
//   std::cout << gd::profile::format_parameters(profiler.parameters());
//
// prints, for example:
//
//   ops by self time
//   key     calls  self ms  fwd ms  bwd ms      %  GFLOP  GFLOP/s  peak MiB
//   ------  -----  -------  ------  ------  -----  -----  -------  --------
//   matmul      2    5.500   2.000   3.500   90.2  0.013     2.29      2.00
//   add         2    0.400   0.300   0.100    6.6  0.000     0.03      0.00
//   relu        1    0.200   0.200   0.000    3.3  0.000     0.05      0.00
//   ------  -----  -------  ------  ------  -----  -----  -------  --------
//   total       5    6.100   2.500   3.600  100.0  0.013     2.07      2.00
//
//   name                  shape     dtype    count  bytes
//   --------------------  --------  -------  -----  -----
//   dense1.kernel         [784,10]  float32   7840  31360
//   dense1.bias           [10]      float32     10     40
//   subtotal dense1                           7850  31400
//   --------------------  --------  -------  -----  -----
//   total (2 parameters)                      7850  31400
//
// Times are SELF times (Event::self_ns: an event's duration less the events nested in it), so
// the rows of a report add up to the time its events cover and nothing is counted twice.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

#include "gradus/core/compiled.hpp"
#include "gradus/core/error.hpp"
#include "gradus/profile/event.hpp"

namespace gradus::profile {

/// What a report row aggregates.
enum class GroupBy {
  op,            ///< the event's name: "matmul"
  scope,         ///< the module path that ran it: "encoder/lstm"; "(top)" outside any module
  op_and_scope,  ///< both: "encoder/lstm/matmul"; just "matmul" outside any module
};

/// The column a report is ordered by (largest first; `key` in alphabetical order).
enum class Column { self_time, total_time, forward_time, backward_time, calls, flops, bytes, gflops_per_s, peak_bytes, key };

/// Options of `report`: `{.group_by = GroupBy::scope, .top = 10, .nested_scopes = true}`.
struct ReportOptions {
  GroupBy group_by = GroupBy::op;
  int top = 0;                  ///< keep only the first `top` rows (in `order_by` order); 0 keeps all
  bool include_scopes = false;  ///< also user Scope events (kind scope); under op grouping their key is "scope:<label>"
  /// Only with GroupBy::scope: a row "a" also counts the events of "a/b", "a/b/c", ... (tfprof's
  /// accumulated scope view), and every prefix of a scope gets a row. Rows then overlap.
  bool nested_scopes = false;
  Column order_by = Column::self_time;  ///< the rows' order
  // Thresholds (tfprof's -min_micros, -min_bytes, -min_float_ops): rows below any are left out
  // (after the percentages are computed over every row).
  int64_t min_self_ns = 0;  ///< self time
  double min_bytes = 0;     ///< bytes read and written
  double min_flops = 0;     ///< floating-point operations
};

/// One row of a report: the events of one key, summed.
struct ReportRow {
  std::string key;
  int64_t calls = 0;        ///< events
  int64_t forward_ns = 0;   ///< self time of its forward events
  int64_t backward_ns = 0;  ///< self time of its backward events
  int64_t self_ns = 0;      ///< self time of all its events (forward + backward, + scope events if included)
  /// Inclusive time (duration) of its events that are not nested in another event of the same
  /// row on their thread: a matmul run inside a matmul's backward is not counted twice.
  int64_t total_ns = 0;
  double flops = 0;         ///< sum of Event::flops
  double bytes = 0;         ///< sum of Event::bytes
  double gflops_per_s = 0;  ///< flops / self time (0 when the self time is 0)
  int64_t peak_bytes = 0;   ///< max of Event::peak_bytes
  int64_t alloc_bytes = 0;  ///< sum of Event::alloc_bytes
  double percent = 0;       ///< self_ns as a percentage of the self time of all the events reported (before `top`)
};

namespace detail {

/// The events in `events` ordered per thread as they nest: by (thread, start_ns, depth); for each,
/// the index of the event directly enclosing it (-1 for none). value_error naming `who` when an
/// event ends before it starts, its child time is not within its duration, or two events of a
/// thread overlap without one containing the other.
struct Nesting {
  std::vector<size_t> order;
  std::vector<ptrdiff_t> parent;  ///< indexed like `events`
};

Nesting nest_events(const std::vector<Event>& events, const char* who);

/// The keys of the rows event `e` counts in (none when it is not reported).
std::vector<std::string> report_keys(const Event& e, const ReportOptions& o);

}  // namespace detail

/// The events grouped into rows by `o.group_by`, sorted by self time, largest first (ties by key),
/// cut to the first `o.top` rows. Rows count the forward and backward events (and the user
/// Scope events when `o.include_scopes`); a Scope's own self time is never an op's.
/// value_error when `o.top` is negative or the events are not well formed (see Event).
///   report(events, {.group_by = GroupBy::scope})  // rows "net/dense1", "(top)", "net"
std::vector<ReportRow> report(const std::vector<Event>& events, const ReportOptions& o = {});

namespace detail {

std::string fixed(double v, int decimals);

/// `cells` (the first row the header) as columns two spaces apart: the first `left` columns
/// left-aligned, the others right-aligned; a dashed line under the header and above the last
/// row when `total_line`.
std::string format_table(const std::vector<std::vector<std::string>>& cells, size_t left, bool total_line);

}  // namespace detail

/// `rows` as an aligned text table under `title`: key, calls, self ms, fwd ms, bwd ms, %, GFLOP,
/// GFLOP/s, peak MiB (times to the microsecond), then a total line (sums of the rows shown,
/// max of peak; rows of nested scopes overlap, so their total counts nested time more than once).
/// Column widths follow the contents. See the example at the top of this file.
std::string format_report(const std::vector<ReportRow>& rows, std::string_view title);

/// tfprof's parameter view: one line per parameter (name, shape, dtype, count, bytes), grouped by
/// module scope in the order the scopes first appear, each group closed by a "subtotal <scope>"
/// line ("(top)" for parameters outside any module), then a "total (<n> parameters)" line.
/// (See the example at the top of this file.) Parameters of fewer than `min_count` elements are
/// left out (tfprof's -min_params), and the totals count the ones shown.
std::string format_parameters(const std::vector<ParameterInfo>& params, int64_t min_count = 0);

/// What `advice` compares the ops with: this machine's rates, measured (measure_machine) or given.
struct MachineRates {
  double gemm_gflops = 0;      ///< a large float matrix product's GFLOP/s (0: not compared)
  double bandwidth_gbps = 0;   ///< a large copy's bytes read and written per second, in GB/s (0: not compared)
};

/// (gd::profile::measure_machine, in profile/profiler.hpp, measures them.)
/// Options of `advice`.
struct AdviceOptions {
  int top = 3;                  ///< the most expensive ops named
  double slow_fraction = 0.1;   ///< an op below this fraction of the machine's rate is named as slow
  double min_percent = 1.0;     ///< ops under this share of the op time are not named as slow
  double host_fraction = 0.5;   ///< a step whose ops cover less of its wall time is said to be host-bound
};

/// A few lines of advice about a profiled run (tfprof's advisor): the most expensive ops; ops
/// that reach a small fraction of the machine's GEMM rate (those with more than 8 FLOPs per byte)
/// or of its bandwidth (the others); and, when ops cover little of the busy time, that host work
/// or copies outside the ops dominate. Each line starts with "- ".
///   std::cout << gd::profile::advice(prof.events(), gd::profile::measure_machine());
std::string advice(const std::vector<Event>& events, const MachineRates& machine, const AdviceOptions& options = {});

/// The totals of one profiled step.
struct StepSummary {
  /// Wall time covered: per thread, the length of the union of its events' intervals (which is
  /// the union of its outermost events'), summed over threads. Two threads busy at the same time
  /// both count, so this is busy thread time, the sum of all events' self times.
  int64_t wall_ns = 0;
  int64_t op_self_ns = 0;  ///< self time of the forward and backward events (what Scope events enclose but no op ran is left out)
  double flops = 0;        ///< sum over forward and backward events
  double bytes = 0;        ///< sum over forward and backward events
  int64_t peak_bytes = 0;  ///< max of Event::peak_bytes over all events: the largest rise of memory in use within one event
};

/// The totals of `events` (see StepSummary); value_error when they are not well formed.
///   summarize(profiler.events()).wall_ns / 1e6  // milliseconds the step's threads were busy
StepSummary summarize(const std::vector<Event>& events);

}  // namespace gradus::profile

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::profile {
GRADUS_INLINE detail::Nesting detail::nest_events(const std::vector<Event>& events, const char* who) {
  Nesting n;
  n.order.resize(events.size());
  n.parent.assign(events.size(), -1);
  std::iota(n.order.begin(), n.order.end(), size_t(0));
  for (const Event& e : events) {
    GRADUS_CHECK(value_error, e.end_ns >= e.start_ns, who, ": event '", e.name, "' ends (", e.end_ns,
                 " ns) before it starts (", e.start_ns, " ns)");
    GRADUS_CHECK(value_error, e.child_ns >= 0 && e.child_ns <= e.duration_ns(), who, ": event '", e.name,
                 "' has child time ", e.child_ns, " ns, expected 0 to its duration ", e.duration_ns(), " ns");
  }
  std::stable_sort(n.order.begin(), n.order.end(), [&](size_t a, size_t b) {
    const Event &x = events[a], &y = events[b];
    if (x.thread != y.thread) return x.thread < y.thread;
    if (x.start_ns != y.start_ns) return x.start_ns < y.start_ns;
    return x.depth < y.depth;
  });
  std::vector<size_t> stack;
  int thread = 0;
  for (size_t i : n.order) {
    const Event& e = events[i];
    if (e.thread != thread) {
      stack.clear();
      thread = e.thread;
    }
    // An event that ends where another starts encloses it only if it is less deep.
    while (!stack.empty() && (events[stack.back()].end_ns < e.start_ns ||
                              (events[stack.back()].end_ns == e.start_ns && events[stack.back()].depth >= e.depth)))
      stack.pop_back();
    if (!stack.empty()) {
      const Event& p = events[stack.back()];
      GRADUS_CHECK(value_error, e.end_ns <= p.end_ns, who, ": events '", p.name, "' [", p.start_ns, ", ", p.end_ns,
                   "] ns and '", e.name, "' [", e.start_ns, ", ", e.end_ns, "] ns on thread ", e.thread,
                   " overlap without one containing the other");
      n.parent[i] = ptrdiff_t(stack.back());
    }
    stack.push_back(i);
  }
  return n;
}

GRADUS_INLINE std::vector<std::string> detail::report_keys(const Event& e, const ReportOptions& o) {
  if (e.kind == EventKind::scope && !o.include_scopes) return {};
  const std::string label = e.kind == EventKind::scope ? "scope:" + e.name : e.name;
  switch (o.group_by) {
    case GroupBy::op:
      return {label};
    case GroupBy::op_and_scope:
      return {e.scope.empty() ? label : e.scope + "/" + label};
    case GroupBy::scope:
      break;
  }
  if (e.scope.empty()) return {"(top)"};
  if (!o.nested_scopes) return {e.scope};
  std::vector<std::string> keys;
  for (size_t at = e.scope.find('/'); at != std::string::npos; at = e.scope.find('/', at + 1))
    if (at > 0 && e.scope[at - 1] != '/') keys.push_back(e.scope.substr(0, at));  // "a//b": the prefix "a" once
  keys.push_back(e.scope);
  return keys;
}

GRADUS_INLINE std::vector<ReportRow> report(const std::vector<Event>& events, const ReportOptions& o) {
  GRADUS_CHECK(value_error, o.top >= 0, "report: top must be >= 0 (0 for all rows), got ", o.top);
  const detail::Nesting nesting = detail::nest_events(events, "report");
  std::vector<std::vector<std::string>> keys(events.size());
  for (size_t i = 0; i < events.size(); ++i) keys[i] = detail::report_keys(events[i], o);

  std::map<std::string, ReportRow> rows;
  int64_t all_self = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    if (keys[i].empty()) continue;
    all_self += e.self_ns();
    for (const std::string& key : keys[i]) {
      ReportRow& r = rows[key];
      r.key = key;
      ++r.calls;
      if (e.kind == EventKind::forward) r.forward_ns += e.self_ns();
      if (e.kind == EventKind::backward) r.backward_ns += e.self_ns();
      r.self_ns += e.self_ns();
      r.flops += e.flops;
      r.bytes += e.bytes;
      r.peak_bytes = std::max(r.peak_bytes, e.peak_bytes);
      r.alloc_bytes += e.alloc_bytes;
      bool nested_in_same_row = false;
      for (ptrdiff_t p = nesting.parent[i]; p >= 0 && !nested_in_same_row; p = nesting.parent[size_t(p)])
        nested_in_same_row = std::find(keys[size_t(p)].begin(), keys[size_t(p)].end(), key) != keys[size_t(p)].end();
      if (!nested_in_same_row) r.total_ns += e.duration_ns();
    }
  }
  std::vector<ReportRow> out;
  out.reserve(rows.size());
  for (auto& [key, r] : rows) {
    r.gflops_per_s = r.self_ns > 0 ? r.flops / double(r.self_ns) : 0.0;
    r.percent = all_self > 0 ? 100.0 * double(r.self_ns) / double(all_self) : 0.0;
    out.push_back(std::move(r));
  }
  std::erase_if(out, [&](const ReportRow& r) {
    return r.self_ns < o.min_self_ns || r.bytes < o.min_bytes || r.flops < o.min_flops;
  });
  auto value = [&](const ReportRow& r) -> double {
    switch (o.order_by) {
      case Column::total_time: return double(r.total_ns);
      case Column::forward_time: return double(r.forward_ns);
      case Column::backward_time: return double(r.backward_ns);
      case Column::calls: return double(r.calls);
      case Column::flops: return r.flops;
      case Column::bytes: return r.bytes;
      case Column::gflops_per_s: return r.gflops_per_s;
      case Column::peak_bytes: return double(r.peak_bytes);
      default: return double(r.self_ns);
    }
  };
  std::stable_sort(out.begin(), out.end(), [&](const ReportRow& a, const ReportRow& b) {
    return o.order_by == Column::key ? a.key < b.key : value(a) > value(b);
  });
  if (o.top > 0 && out.size() > size_t(o.top)) out.resize(size_t(o.top));
  return out;
}

GRADUS_INLINE std::string detail::fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

GRADUS_INLINE std::string detail::format_table(const std::vector<std::vector<std::string>>& cells, size_t left,
                                               bool total_line) {
  std::vector<size_t> width;
  for (const auto& row : cells) {
    width.resize(std::max(width.size(), row.size()), 0);
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string dashes;
  for (size_t c = 0; c < width.size(); ++c) dashes += (c ? "  " : "") + std::string(width[c], '-');
  dashes += '\n';
  std::string out;
  for (size_t r = 0; r < cells.size(); ++r) {
    if (r == 1 || (total_line && r + 1 == cells.size() && r > 1)) out += dashes;
    std::string line;
    for (size_t c = 0; c < cells[r].size(); ++c) {
      const std::string& s = cells[r][c];
      const std::string pad(width[c] - s.size(), ' ');
      line += (c ? "  " : "") + (c < left ? s + pad : pad + s);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + '\n';
  }
  return out;
}

GRADUS_INLINE std::string format_report(const std::vector<ReportRow>& rows, std::string_view title) {
  using detail::fixed;
  auto ms = [](int64_t ns) { return fixed(double(ns) / 1e6, 3); };
  std::vector<std::vector<std::string>> cells = {
      {"key", "calls", "self ms", "fwd ms", "bwd ms", "%", "GFLOP", "GFLOP/s", "peak MiB"}};
  ReportRow total;
  total.key = "total";
  for (const ReportRow& r : rows) {
    cells.push_back({r.key, std::to_string(r.calls), ms(r.self_ns), ms(r.forward_ns), ms(r.backward_ns),
                     fixed(r.percent, 1), fixed(r.flops / 1e9, 3), fixed(r.gflops_per_s, 2),
                     fixed(double(r.peak_bytes) / (1024.0 * 1024.0), 2)});
    total.calls += r.calls;
    total.self_ns += r.self_ns;
    total.forward_ns += r.forward_ns;
    total.backward_ns += r.backward_ns;
    total.percent += r.percent;
    total.flops += r.flops;
    total.peak_bytes = std::max(total.peak_bytes, r.peak_bytes);
  }
  total.gflops_per_s = total.self_ns > 0 ? total.flops / double(total.self_ns) : 0.0;
  cells.push_back({total.key, std::to_string(total.calls), ms(total.self_ns), ms(total.forward_ns),
                   ms(total.backward_ns), fixed(total.percent, 1), fixed(total.flops / 1e9, 3),
                   fixed(total.gflops_per_s, 2), fixed(double(total.peak_bytes) / (1024.0 * 1024.0), 2)});
  return std::string(title) + '\n' + detail::format_table(cells, 1, true);
}

GRADUS_INLINE std::string format_parameters(const std::vector<ParameterInfo>& all, int64_t min_count) {
  std::vector<ParameterInfo> params;
  for (const ParameterInfo& p : all)
    if (p.count >= min_count) params.push_back(p);
  std::vector<std::string> scopes;
  for (const ParameterInfo& p : params)
    if (std::find(scopes.begin(), scopes.end(), p.scope) == scopes.end()) scopes.push_back(p.scope);
  std::vector<std::vector<std::string>> cells = {{"name", "shape", "dtype", "count", "bytes"}};
  int64_t count = 0, bytes = 0;
  for (const std::string& scope : scopes) {
    int64_t scope_count = 0, scope_bytes = 0;
    for (const ParameterInfo& p : params) {
      if (p.scope != scope) continue;
      cells.push_back({p.name, p.shape.str(), p.dtype, std::to_string(p.count), std::to_string(p.bytes)});
      scope_count += p.count;
      scope_bytes += p.bytes;
    }
    cells.push_back({"subtotal " + (scope.empty() ? std::string("(top)") : scope), "", "",
                     std::to_string(scope_count), std::to_string(scope_bytes)});
    count += scope_count;
    bytes += scope_bytes;
  }
  cells.push_back({"total (" + std::to_string(params.size()) + " parameters)", "", "", std::to_string(count),
                   std::to_string(bytes)});
  return detail::format_table(cells, 3, true);
}

GRADUS_INLINE StepSummary summarize(const std::vector<Event>& events) {
  const detail::Nesting nesting = detail::nest_events(events, "summarize");
  StepSummary s;
  int thread = 0;
  bool open = false;
  int64_t end = 0;
  for (size_t i : nesting.order) {
    const Event& e = events[i];
    if (!open || e.thread != thread || e.start_ns > end) {  // a new stretch of busy time
      open = true;
      thread = e.thread;
      end = e.start_ns;
    }
    if (e.end_ns > end) {
      s.wall_ns += e.end_ns - end;
      end = e.end_ns;
    }
    if (e.kind != EventKind::scope) {
      s.op_self_ns += e.self_ns();
      s.flops += e.flops;
      s.bytes += e.bytes;
    }
    s.peak_bytes = std::max(s.peak_bytes, e.peak_bytes);
  }
  return s;
}

GRADUS_INLINE std::string advice(const std::vector<Event>& events, const MachineRates& machine, const AdviceOptions& o) {
  GRADUS_CHECK(value_error, o.top >= 0 && o.slow_fraction >= 0 && o.min_percent >= 0 && o.host_fraction >= 0,
               "advice: top, slow_fraction, min_percent and host_fraction must be >= 0");
  const std::vector<ReportRow> rows = report(events, {.group_by = GroupBy::op});
  const StepSummary sum = summarize(events);
  std::string out;
  auto line = [&](const std::string& s) { out += "- " + s + "\n"; };
  for (size_t i = 0; i < rows.size() && i < size_t(o.top); ++i)
    line(::gradus::detail::str("expensive: ", rows[i].key, " takes ", detail::fixed(rows[i].percent, 1), "% of the op time (",
                               detail::fixed(double(rows[i].self_ns) / 1e6, 3), " ms in ", rows[i].calls, " calls)"));
  for (const ReportRow& r : rows) {
    if (r.percent < o.min_percent || r.self_ns <= 0) continue;
    const double secs = double(r.self_ns) / 1e9;
    if (r.bytes > 0 && r.flops / r.bytes > 8.0) {
      if (machine.gemm_gflops > 0 && r.gflops_per_s < o.slow_fraction * machine.gemm_gflops)
        line(::gradus::detail::str("slow: ", r.key, " computes at ", detail::fixed(r.gflops_per_s, 1), " GFLOP/s, ",
                                   detail::fixed(100.0 * r.gflops_per_s / machine.gemm_gflops, 1),
                                   "% of this machine's matrix product (", detail::fixed(machine.gemm_gflops, 1), " GFLOP/s)"));
    } else if (r.bytes > 0 && machine.bandwidth_gbps > 0) {
      const double gbps = r.bytes / secs / 1e9;
      if (gbps < o.slow_fraction * machine.bandwidth_gbps)
        line(::gradus::detail::str("slow: ", r.key, " moves ", detail::fixed(gbps, 2), " GB/s, ",
                                   detail::fixed(100.0 * gbps / machine.bandwidth_gbps, 1), "% of this machine's copy rate (",
                                   detail::fixed(machine.bandwidth_gbps, 1), " GB/s)"));
    }
  }
  if (sum.wall_ns > 0 && double(sum.op_self_ns) < o.host_fraction * double(sum.wall_ns))
    line(::gradus::detail::str("host-bound: ops cover ", detail::fixed(100.0 * double(sum.op_self_ns) / double(sum.wall_ns), 1),
                               "% of the busy time; the rest is work outside the ops (data loading, copies, the loop itself)"));
  return out;
}
}  // namespace gradus::profile
#endif  // GRADUS_DEFINE_COMPILED
