// Tests of gd::profile::Profiler: what each op records (names, shapes, FLOPs against hand
// counts, memory), module scopes, nesting, threads, and that a profiled MLP step's op times
// account for the step's wall time.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <thread>

#include "gradus/gradus.hpp"
#include "gradus/losses.hpp"
#include "gradus/nn.hpp"
#include "gradus/optim.hpp"
#include "gradus/profile.hpp"

namespace gd = gradus;
namespace nn = gradus::nn;
using gd::profile::Event;
using gd::profile::EventKind;

namespace {

gd::Tensor<float> ramp(gd::Shape s, float scale = 0.01f) {
  gd::Tensor<float> t(s);
  for (int64_t i = 0; i < t.size(); ++i) t.data()[i] = scale * float((i * 37) % 101 - 50);
  return t;
}

/// The events of `fn` run under a fresh profiler.
template <class F>
std::vector<Event> profile_run(F&& fn) {
  gd::profile::Profiler prof;
  prof.start();
  fn();
  prof.stop();
  return prof.events();
}

/// The events named `name` of kind `kind`.
std::vector<Event> named(const std::vector<Event>& events, const std::string& name, EventKind kind = EventKind::forward) {
  std::vector<Event> out;
  for (const Event& e : events)
    if (e.name == name && e.kind == kind) out.push_back(e);
  return out;
}

/// Every thread's events are properly nested: sorted by start, each one either lies inside the
/// enclosing open interval or starts after it ends; depths match the nesting.
bool well_nested(const std::vector<Event>& events) {
  std::map<int, std::vector<const Event*>> open;
  for (const Event& e : events) {  // events() orders by start time
    auto& stack = open[e.thread];
    while (!stack.empty() && stack.back()->end_ns <= e.start_ns && !(stack.back()->start_ns == e.start_ns && stack.back()->end_ns == e.start_ns))
      stack.pop_back();
    if (!stack.empty() && e.end_ns > stack.back()->end_ns) return false;
    if (e.depth != int(stack.size())) return false;
    stack.push_back(&e);
  }
  return true;
}

}  // namespace

