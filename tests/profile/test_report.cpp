// gd::profile::report, format_report, format_parameters and summarize on hand-made events with
// nesting on two threads; every expected number below is summed by hand from the events.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "gradus/profile/event.hpp"
#include "gradus/profile/report.hpp"
#include "../support/profile_events.hpp"

namespace gd = gradus;
namespace gp = gradus::profile;
using gradus_test::event;

namespace {

constexpr auto fwd = gp::EventKind::forward;
constexpr auto bwd = gp::EventKind::backward;
constexpr auto scp = gp::EventKind::scope;

// Thread 0:                                   self
//   S scope "train_step" (top) [0,1000]        150  (children A,B,C,E: 300+50+250+250)
//     A matmul   net/dense1 [100,400]          300
//     B add      net/dense1 [400,450]           50
//     C softmax  net        [450,700]          150
//       D exp    net        [500,600]          100
//     E matmul (backward) net/dense1 [700,950] 150
//       F matmul net/dense1 [750,850]          100  (a forward op its backward runs)
// Thread 1:
//   G matmul   (top)      [200,500]            300
//   H add (backward) net/dense1 [600,650]       50
// Listed out of order on purpose: the report must not depend on the order of the events.
std::vector<gp::Event> sample() {
  return {
      event("matmul", "net/dense1", fwd, 0, 2, 750, 850, 0, 100, 16, 8),         // F
      event("train_step", "", scp, 0, 0, 0, 1000, 850, 0, 512, 0),                // S
      event("matmul", "net/dense1", fwd, 0, 1, 100, 400, 0, 600, 64, 32),        // A
      event("add", "net/dense1", fwd, 0, 1, 400, 450, 0, 8, 0, 16),              // B
      event("softmax", "net", fwd, 0, 1, 450, 700, 100, 40, 32, 32),             // C
      event("exp", "net", fwd, 0, 2, 500, 600, 0, 20, 0, 0),                     // D
      event("matmul", "net/dense1", bwd, 0, 1, 700, 950, 100, 1200, 128, -32),   // E
      event("matmul", "", fwd, 1, 0, 200, 500, 0, 300, 48, 48),                  // G
      event("add", "net/dense1", bwd, 1, 0, 600, 650, 0, 8, 0, 0),               // H
  };
}

const gp::ReportRow& row(const std::vector<gp::ReportRow>& rows, const std::string& key) {
  for (const auto& r : rows)
    if (r.key == key) return r;
  FAIL("no row " << key);
  throw;
}

}  // namespace

TEST_CASE("report by op: self, forward/backward and total times, calls, flops, percent", "[profile][report]") {
  const auto rows = gp::report(sample());
  REQUIRE(rows.size() == 4);
  // Sorted by self time; add and exp tie at 100 and go by key.
  CHECK(rows[0].key == "matmul");
  CHECK(rows[1].key == "softmax");
  CHECK(rows[2].key == "add");
  CHECK(rows[3].key == "exp");

  const auto& mm = rows[0];  // A, E, F, G
  CHECK(mm.calls == 4);
  CHECK(mm.forward_ns == 300 + 100 + 300);
  CHECK(mm.backward_ns == 150);
  CHECK(mm.self_ns == 850);
  CHECK(mm.total_ns == 300 + 250 + 300);  // F is inside E, both matmul: counted once
  CHECK(mm.flops == 600 + 1200 + 100 + 300);
  CHECK(mm.bytes == (600 + 1200 + 100 + 300) / 2.0);
  CHECK(mm.gflops_per_s == Approx(2200.0 / 850.0));
  CHECK(mm.peak_bytes == 128);
  CHECK(mm.alloc_bytes == 8 + 32 - 32 + 48);
  // Self times of the ops: 850 + 150 + 100 + 100 = 1200, the time covered (1000 + 300 + 50)
  // less the Scope's own 150.
  CHECK(mm.percent == Approx(100.0 * 850 / 1200));

  const auto& sm = rows[1];  // C (D nested, another op)
  CHECK(sm.calls == 1);
  CHECK(sm.self_ns == 150);
  CHECK(sm.total_ns == 250);
  CHECK(sm.percent == Approx(12.5));

  const auto& add = rows[2];  // B forward, H backward
  CHECK(add.calls == 2);
  CHECK(add.forward_ns == 50);
  CHECK(add.backward_ns == 50);
  CHECK(add.total_ns == 100);
  CHECK(add.flops == 16);

  double percent = 0;
  for (const auto& r : rows) percent += r.percent;
  CHECK(percent == Approx(100.0));
}