TEST_CASE("profiler: FLOPs of each op kind match hand counts", "[profile]") {
  gd::Var<float> a = gd::Var<float>(ramp({6, 5})), b = gd::Var<float>(ramp({5, 4}));
  gd::Var<float> c = gd::Var<float>(ramp({6, 4}));

  SECTION("matmul: 2mkn forward; backward 2mkn per operand that receives a gradient") {
    const auto ev = profile_run([&] { gd::backward(gd::sum(gd::matmul(a, b))); });
    const auto f = named(ev, "matmul");
    REQUIRE(f.size() == 1);
    CHECK(f[0].flops == 2.0 * 6 * 5 * 4);
    CHECK(f[0].output_shape == gd::Shape{6, 4});
    REQUIRE(f[0].input_shapes.size() == 2);
    CHECK(f[0].input_shapes[0] == gd::Shape{6, 5});
    CHECK(f[0].bytes == double(30 + 20 + 24) * 4);
    // the node's backward computes a's gradient; b's, a trainable leaf's xᵀ·g, is deferred to the
    // end of the pass and recorded there as a matmul of b's shape (autodiff/node.hpp, LeafNode)
    const auto g = named(ev, "matmul", EventKind::backward);
    REQUIRE(g.size() == 2);
    CHECK(g[0].flops == 2.0 * 6 * 5 * 4);
    CHECK(g[0].node == f[0].node);
    CHECK(g[1].flops == 2.0 * 6 * 5 * 4);
    CHECK(g[1].output_shape == gd::Shape{5, 4});
    CHECK(g[1].start_ns >= g[0].end_ns);
  }
  SECTION("matmul with a constant weight: one backward event, a's gradient only") {
    const gd::Var<float> k = gd::Var<float>::constant(ramp({5, 4}));
    const auto g = named(profile_run([&] { gd::backward(gd::sum(gd::matmul(a, k))); }), "matmul", EventKind::backward);
    REQUIRE(g.size() == 1);
    CHECK(g[0].flops == 2.0 * 6 * 5 * 4);
  }
  SECTION("batched matmul with a transpose: 2·batch·m·k·n") {
    gd::Tensor<float> x = ramp({3, 5, 6}), y = ramp({5, 4});
    const auto ev = profile_run([&] { (void)gd::matmul(x, y, {.transpose_a = true}); });
    const auto f = named(ev, "matmul");
    REQUIRE(f.size() == 1);
    CHECK(f[0].flops == 2.0 * 3 * 6 * 5 * 4);
    CHECK(f[0].output_shape == gd::Shape{3, 6, 4});
  }
  SECTION("elementwise: elements × operations in the expression") {
    const auto ev = profile_run([&] { gd::Var<float> r = a * 2.f + gd::exp(a) - 1.f; });  // *, exp, +, -
    const auto f = named(ev, "elementwise");
    REQUIRE(f.size() == 1);
    CHECK(f[0].flops == 30.0 * 4);
    CHECK(f[0].input_shapes.size() == 2);  // a appears twice
  }
  SECTION("sum of an expression: one pass, one add per element plus the expression's operations") {
    const auto ev = profile_run([&] { (void)gd::sum(a * a, {1}); });
    const auto f = named(ev, "sum");
    REQUIRE(f.size() == 1);
    CHECK(f[0].flops == 30.0 * 2);
    CHECK(f[0].output_shape == gd::Shape{6});
  }
  SECTION("softmax 5n, log_softmax 5n, logsumexp 3n + out, max n") {
    const auto ev = profile_run([&] {
      (void)gd::softmax(c, -1);
      (void)gd::log_softmax(c, -1);
      (void)gd::logsumexp(c, 1);
      (void)gd::max(c, 1);
    });
    CHECK(named(ev, "softmax").at(0).flops == 5.0 * 24);
    CHECK(named(ev, "log_softmax").at(0).flops == 5.0 * 24);
    CHECK(named(ev, "logsumexp").at(0).flops == 3.0 * 24 + 6);
    CHECK(named(ev, "max").at(0).flops == 24.0);
  }
  SECTION("conv2d: 2·out·kh·kw·cin (+ out for the bias)") {
    // [2,7,7,3] * [3,3,3,8] VALID -> [2,5,5,8]
    gd::Tensor<float> x = ramp({2, 7, 7, 3}), w = ramp({3, 3, 3, 8}), bias = ramp({8});
    const auto ev = profile_run([&] {
      (void)gd::conv2d(x, w, {});
      (void)gd::conv2d(x, w, bias, {});
    });
    const auto f = named(ev, "conv2d");
    REQUIRE(f.size() == 2);
    const double out = 2 * 5 * 5 * 8;
    CHECK(f[0].output_shape == gd::Shape{2, 5, 5, 8});
    CHECK(f[0].flops == 2 * out * 3 * 3 * 3);
    CHECK(f[1].flops == 2 * out * 3 * 3 * 3 + out);
  }
  SECTION("conv2d backward: the product per operand x, w that receives a gradient, n(out) for the bias") {
    // A first layer: the input is a constant Tensor, so its backward event lists only w and the
    // bias; the count must still be the product for w (2·out·27), not one derived from the bias.
    gd::Tensor<float> x = ramp({2, 7, 7, 3});
    gd::Var<float> xv(ramp({2, 7, 7, 3})), w(ramp({3, 3, 3, 8})), bias(ramp({8}));
    const double out = 2 * 5 * 5 * 8, product = 2 * out * 3 * 3 * 3;
    const auto ev = profile_run([&] {
      gd::backward(gd::sum(gd::conv2d(x, w, bias, {})));
      gd::backward(gd::sum(gd::conv2d(xv, w, bias, {})));
      gd::backward(gd::sum(gd::conv2d(x, w, {})));
    });
    const auto g = named(ev, "conv2d", EventKind::backward);
    REQUIRE(g.size() == 3);
    CHECK(g[0].input_shapes.size() == 2);    // w, bias
    CHECK(g[0].flops == product + out);
    CHECK(g[1].input_shapes.size() == 3);    // x, w, bias
    CHECK(g[1].flops == 2 * product + out);
    CHECK(g[2].input_shapes.size() == 1);    // w alone
    CHECK(g[2].flops == product);
  }
  SECTION("pooling n(x), dropout n(out), bias_activation 2·n(out) and backward 3·n(out)") {
    gd::Tensor<float> img = ramp({2, 6, 6, 3});
    gd::Rng rng(5);
    gd::Var<float> bias(ramp({4}));
    const auto ev = profile_run([&] {
      (void)gd::max_pool2d(img, {});
      (void)gd::avg_pool2d(img, {});
      (void)gd::dropout(c, 0.5, rng);
      gd::backward(gd::sum(gd::detail::bias_activation(c, bias, gd::Activation{gd::ActivationKind::relu})));
    });
    CHECK(named(ev, "max_pool2d").at(0).flops == 216.0);
    CHECK(named(ev, "avg_pool2d").at(0).flops == 216.0);
    CHECK(named(ev, "dropout").at(0).flops == 24.0);
    CHECK(named(ev, "bias_activation").at(0).flops == 2.0 * 24);
    CHECK(named(ev, "bias_activation", EventKind::backward).at(0).flops == 3.0 * 24);
  }
  SECTION("sparse softmax cross-entropy 5·n(logits); lstm_sequence T·(2·N·u·4u + 10·N·u)") {
    gd::Tensor<int64_t> labels({6});
    for (int64_t i = 0; i < 6; ++i) labels.data()[i] = i % 4;
    const int64_t n = 2, t = 3, u = 5;
    gd::Var<float> xp(ramp({n, t, 4 * u})), r(ramp({u, 4 * u})), h0(ramp({n, u})), c0(ramp({n, u}));
    const auto ev = profile_run([&] {
      (void)gd::losses::sparse_softmax_cross_entropy_with_logits(labels, c);
      (void)gd::lstm_sequence(xp, r, h0, c0);
    });
    CHECK(named(ev, "sparse_softmax_cross_entropy_with_logits").at(0).flops == 5.0 * 24);
    const auto lstm = named(ev, "lstm_sequence");
    REQUIRE(!lstm.empty());
    CHECK(lstm[0].flops == double(t) * (2.0 * n * u * 4 * u + 10.0 * n * u));
    CHECK(lstm[0].output_shape == gd::Shape{n, t, u});
  }
  SECTION("data movement counts no FLOPs") {
    const auto ev = profile_run([&] {
      (void)gd::transpose(c);
      (void)gd::slice(c, {0, 0}, {2, 2});
      (void)gd::concat({c, c}, 0);
    });
    for (const char* op : {"transpose", "slice", "concat"}) {
      INFO(op);
      REQUIRE(named(ev, op).size() == 1);
      CHECK(named(ev, op)[0].flops == 0);
    }
    CHECK(named(ev, "concat")[0].input_shapes.size() == 2);
    CHECK(named(ev, "concat")[0].output_shape == gd::Shape{12, 4});
  }
}

TEST_CASE("profiler: module scopes, parameters and the backward pass", "[profile]") {
  gd::Rng rng(3);
  auto net = nn::Sequential(nn::Dense<float>({.in = 5, .out = 7}, rng), nn::ReLU{}, nn::Dense<float>({.in = 7, .out = 3}, rng));
  const gd::Tensor<float> x = ramp({4, 5});

  SECTION("attached: ops are filed under the layer paths, backward under the same") {
    gd::profile::Profiler prof;
    prof.attach(net, "net");
    prof.start();
    gd::backward(gd::mean(net(x)));
    prof.stop();
    const auto ev = prof.events();
    const auto mm = named(ev, "matmul");
    REQUIRE(mm.size() == 2);
    CHECK(mm[0].scope == "net/0");
    CHECK(mm[1].scope == "net/2");
    // each node's backward, then the kernels' gradients deferred to the end of the pass (autodiff
    // LeafNode), filed under the layer whose product deferred them
    const auto bmm = named(ev, "matmul", EventKind::backward);
    REQUIRE(bmm.size() == 4);
    CHECK(bmm[0].scope == "net/2");  // reverse order
    CHECK(bmm[1].scope == "net/0");
    std::vector<std::string> deferred{bmm[2].scope, bmm[3].scope};
    std::sort(deferred.begin(), deferred.end());
    CHECK(deferred == std::vector<std::string>{"net/0", "net/2"});
    CHECK(bmm[2].output_shape.rank() == 2);
    CHECK(named(ev, "mean").at(0).scope.empty());  // called at top level: in no module
    CHECK(well_nested(ev));

    const auto& params = prof.parameters();
    REQUIRE(params.size() == 4);
    CHECK(params[0].name == "0.kernel");
    CHECK(params[0].scope == "net/0");
    CHECK(params[0].shape == gd::Shape{5, 7});
    CHECK(params[0].count == 35);
    CHECK(params[0].bytes == 140);
    CHECK(params[0].dtype == "float32");
    // the first matmul reads the kernel's tape leaf
    CHECK(std::find(mm[0].input_nodes.begin(), mm[0].input_nodes.end(), params[0].node) != mm[0].input_nodes.end());
  }
  SECTION("not attached: class names below the enclosing path") {
    const auto ev = profile_run([&] { (void)net(x); });
    CHECK(named(ev, "matmul").at(0).scope == "Sequential/Dense");
  }
  SECTION("a user Scope encloses the ops run inside it") {
    const auto ev = profile_run([&] {
      gd::profile::Scope s("step");
      (void)net(x);
    });
    REQUIRE(ev.front().kind == EventKind::scope);
    CHECK(ev.front().name == "step");
    CHECK(ev.front().depth == 0);
    for (size_t i = 1; i < ev.size(); ++i) {
      CHECK(ev[i].depth >= 1);
      CHECK(ev[i].start_ns >= ev.front().start_ns);
      CHECK(ev[i].end_ns <= ev.front().end_ns);
    }
    int64_t children = 0;
    for (const Event& e : ev)
      if (e.depth == 1) children += e.duration_ns();
    CHECK(ev.front().child_ns == children);
    CHECK(well_nested(ev));
  }
}