TEST_CASE("report: top-N cut keeps the largest rows, percent of all", "[profile][report]") {
  const auto rows = gp::report(sample(), {.top = 2});
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].key == "matmul");
  CHECK(rows[1].key == "softmax");
  CHECK(rows[1].percent == Approx(12.5));
  CHECK(gp::report(sample(), {.top = 10}).size() == 4);
  CHECK_THROWS_AS(gp::report(sample(), {.top = -1}), gd::value_error);
}

TEST_CASE("report: Scope events as rows only when asked", "[profile][report]") {
  const auto rows = gp::report(sample(), {.include_scopes = true});
  REQUIRE(rows.size() == 5);
  const auto& s = row(rows, "scope:train_step");
  CHECK(s.calls == 1);
  CHECK(s.self_ns == 150);
  CHECK(s.forward_ns == 0);
  CHECK(s.backward_ns == 0);
  CHECK(s.total_ns == 1000);
  CHECK(s.peak_bytes == 512);
  // All self times now: 1200 + 150.
  CHECK(s.percent == Approx(100.0 * 150 / 1350));
  CHECK(row(rows, "matmul").percent == Approx(100.0 * 850 / 1350));
  CHECK(row(rows, "matmul").self_ns == 850);  // the Scope's own time is not an op's
}

TEST_CASE("report by scope, flat and nested", "[profile][report]") {
  SECTION("flat") {
    const auto rows = gp::report(sample(), {.group_by = gp::GroupBy::scope});
    REQUIRE(rows.size() == 3);
    CHECK(rows[0].key == "net/dense1");  // A B E F H
    CHECK(rows[0].calls == 5);
    CHECK(rows[0].self_ns == 300 + 50 + 150 + 100 + 50);
    CHECK(rows[0].forward_ns == 300 + 50 + 100);
    CHECK(rows[0].backward_ns == 150 + 50);
    CHECK(rows[0].total_ns == 300 + 50 + 250 + 50);
    CHECK(rows[0].percent == Approx(100.0 * 650 / 1200));
    CHECK(rows[1].key == "(top)");  // G
    CHECK(rows[1].self_ns == 300);
    CHECK(rows[1].total_ns == 300);
    CHECK(rows[2].key == "net");  // C D
    CHECK(rows[2].calls == 2);
    CHECK(rows[2].self_ns == 250);
    CHECK(rows[2].total_ns == 250);  // D inside C
    CHECK(rows[2].flops == 60);
  }
  SECTION("nested: a scope includes its sub-scopes") {
    const auto rows = gp::report(sample(), {.group_by = gp::GroupBy::scope, .nested_scopes = true});
    REQUIRE(rows.size() == 3);
    CHECK(rows[0].key == "net");  // C D + A B E F H
    CHECK(rows[0].calls == 7);
    CHECK(rows[0].self_ns == 900);
    CHECK(rows[0].total_ns == 250 + 300 + 50 + 250 + 50);
    CHECK(rows[0].percent == Approx(75.0));
    CHECK(rows[0].peak_bytes == 128);
    CHECK(rows[1].key == "net/dense1");
    CHECK(rows[1].self_ns == 650);
    CHECK(rows[2].key == "(top)");
    CHECK(rows[2].self_ns == 300);
  }
  SECTION("with the Scope: (top) holds the whole step of thread 0") {
    const auto rows = gp::report(sample(), {.group_by = gp::GroupBy::scope, .include_scopes = true});
    const auto& top = row(rows, "(top)");  // S and G
    CHECK(top.calls == 2);
    CHECK(top.self_ns == 150 + 300);
    CHECK(top.total_ns == 1000 + 300);
  }
}

TEST_CASE("report by op and scope", "[profile][report]") {
  const auto rows = gp::report(sample(), {.group_by = gp::GroupBy::op_and_scope});
  REQUIRE(rows.size() == 5);
  CHECK(rows[0].key == "net/dense1/matmul");  // A E F
  CHECK(rows[0].self_ns == 550);
  CHECK(rows[0].total_ns == 550);
  CHECK(rows[1].key == "matmul");  // G, outside any module
  CHECK(rows[1].self_ns == 300);
  CHECK(rows[2].key == "net/softmax");
  CHECK(rows[3].key == "net/dense1/add");
  CHECK(rows[3].calls == 2);
  CHECK(rows[4].key == "net/exp");
}