TEST_CASE("profiler: memory of an op", "[profile]") {
  const gd::Tensor<float> x = ramp({1000});
  std::vector<Event> ev;
  gd::Tensor<float> keep;
  {
    gd::profile::Profiler prof;
    prof.start();
    keep = gd::eval(x * 2.f);  // allocates 4000 bytes (a 4096-byte block) that outlive the op
    prof.stop();
    ev = prof.events();
  }
  const auto f = named(ev, "elementwise");
  REQUIRE(f.size() == 1);
  CHECK(f[0].alloc_bytes >= 4000);
  CHECK(f[0].peak_bytes >= f[0].alloc_bytes);
  CHECK(f[0].dtype == "float32");
}

TEST_CASE("profiler: each thread records on its own lane", "[profile]") {
  const gd::Tensor<float> x = ramp({64, 64});
  gd::profile::Profiler prof;
  prof.start();
  (void)gd::matmul(x, x);
  std::thread t([&] { (void)gd::matmul(x, x); });
  t.join();
  prof.stop();
  const auto mm = named(prof.events(), "matmul");
  REQUIRE(mm.size() == 2);
  CHECK(mm[0].thread != mm[1].thread);
  CHECK(std::min(mm[0].thread, mm[1].thread) == 0);
}

TEST_CASE("profiler: start, stop and errors", "[profile]") {
  const gd::Tensor<float> x = ramp({8, 8});
  gd::profile::Profiler prof;
  (void)gd::matmul(x, x);  // not started: nothing recorded
  CHECK(prof.events().empty());
  prof.start();
  CHECK(prof.active());
  {
    gd::profile::Profiler other;
    CHECK_THROWS_WITH(other.start(), Catch::Contains("another profiler is running"));
  }
  CHECK_THROWS_WITH(prof.start(), Catch::Contains("already running"));
  (void)gd::matmul(x, x);
  prof.stop();
  CHECK_FALSE(prof.active());
  (void)gd::matmul(x, x);
  CHECK(named(prof.events(), "matmul").size() == 1);
  prof.start();  // a second run appends
  (void)gd::matmul(x, x);
  prof.stop();
  CHECK(named(prof.events(), "matmul").size() == 2);
  prof.clear();
  CHECK(prof.events().empty());
}

TEST_CASE("profiler: the op times of an MLP training step account for its wall time", "[profile]") {
  // 784-256(ReLU)-10, batch 128, softmax cross-entropy, SGD: heavy enough that the ops, not
  // the glue between them, take the time. The ops' self times must cover >= 90% of the step's
  // wall time measured outside the profiler (and never more than it).
  gd::Rng rng(7);
  auto net = nn::Sequential(nn::Dense<float>({.in = 784, .out = 256, .activation = nn::relu}, rng),
                            nn::Dense<float>({.in = 256, .out = 10}, rng));
  gd::optim::SGD<float> opt(net.parameters(), {.lr = 0.01});
  const gd::Tensor<float> x = ramp({128, 784});
  gd::Tensor<int64_t> y({128});
  for (int64_t i = 0; i < 128; ++i) y.data()[i] = i % 10;
  auto step = [&] {
    opt.zero_grad();
    auto loss = gd::losses::sparse_softmax_cross_entropy_with_logits(y, net(x));
    gd::backward(loss);
    opt.step();
  };
  for (int i = 0; i < 3; ++i) step();  // warm: caches filled

  double best = 0;
  for (int attempt = 0; attempt < 5 && best < 0.9; ++attempt) {  // a shared machine may preempt one run
    gd::profile::Profiler prof;
    prof.attach(net);
    prof.start();
    const auto t0 = std::chrono::steady_clock::now();
    step();
    const auto t1 = std::chrono::steady_clock::now();
    prof.stop();
    const double wall = double(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
    double self = 0;
    int ops = 0;
    for (const Event& e : prof.events()) self += double(e.self_ns()), ++ops;
    CHECK(self <= wall);
    CHECK(ops >= 8);
    best = std::max(best, self / wall);
  }
  INFO("share of the step's wall time inside op events: " << best);
  CHECK(best >= 0.9);
}

TEST_CASE("profiler: gd::name_scope files ops outside and around modules, and names the graph's boxes", "[profile]") {
  gd::Rng rng(5);
  auto net = nn::Sequential(nn::Dense<float>({.in = 5, .out = 3}, rng));
  const gd::Tensor<float> x = ramp({4, 5});
  gd::profile::Profiler prof;
  prof.attach(net, "net");
  prof.start();
  gd::Var<float> loss;
  {
    gd::name_scope tower("tower");
    gd::Var<float> y = net(x);  // an attached module inside a scope: "tower/net/0"
    {
      gd::name_scope inner("loss");
      loss = gd::mean(gd::square(y));  // outside any module: "tower/loss"
    }
    (void)gd::Var<float>(y * 2.f);  // back in "tower"
  }
  (void)gd::Var<float>(loss + 1.f);  // no scope
  gd::name_scope unnamed("");       // an empty name names nothing
  (void)gd::Var<float>(loss * 3.f);
  prof.stop();
  const auto ev = prof.events();
  CHECK(named(ev, "matmul").at(0).scope == "tower/net/0");
  CHECK(named(ev, "mean").at(0).scope == "tower/loss");
  const auto elementwise = named(ev, "elementwise");  // (the square is fused into the mean)
  REQUIRE(elementwise.size() == 3);  // y * 2, loss + 1, loss * 3
  CHECK(elementwise[0].scope == "tower");
  CHECK(elementwise[1].scope.empty());
  CHECK(elementwise[2].scope.empty());
  // the TensorBoard graph groups by these paths: its node names start with them
  const auto g = gd::profile::graph_def(ev, prof.parameters());
  bool loss_box = false, tower_box = false;
  for (const auto& n : g.nodes) {
    loss_box = loss_box || n.name.rfind("tower/loss/", 0) == 0;
    tower_box = tower_box || n.name.rfind("tower/net/0/", 0) == 0;
  }
  CHECK(loss_box);
  CHECK(tower_box);
  CHECK(well_nested(ev));
}