TEST_CASE("report and summarize reject malformed events", "[profile][report]") {
  auto bad = sample();
  bad.push_back(event("relu", "", fwd, 1, 0, 90, 80, 0));
  CHECK_THROWS_WITH(gp::report(bad), Catch::Contains("report: event 'relu' ends (80 ns) before it starts (90 ns)"));
  bad = sample();
  bad.push_back(event("relu", "", fwd, 1, 0, 10, 20, 11));
  CHECK_THROWS_AS(gp::report(bad), gd::value_error);
  bad = sample();
  bad.push_back(event("relu", "", fwd, 1, 0, 450, 550, 0));  // straddles the end of G [200,500]
  CHECK_THROWS_WITH(gp::summarize(bad), Catch::Contains("on thread 1 overlap without one containing the other"));
  CHECK_THROWS_AS(gp::report(bad), gd::value_error);
}

TEST_CASE("summarize: wall time per thread, op self time, flops, peak", "[profile][report]") {
  const auto s = gp::summarize(sample());
  CHECK(s.wall_ns == 1000 + (300 + 50));
  CHECK(s.op_self_ns == 1200);
  CHECK(s.flops == 600 + 8 + 40 + 20 + 1200 + 100 + 300 + 8);
  CHECK(s.bytes == s.flops / 2);
  CHECK(s.peak_bytes == 512);

  // Without the Scope, thread 0 is busy in [100,450] and [450,950]: 850.
  auto ops = sample();
  ops.erase(ops.begin() + 1);
  CHECK(gp::summarize(ops).wall_ns == 850 + 350);
  CHECK(gp::summarize({}).wall_ns == 0);
}

TEST_CASE("format_report: an aligned table with a total line", "[profile][report]") {
  auto rows = gp::report(sample());
  rows[0].flops = 2.5e9;   // 2.5 GFLOP in 850 ns
  rows[0].peak_bytes = 3 << 20;
  rows[0].gflops_per_s = 2.5e9 / 850;
  const std::string table = gp::format_report(rows, "ops by self time");
  INFO(table);
  const std::string expected =
      "ops by self time\n"
      "key      calls  self ms  fwd ms  bwd ms      %  GFLOP     GFLOP/s  peak MiB\n"
      "-------  -----  -------  ------  ------  -----  -----  ----------  --------\n"
      "matmul       4    0.001   0.001   0.000   70.8  2.500  2941176.47      3.00\n"
      "softmax      1    0.000   0.000   0.000   12.5  0.000        0.27      0.00\n"
      "add          2    0.000   0.000   0.000    8.3  0.000        0.16      0.00\n"
      "exp          1    0.000   0.000   0.000    8.3  0.000        0.20      0.00\n"
      "-------  -----  -------  ------  ------  -----  -----  ----------  --------\n"
      "total        8    0.001   0.001   0.000  100.0  2.500  2083333.40      3.00\n";
  CHECK(table == expected);
}

TEST_CASE("format_report: milliseconds, and an empty report", "[profile][report]") {
  gp::ReportRow r;
  r.key = "conv2d";
  r.calls = 12;
  r.self_ns = 12'345'678;
  r.forward_ns = 10'000'000;
  r.backward_ns = 2'345'678;
  r.percent = 100;
  const std::string table = gp::format_report({r}, "t");
  INFO(table);
  CHECK(table.find("conv2d     12   12.346  10.000   2.346  100.0  0.000     0.00      0.00\n") != std::string::npos);
  CHECK(table.find("total      12   12.346  10.000   2.346  100.0") != std::string::npos);
  const std::string empty = gp::format_report({}, "nothing");
  CHECK(empty.find("total      0    0.000") != std::string::npos);
}

TEST_CASE("format_parameters: rows, subtotals per module, grand total", "[profile][report]") {
  auto param = [](std::string name, std::string scope, gd::Shape shape) {
    gp::ParameterInfo p;
    p.name = std::move(name);
    p.scope = std::move(scope);
    p.shape = shape;
    p.dtype = "float32";
    p.count = shape.numel();
    p.bytes = 4 * p.count;
    return p;
  };
  const std::vector<gp::ParameterInfo> params = {
      param("dense1.kernel", "net/dense1", {784, 10}), param("dense1.bias", "net/dense1", {10}),
      param("dense2.kernel", "net/dense2", {10, 3}),   param("dense2.bias", "net/dense2", {3}),
      param("scale", "", {}),
  };
  const std::string table = gp::format_parameters(params);
  INFO(table);
  // 7840 + 10 = 7850 (31400 bytes); 30 + 3 = 33 (132); 1 (4); all: 7884 (31536).
  const std::string expected =
      "name                  shape     dtype    count  bytes\n"
      "--------------------  --------  -------  -----  -----\n"
      "dense1.kernel         [784,10]  float32   7840  31360\n"
      "dense1.bias           [10]      float32     10     40\n"
      "subtotal net/dense1                       7850  31400\n"
      "dense2.kernel         [10,3]    float32     30    120\n"
      "dense2.bias           [3]       float32      3     12\n"
      "subtotal net/dense2                         33    132\n"
      "scale                 []        float32      1      4\n"
      "subtotal (top)                               1      4\n"
      "--------------------  --------  -------  -----  -----\n"
      "total (5 parameters)                      7884  31536\n";
  CHECK(table == expected);
  // min_count 20: the kernels alone
  const std::string big = gp::format_parameters(params, 20);
  INFO(big);
  CHECK(big ==
        "name                  shape     dtype    count  bytes\n"
        "--------------------  --------  -------  -----  -----\n"
        "dense1.kernel         [784,10]  float32   7840  31360\n"
        "subtotal net/dense1                       7840  31360\n"
        "dense2.kernel         [10,3]    float32     30    120\n"
        "subtotal net/dense2                         30    120\n"
        "--------------------  --------  -------  -----  -----\n"
        "total (2 parameters)                      7870  31480\n");
}

TEST_CASE("report: ordering by any column and thresholds on time, bytes and FLOPs", "[profile][report]") {
  const auto by_calls = gp::report(sample(), {.order_by = gp::Column::calls});
  REQUIRE(by_calls.size() == 4);
  CHECK(by_calls[0].key == "matmul");  // 4 calls (A, E, F, G)
  std::vector<std::string> keys;
  for (const auto& r : gp::report(sample(), {.order_by = gp::Column::key})) keys.push_back(r.key);
  CHECK(keys == std::vector<std::string>{"add", "exp", "matmul", "softmax"});
  // self times: matmul 850, softmax 150, add 100, exp 100 (1200 in all); flops: matmul 2200, softmax 40, exp 20, add 16
  const auto slow = gp::report(sample(), {.min_self_ns = 200});
  REQUIRE(slow.size() == 1);
  CHECK(slow[0].key == "matmul");
  CHECK(slow[0].percent == Approx(100.0 * 850 / 1200));  // the share of all the op events, not of the rows kept
  const auto heavy = gp::report(sample(), {.min_flops = 30});
  REQUIRE(heavy.size() == 2);
  CHECK(heavy[1].key == "softmax");
  CHECK(gp::report(sample(), {.min_bytes = 1e9}).empty());
}

TEST_CASE("advice: the expensive ops, ops far below the machine's rates, a host-bound step", "[profile][report]") {
  // a scope of 4 ms enclosing a matmul (1 ms, 1e7 FLOPs on 1e5 bytes: 10 GFLOP/s) and an
  // elementwise op (0.5 ms, 1e6 bytes: 2 GB/s); ops cover 1.5 of the 4 ms
  auto mm = event("matmul", "", fwd, 0, 1, 0, 1000000, 0, 1e7);
  mm.bytes = 1e5;
  auto ew = event("elementwise", "", fwd, 0, 1, 1000000, 1500000, 0, 1e3);
  ew.bytes = 1e6;
  const std::vector<gp::Event> events{event("step", "", scp, 0, 0, 0, 4000000, 1500000), mm, ew};
  const std::string text = gp::advice(events, {.gemm_gflops = 200, .bandwidth_gbps = 100});
  CHECK(text ==
        "- expensive: matmul takes 66.7% of the op time (1.000 ms in 1 calls)\n"
        "- expensive: elementwise takes 33.3% of the op time (0.500 ms in 1 calls)\n"
        "- slow: matmul computes at 10.0 GFLOP/s, 5.0% of this machine's matrix product (200.0 GFLOP/s)\n"
        "- slow: elementwise moves 2.00 GB/s, 2.0% of this machine's copy rate (100.0 GB/s)\n"
        "- host-bound: ops cover 37.5% of the busy time; the rest is work outside the ops (data loading, copies, the loop itself)\n");
  // fast enough on a slower machine, and ops covering the step: nothing but the expensive ops
  mm.depth = ew.depth = 0;
  const std::string fine = gp::advice({mm, ew}, {.gemm_gflops = 50, .bandwidth_gbps = 10}, {.top = 1});
  CHECK(fine == "- expensive: matmul takes 66.7% of the op time (1.000 ms in 1 calls)\n");
}
