// Tests that need an NVIDIA GPU (ctest label `gpu`). Where there is none, each test prints
// "no GPU: <why>" and returns, and ctest reports it skipped. scripts/gpu-check runs them on a
// machine with a GPU.
//
// What they check: the device's identity; tensors to the GPU and back, bit for bit; every
// elementwise op and fused chains computed by generated kernels against the CPU (float to a few
// ulps, double to 1e-12 relative); broadcasting and parameters; the device check of expressions;
// and that a steady state of GPU evaluations allocates no device memory. The tag [memcheck] marks
// the quicker tests that scripts/gpu-check also runs under compute-sanitizer's memcheck.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <optional>
#include <memory>
#include <vector>

#include "gradus/backend/cuda/device.hpp"
#include "gradus/gradus.hpp"
#include "gradus/nn.hpp"
#include "gradus/optim.hpp"
#include "gradus/losses.hpp"
#include "gradus/metrics.hpp"
#include "gradus/train.hpp"

#include "../support/classification_net.hpp"
#include "../support/gpu.hpp"

namespace gd = gradus;

namespace {

using gradus_test::gpu_available;
using gradus_test::uniform;

/// max |gpu - cpu| / max(1, |cpu|) over the elements.
template <class T>
double max_rel_error(const gd::Tensor<T>& gpu, const gd::Tensor<T>& cpu) {
  REQUIRE(gpu.device().is_cuda());
  const gd::Tensor<T> g = gpu.to(gd::cpu);
  REQUIRE(g.shape() == cpu.shape());
  double e = 0;
  for (int64_t i = 0; i < g.size(); ++i) {
    const double c = double(cpu.data()[i]), d = double(g.data()[i]);
    if (std::isnan(c) && std::isnan(d)) continue;
    e = std::max(e, std::abs(d - c) / std::max(1.0, std::abs(c)));
  }
  return e;
}

template <class Tuple, class F>
void for_each_type(F&& f) {
  [&]<size_t... I>(std::index_sequence<I...>) { (f(std::tuple_element_t<I, Tuple>{}), ...); }(
      std::make_index_sequence<std::tuple_size_v<Tuple>>{});
}

}  // namespace

TEST_CASE("the GPU is found and named", "[gpu]") {
  if (!gpu_available()) return;
  const gd::cuda dev(0);
  CHECK_FALSE(dev.name().empty());
  CHECK(dev.compute_capability() >= 50);
  CHECK(gd::Device(dev) == gd::Device{gd::DeviceType::cuda, 0});
  CHECK_THROWS_AS(gd::cuda(gd::cuda::device_count()), gd::device_error);
}

TEST_CASE("tensors go to the GPU and back bit for bit", "[gpu][memcheck]") {
  if (!gpu_available()) return;
  const gd::Device g = gd::cuda(0);
  for (int64_t n : {int64_t(0), int64_t(1), int64_t(1000003)}) {
    const auto a = uniform<float>({n}, -3, 3, 1);
    const auto d = a.to(g);
    CHECK(d.device() == g);
    const auto back = d.clone().to(gd::cpu);
    CHECK(std::vector<float>(back.begin(), back.end()) == std::vector<float>(a.begin(), a.end()));
  }
  const auto x = uniform<double>({7, 5}, -1, 1, 2);
  gd::Tensor<double> y = gd::Tensor<double>::zeros({7, 5}).to(g);
  y.copy_(x);
  CHECK(max_rel_error(y, x) == 0.0);
}

TEST_CASE("generated kernels compute every elementwise op as the CPU does", "[gpu]") {
  if (!gpu_available()) return;
  const gd::Device g = gd::cuda(0);
  const auto check = [&]<class T>(T, double tol) {
    for_each_type<gd::ops::all_unary_ops>([&](auto tag) {
      using Op = decltype(tag);
      INFO("unary op " << Op::name << " in " << (sizeof(T) == 4 ? "float" : "double"));
      const auto a = uniform<T>({257, 33}, Op::domain.lo, Op::domain.hi, 3);
      const gd::Tensor<T> cpu = gd::make_unary(Op{}, a);
      const gd::Tensor<T> gpu = gd::make_unary(Op{}, a.to(g));
      CHECK(max_rel_error(gpu, cpu) <= tol);
    });
    for_each_type<gd::ops::all_binary_ops>([&](auto tag) {
      using Op = decltype(tag);
      INFO("binary op " << Op::name << " in " << (sizeof(T) == 4 ? "float" : "double"));
      const auto a = uniform<T>({257, 33}, Op::domain.lo, Op::domain.hi, 4);
      const auto b = uniform<T>({33}, Op::domain.lo, Op::domain.hi, 5);  // broadcast along rows
      const gd::Tensor<T> cpu = gd::make_binary(Op{}, a, b);
      const gd::Tensor<T> gpu = gd::make_binary(Op{}, a.to(g), b.to(g));
      CHECK(max_rel_error(gpu, cpu) <= tol);
    });
  };
  // float: the GPU's libm and fused multiply-adds differ from the CPU's by a few ulps
  check(float{}, 2e-6);
  check(double{}, 1e-12);
}

TEST_CASE("fused chains with numbers, parameters, masks and broadcasting run as one kernel", "[gpu][memcheck]") {
  if (!gpu_available()) return;
  const gd::Device g = gd::cuda(0);
  const auto a = uniform<double>({64, 100}, -2, 2, 6), b = uniform<double>({64, 100}, -2, 2, 7);
  const auto c = uniform<double>({100}, -1, 1, 8), d = uniform<double>({64, 1}, 0.5, 2, 9);
  const auto ga = a.to(g), gb = b.to(g), gc = c.to(g), gdd = d.to(g);
  CHECK(max_rel_error(gd::Tensor<double>(gd::exp(ga * gb + gc) * gdd), gd::Tensor<double>(gd::exp(a * b + c) * d)) <= 1e-12);
  CHECK(max_rel_error(gd::Tensor<double>(gd::clamp(gd::leaky_relu(ga, 0.1), -0.5, 0.75) * (gb > 0.0)),
                      gd::Tensor<double>(gd::clamp(gd::leaky_relu(a, 0.1), -0.5, 0.75) * (b > 0.0))) <= 1e-12);
  CHECK(max_rel_error(gd::Tensor<double>(gd::where(ga > gb, gd::tanh(ga), gd::sigmoid(gb)) + 3.0),
                      gd::Tensor<double>(gd::where(a > b, gd::tanh(a), gd::sigmoid(b)) + 3.0)) <= 1e-12);
  // in place, into existing device storage
  gd::Tensor<double> out = gd::Tensor<double>::zeros({64, 100}).to(g);
  out.assign(ga - gc);
  CHECK(max_rel_error(out, gd::Tensor<double>(a - c)) <= 1e-12);
  CHECK_THROWS_AS(gd::eval(ga + b), gd::device_error);
}

TEST_CASE("a steady state of GPU evaluations allocates no device memory", "[gpu]") {
  if (!gpu_available()) return;
  const gd::cuda dev(0);
  const auto a = uniform<float>({512, 512}, -1, 1, 10).to(dev);
  for (int i = 0; i < 3; ++i) gd::Tensor<float> t = gd::exp(a * 2.f) + a;  // warm up the cache
  const auto before = dev.memory_stats().device_allocations;
  for (int i = 0; i < 20; ++i) gd::Tensor<float> t = gd::exp(a * 2.f) + a;
  dev.synchronize();
  CHECK(dev.memory_stats().device_allocations == before);
}

namespace {

/// The value and gradients of sum(f(vars...)) on `device`, brought back to the host.
template <class F>
std::vector<gd::Tensor<double>> value_and_grads(F&& f, const std::vector<gd::Tensor<double>>& xs, gd::Device device) {
  std::vector<gd::Var<double>> vs;
  for (const auto& x : xs) vs.emplace_back(x.to(device), true);
  gd::Var<double> loss = f(vs);
  gd::backward(loss);
  std::vector<gd::Tensor<double>> out{loss.value().to(gd::cpu)};
  for (const auto& v : vs) out.push_back(v.grad().to(gd::cpu));
  return out;
}

}  // namespace

TEST_CASE("the fused loss value and gradients on the GPU agree with the CPU", "[gpu][memcheck]") {
  if (!gpu_available()) return;
  const gd::Device g = gd::cuda(0);
  const std::vector<gd::Tensor<double>> xs{uniform<double>({300, 200}, -1, 1, 11), uniform<double>({300, 200}, -1, 1, 12),
                                           uniform<double>({200}, -1, 1, 13),  // broadcast: scatter-added
                                           uniform<double>({300, 1}, -1, 1, 14)};
  const auto loss = [](const std::vector<gd::Var<double>>& v) { return gd::sum(gd::exp(v[0] * v[1] + v[2]) * v[3]); };
  const auto cpu = value_and_grads(loss, xs, gd::cpu);
  const auto gpu = value_and_grads(loss, xs, g);
  REQUIRE(cpu.size() == gpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    const std::string what = i == 0 ? "the value" : "gradient " + std::to_string(i - 1);
    INFO(what);
    // the broadcast gradients and the value are sums in another order: 1e-12 relative to their size
    double e = 0;
    for (int64_t j = 0; j < cpu[i].size(); ++j)
      e = std::max(e, std::abs(gpu[i].data()[j] - cpu[i].data()[j]) / std::max(1.0, std::abs(cpu[i].data()[j])));
    CHECK(e <= 1e-11);
  }
}

TEST_CASE("gradients on the GPU: a Var used twice, a mean, a comparison mask, accumulation over two passes", "[gpu][memcheck]") {
  if (!gpu_available()) return;
  const gd::Device g = gd::cuda(0);
  const auto x = uniform<double>({1000}, -2, 2, 15);
  const auto run = [&](gd::Device d) {
    gd::Var<double> v(x.to(d), true);
    gd::backward(gd::mean(v * v + gd::relu(v) * (v > 0.5)));
    gd::backward(gd::sum(gd::square(v)));  // accumulates into the same gradient
    return v.grad().to(gd::cpu);
  };
  const auto cpu = run(gd::cpu), gpu = run(g);
  for (int64_t j = 0; j < x.size(); ++j) CHECK(gpu.data()[j] == Approx(cpu.data()[j]).epsilon(1e-13));
}

TEST_CASE("gradient check in double on the GPU: finite differences of the GPU's own loss", "[gpu]") {
  if (!gpu_available()) return;
  const gd::Device g = gd::cuda(0);
  const auto x0 = uniform<double>({5, 4}, -1, 1, 16), w = uniform<double>({4}, -1, 1, 17);
  const auto f = [&](const gd::Tensor<double>& x) {
    return gd::sum(gd::tanh(x.to(g) * w.to(g)) + gd::softplus(x.to(g))).to(gd::cpu).item();  // tensors: no tape
  };
  gd::Var<double> v(x0.to(g), true);
  gd::backward(gd::sum(gd::tanh(v * w.to(g)) + gd::softplus(v)));
  const auto grad = v.grad().to(gd::cpu);
  for (int64_t j = 0; j < x0.size(); ++j) {
    gd::Tensor<double> xp = x0.clone(), xm = x0.clone();
    xp.data()[j] += 1e-6;
    xm.data()[j] -= 1e-6;
    CHECK(grad.data()[j] == Approx((f(xp) - f(xm)) / 2e-6).epsilon(1e-7));
  }
}

TEST_CASE("matmul on the GPU (cuBLAS): products and gradients agree with the CPU", "[gpu][memcheck]") {
  if (!gpu_available()) return;
  const gd::Device g = gd::cuda(0);
  REQUIRE_FALSE(gd::cuda::tf32_allowed());  // full float precision by default
  struct Case {
    gd::Shape a, b;
  };
  for (const Case& c : {Case{{128, 784}, {784, 500}}, Case{{3, 5}, {5, 1}}, Case{{7}, {7, 4}}, Case{{4, 6, 3}, {3, 2}},
                        Case{{2, 1, 5, 4}, {3, 4, 6}}, Case{{1, 1}, {1, 1}}}) {
    INFO("matmul " << c.a << " x " << c.b);
    const auto run = [&](gd::Device d) {
      gd::Var<double> a(uniform<double>(c.a, -1, 1, 20).to(d), true), b(uniform<double>(c.b, -1, 1, 21).to(d), true);
      gd::Var<double> y = gd::matmul(a, b);
      gd::backward(gd::sum(y * y));
      return std::vector<gd::Tensor<double>>{y.value().to(gd::cpu), a.grad().to(gd::cpu), b.grad().to(gd::cpu)};
    };
    const auto cpu = run(gd::cpu), gpu = run(g);
    for (size_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < cpu[i].size(); ++j)
        CHECK(gpu[i].data()[j] == Approx(cpu[i].data()[j]).epsilon(1e-12).margin(1e-12));
  }
  // float: cuBLAS's summation order differs from the CPU kernel's; k = 784 terms
  const auto a = uniform<float>({64, 784}, -1, 1, 22), b = uniform<float>({784, 100}, -1, 1, 23);
  CHECK(max_rel_error(gd::matmul(a.to(g), b.to(g)), gd::matmul(a, b)) <= 2e-5);
  CHECK_THROWS_AS(gd::matmul(a.to(g), b), gd::device_error);
}

TEST_CASE("training on the GPU: 50 SGD-momentum and Adam steps of a tanh regression match the CPU", "[gpu]") {
  if (!gpu_available()) return;
  const gd::Device g = gd::cuda(0);
  const auto x = uniform<double>({256, 20}, -1, 1, 30), t = uniform<double>({256, 5}, -1, 1, 31);
  const auto w0 = uniform<double>({20, 5}, -0.3, 0.3, 32), b0 = uniform<double>({5}, -0.1, 0.1, 33);
  for (int which = 0; which < 2; ++which) {
    INFO(std::string(which == 0 ? "SGD with momentum" : "Adam"));
    const auto train = [&](gd::Device d) {
      // the optimizer is made on the CPU parameters and the parameters moved afterwards: its
      // state follows them
      gd::Var<double> w(w0.clone(), true), b(b0.clone(), true);
      std::unique_ptr<gd::optim::Optimizer<double>> opt;
      if (which == 0)
        opt = std::make_unique<gd::optim::SGD<double>>(std::vector{w, b}, gd::optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
      else
        opt = std::make_unique<gd::optim::Adam<double>>(std::vector{w, b}, gd::optim::AdamOptions{.lr = 0.01});
      w.value() = w.value().to(d);
      b.value() = b.value().to(d);
      const auto xd = x.to(d), td = t.to(d);
      std::vector<double> losses;
      for (int step = 0; step < 50; ++step) {
        gd::Var<double> y = gd::tanh(gd::matmul(xd, w) + b);
        gd::Var<double> loss = gd::mean(gd::square(y - td));
        opt->minimize(loss);
        losses.push_back(loss.value().to(gd::cpu).item());
      }
      return losses;
    };
    const auto cpu = train(gd::cpu), gpu = train(g);
    CHECK(cpu.back() < 0.8 * cpu.front());  // it learns
    for (size_t i = 0; i < cpu.size(); ++i) CHECK(gpu[i] == Approx(cpu[i]).epsilon(1e-10));
  }
}

TEST_CASE("dropout on the GPU draws the CPU's mask for the same seed, and its gradient uses it", "[gpu][memcheck]") {
  if (!gpu_available()) return;
  const gd::Device g = gd::cuda(0);
  const auto x = uniform<float>({333, 77}, -1, 1, 40);
  const auto run = [&](gd::Device d) {
    gd::Rng rng(7);
    gd::Var<float> v(x.to(d), true);
    gd::Var<float> y = gd::dropout(v, 0.4, rng);
    gd::backward(gd::sum(y * 3.f));
    return std::pair{y.value().to(gd::cpu), v.grad().to(gd::cpu)};
  };
  const auto [ycpu, gcpu] = run(gd::cpu);
  const auto [ygpu, ggpu] = run(g);
  CHECK(std::vector<float>(ygpu.begin(), ygpu.end()) == std::vector<float>(ycpu.begin(), ycpu.end()));
  CHECK(std::vector<float>(ggpu.begin(), ggpu.end()) == std::vector<float>(gcpu.begin(), gcpu.end()));
}

TEST_CASE("softmax, log_softmax, one_hot and sums along an axis on the GPU agree with the CPU", "[gpu][memcheck]") {
  if (!gpu_available()) return;
  const gd::Device g = gd::cuda(0);
  const auto x = uniform<double>({6, 10, 4}, -3, 3, 50);
  const auto w = uniform<double>({6, 10, 4}, -1, 1, 51);
  for (int axis : {0, 1, 2}) {
    for (bool log : {false, true}) {
      INFO("axis " << axis << (log ? " log_softmax" : " softmax"));
      const auto run = [&](gd::Device d) {
        gd::Var<double> v(x.to(d), true);
        gd::Var<double> y = log ? gd::log_softmax(v, axis) : gd::softmax(v, axis);
        gd::backward(gd::sum(y * w.to(d)));
        return std::pair{y.value().to(gd::cpu), v.grad().to(gd::cpu)};
      };
      const auto [ycpu, gcpu] = run(gd::cpu);
      const auto [ygpu, ggpu] = run(g);
      for (int64_t j = 0; j < x.size(); ++j) {
        CHECK(ygpu.data()[j] == Approx(ycpu.data()[j]).epsilon(1e-12).margin(1e-14));
        CHECK(ggpu.data()[j] == Approx(gcpu.data()[j]).epsilon(1e-12).margin(1e-14));
      }
    }
    INFO("sum and mean along axis " << axis);
    const auto run = [&](gd::Device d) {
      gd::Var<double> v(x.to(d), true);
      gd::Var<double> s = gd::sum(gd::exp(v) * 0.5, axis), m = gd::mean(v * v, axis, /*keepdims=*/true);
      gd::backward(gd::sum(s * s) + gd::sum(m));
      return std::vector<gd::Tensor<double>>{s.value().to(gd::cpu), m.value().to(gd::cpu), v.grad().to(gd::cpu)};
    };
    const auto cpu = run(gd::cpu), gpu = run(g);
    for (size_t i = 0; i < cpu.size(); ++i)
      for (int64_t j = 0; j < cpu[i].size(); ++j)  // sums in another order: an absolute margin for cancellation
        CHECK(gpu[i].data()[j] == Approx(cpu[i].data()[j]).epsilon(1e-12).margin(1e-13));
  }
  const gd::Tensor<int64_t> labels = gd::Tensor<int64_t>::from({3, 0, -1, 9, 12});  // out of range: a row of off
  const auto oh = gd::one_hot<float>(labels.to(g), 10, 2.f, -1.f);
  CHECK(oh.device() == gd::Device(g));
  const auto host = oh.to(gd::cpu), ref = gd::one_hot<float>(labels, 10, 2.f, -1.f);
  CHECK(std::vector<float>(host.begin(), host.end()) == std::vector<float>(ref.begin(), ref.end()));
}

TEST_CASE("max, min, argmax, prod and logsumexp over long lines on the GPU: the CPU's values, NaNs, ties and gradients",
          "[gpu][memcheck]") {
  if (!gpu_available()) return;
  const gd::Device g = gd::cuda(0);
  // lines of 1 to 70000 elements: one thread's share and many per thread, one line per block and
  // several lines per block; the 5000-element axis 0 reduces strided lines
  for (const gd::Shape& s : {gd::Shape{3, 70000}, gd::Shape{5000, 7}, gd::Shape{400, 300}, gd::Shape{9, 1}}) {
    auto x = uniform<double>(s, 0.5, 1.5, 61);
    const int64_t cols = s[1];
    x.data()[3 % x.size()] = x.data()[0];     // a tie with the first element
    x.data()[cols - 1] = 2.0;                  // the maximum of line 0 of axis 1 is its last element
    if (s[0] > 2) x.data()[2 * cols + 1 % cols] = std::nan("");  // a NaN after the first element of row 2
    if (s[0] > 1) x.data()[cols] = std::nan("");                 // and one that starts row 1
    const auto w = uniform<double>(s, -1, 1, 62);
    for (int axis : {-1, 0, 1}) {
      INFO("shape " << s << ", axis " << axis);
      const auto run = [&](gd::Device d) {
        std::vector<gd::Tensor<double>> out;
        const gd::Tensor<double> xd = x.to(d);
        for (int op = 0; op < 4; ++op) {
          gd::Var<double> v(xd, true);
          gd::Var<double> y = op == 0 ? (axis < 0 ? gd::max(v) : gd::max(v, axis))
                              : op == 1 ? (axis < 0 ? gd::min(v) : gd::min(v, axis))
                              : op == 2 ? (axis < 0 ? gd::prod(v) : gd::prod(v, axis))
                                        : (axis < 0 ? gd::logsumexp(v) : gd::logsumexp(v, axis));
          gd::backward(gd::sum(y * 0.75));
          out.push_back(y.value().to(gd::cpu));
          out.push_back(v.grad().to(gd::cpu));
        }
        const gd::Tensor<int64_t> am = axis < 0 ? gd::argmax(xd) : gd::argmax(xd, axis);
        const gd::Tensor<int64_t> an = axis < 0 ? gd::argmin(xd) : gd::argmin(xd, axis);
        out.push_back(gd::cast<double>(am).to(gd::cpu));
        out.push_back(gd::cast<double>(an).to(gd::cpu));
        return out;
      };
      const auto cpu = run(gd::cpu), gpu = run(g);
      for (size_t i = 0; i < cpu.size(); ++i) {
        INFO("result " << i << " (value and gradient of max, min, prod, logsumexp; argmax; argmin)");
        REQUIRE(gpu[i].shape() == cpu[i].shape());
        int bad = 0;
        for (int64_t j = 0; j < cpu[i].size() && bad < 3; ++j) {
          const double c = cpu[i].data()[j], d = gpu[i].data()[j];
          // the products and sums meet in another order: a relative tolerance
          const bool ok = std::isnan(c) ? std::isnan(d) : c == d || std::abs(d - c) <= 1e-11 * std::max(1.0, std::abs(c));
          if (!ok) {
            ++bad;
            FAIL_CHECK("element " << j << ": GPU " << d << ", CPU " << c);
          }
        }
      }
    }
  }
}

TEST_CASE("data movement on the GPU: slices, pads, transposes, concat, gather and its scatter-add, casts", "[gpu][memcheck]") {
  if (!gpu_available()) return;
  const gd::Device g = gd::cuda(0);
  const auto x = uniform<double>({4, 300, 70}, -2, 2, 71), y = uniform<double>({4, 300, 30}, -2, 2, 72);
  // 5000 indices into 300 rows: every row is hit many times, so the scatter-add's atomics meet
  gd::Tensor<int64_t> idx = gd::Tensor<int64_t>::empty({50, 100});
  for (int64_t i = 0; i < idx.size(); ++i) idx.data()[i] = (i * 7919) % 300;
  const auto run = [&](gd::Device d) {
    gd::Var<double> a(x.to(d), true), b(y.to(d), true);
    std::vector<gd::Var<double>> outs{
        gd::slice(a, {1, 20, 3}, {2, 250, 60}),
        gd::pad(b, {{1, 0}, {0, 3}, {2, 2}}, 0.25),
        gd::transpose(a, {2, 0, 1}),
        gd::concat({a, b}, 2),
        gd::stack({b, gd::Var<double>(b * 2.0)}, 1),
        gd::gather(a, idx.to(d), 1),
        gd::cast<double>(gd::cast<float>(b) * 3.f)};
    gd::Var<double> loss = gd::sum(a) * 0.0;
    for (size_t i = 0; i < outs.size(); ++i) loss = loss + gd::sum(gd::sin(outs[i]) * double(i + 1));
    gd::backward(loss);
    std::vector<gd::Tensor<double>> r;
    for (const auto& o : outs) r.push_back(o.value().to(gd::cpu));
    r.push_back(a.grad().to(gd::cpu));
    r.push_back(b.grad().to(gd::cpu));
    const gd::Tensor<int64_t> ids = gd::cast<int64_t>(gd::transpose(gd::cast<double>(idx.to(d)) * 2.0, {1, 0}));
    r.push_back(gd::cast<double>(ids).to(gd::cpu));
    return r;
  };
  const auto cpu = run(gd::cpu), gpu = run(g);
  for (size_t i = 0; i < cpu.size(); ++i) {
    INFO("result " << i);
    // the scatter-add's repeated rows meet in any order: a relative tolerance
    CHECK(max_rel_error(gpu[i].to(g), cpu[i]) <= 1e-12);
  }
}

TEST_CASE("a sparse loss checks GPU labels on the GPU and reports a bad one at the next synchronisation", "[gpu]") {
  if (!gpu_available()) return;
  const gd::Device g = gd::cuda(0);
  const auto logits = uniform<float>({5, 10}, -1, 1, 81).to(g);
  const gd::Tensor<int64_t> good = gd::Tensor<int64_t>::from({3, 0, 9, 1, 2}).to(g);
  CHECK(std::isfinite(gd::losses::sparse_softmax_cross_entropy_with_logits(good, logits).item()));
  const gd::Tensor<int64_t> bad = gd::Tensor<int64_t>::from({3, 0, 12, 1, -1}).to(g);
  // no read-back: the call returns, and the error comes with the next copy to the host
  const auto loss = gd::losses::sparse_softmax_cross_entropy_with_logits(bad, logits);
  CHECK_THROWS_WITH(loss.to(gd::cpu), Catch::Contains("sparse_softmax_cross_entropy_with_logits: label 12 at "
                                                      "position 2 out of range [0, 10) for logits of shape [5,10]"));
  // reported once: the GPU goes on
  CHECK(std::isfinite(gd::losses::sparse_softmax_cross_entropy_with_logits(good, logits).item()));
  (void)gd::losses::sparse_softmax_cross_entropy_with_logits(bad, logits);
  CHECK_THROWS_AS(gd::cuda(0).synchronize(), gd::value_error);
  CHECK_NOTHROW(gd::cuda(0).synchronize());
  // labels on the host are checked there, at once, as on the CPU
  CHECK_THROWS_WITH(gd::losses::sparse_softmax_cross_entropy_with_logits(bad.to(gd::cpu), logits),
                    Catch::Contains("label 12 at position 2 out of range [0, 10)"));
}

TEST_CASE("where with an int64 mask on the GPU: values and gradients as on the CPU", "[gpu]") {
  if (!gpu_available()) return;
  const gd::Device g = gd::cuda(0);
  const gd::Tensor<int64_t> mask = gd::Tensor<int64_t>::from({3, 0, -1, 0, 1, 0}).reshape({2, 3});
  const auto av = uniform<float>({2, 3}, -2, 2, 84), bv = uniform<float>({2, 3}, -2, 2, 85);
  gd::Var<float> a(av.to(g)), b(bv.to(g));
  gd::Var<float> y = gd::where(mask.to(g), a * a, b + 1.f);
  gd::backward(gd::sum(y));
  const gd::Tensor<float> got = y.value().to(gd::cpu), da = a.grad().to(gd::cpu), db = b.grad().to(gd::cpu);
  for (int64_t i = 0; i < 6; ++i) {
    const bool on = mask.data()[i] != 0;
    CHECK(got.data()[i] == (on ? av.data()[i] * av.data()[i] : bv.data()[i] + 1.f));
    CHECK(da.data()[i] == (on ? 2.f * av.data()[i] : 0.f));
    CHECK(db.data()[i] == (on ? 0.f : 1.f));
  }
  // an int64 elementwise op itself has no GPU kernel: a clear error, not a crash
  CHECK_THROWS_AS(gd::eval(mask.to(g) + mask.to(g)), gd::device_error);
}

TEST_CASE("gather checks GPU indices on the GPU: a bad one reads nothing and is reported at the next sync", "[gpu]") {
  if (!gpu_available()) return;
  const gd::Device g = gd::cuda(0);
  gd::Var<float> x(uniform<float>({5, 3}, -1, 1, 83).to(g));
  const gd::Tensor<int64_t> good = gd::Tensor<int64_t>::from({4, 0, 4}).to(g);
  const gd::Tensor<float> rows = gd::gather(x, good).value().to(gd::cpu);
  CHECK(rows(0, 1) == x.value().to(gd::cpu)(4, 1));
  const gd::Tensor<int64_t> bad = gd::Tensor<int64_t>::from({1, 7, 2}).to(g);
  // no read-back: the gather and its gradient run (the bad row reads and scatters nothing)
  const auto y = gd::gather(x, bad);
  gd::backward(gd::sum(y));
  CHECK_THROWS_WITH(x.grad().to(gd::cpu),
                    Catch::Contains("gather: index 7 at position 1 out of range [0, 5) for axis 0 of shape [5,3]"));
  // reported once; the gradient of the good rows is there
  const gd::Tensor<float> dx = x.grad().to(gd::cpu);
  CHECK(dx(1, 0) == 1.f);
  CHECK(dx(2, 2) == 1.f);
  CHECK(dx(0, 0) == 0.f);
  // indices on the host are checked at once, as on the CPU
  CHECK_THROWS_WITH(gd::gather(x, bad.to(gd::cpu)), Catch::Contains("gather: index 7 at position 1"));
}

TEST_CASE("Embedding takes ids in GPU memory: the CPU's rows and gradients, a bad id reported at the next sync",
          "[gpu]") {
  if (!gpu_available()) return;
  const gd::Device g = gd::cuda(0);
  const gd::Tensor<int64_t> ids = gd::Tensor<int64_t>::from({3, 0, 3, 5, 1, 3}).reshape({2, 3});
  const auto run = [&](gd::Device d, const gd::Tensor<int64_t>& at) {
    gd::Rng rng(84);
    gd::nn::Embedding<double> emb({.vocab = 6, .dim = 4}, rng);
    emb.to(d);
    gd::Var<double> e = emb.forward(at);
    gd::backward(gd::sum(e * e));
    return std::pair{e.value().to(gd::cpu), emb.embeddings().grad().to(gd::cpu)};
  };
  const auto [cpu_rows, cpu_grad] = run(gd::cpu, ids);
  const auto [gpu_rows, gpu_grad] = run(g, ids.to(g));  // the ids stay on the GPU: no read-back
  REQUIRE(gpu_rows.shape() == gd::Shape{2, 3, 4});
  for (int64_t i = 0; i < cpu_rows.size(); ++i) CHECK(gpu_rows.data()[i] == cpu_rows.data()[i]);
  for (int64_t i = 0; i < cpu_grad.size(); ++i) CHECK(gpu_grad.data()[i] == cpu_grad.data()[i]);
  gd::Rng rng(85);
  gd::nn::Embedding<float> emb({.vocab = 6, .dim = 4}, rng);
  emb.to(g);
  const auto rows = emb.forward(gd::Tensor<int64_t>::from({2, 6}).to(g));
  CHECK_THROWS_WITH(rows.value().to(gd::cpu), Catch::Contains("index 6 at position 1 out of range [0, 6)"));
  CHECK_THROWS_WITH(emb.forward(gd::Tensor<int64_t>::from({2, 6})), Catch::Contains("Embedding: id 6 at position 1"));
}

TEST_CASE("300 steps of a Dense MLP with sparse softmax cross-entropy on the GPU match the CPU's losses", "[gpu]") {
  if (!gpu_available()) return;
  const gd::Device g = gd::cuda(0);
  gd::Rng data_rng(60);
  const auto x = gd::Tensor<float>::random_normal({128, 64}, data_rng);
  gd::Tensor<int64_t> labels({128});
  for (int64_t i = 0; i < 128; ++i) labels(i) = int64_t(data_rng.below(10));
  for (const gd::nn::Activation act : {gd::nn::Activation(gd::nn::relu), gd::nn::Activation(gd::nn::tanh)}) {
    INFO("activation " << act);
    const auto train = [&](gd::Device d) {
      gd::Rng rng(61);
      gd::nn::Sequential net(gd::nn::Dense<float>({.in = 64, .out = 100, .activation = act}, rng),
                             gd::nn::Dense<float>({.in = 100, .out = 10}, rng));
      net.to(d);
      gd::optim::SGD<float> opt(net.parameters(), {.lr = 0.05, .momentum = 0.9});
      const auto xd = x.to(d);
      const auto ld = labels.to(d);
      std::vector<double> losses;
      for (int step = 0; step < 300; ++step) {
        gd::Var<float> loss = gd::losses::sparse_softmax_cross_entropy_with_logits(ld, net.forward(xd));
        opt.minimize(loss);
        losses.push_back(loss.value().to(gd::cpu).item());
      }
      return losses;
    };
    const auto cpu = train(gd::cpu), gpu = train(g);
    CHECK(cpu.back() < 0.5 * cpu.front());  // it learns
    for (size_t i = 0; i < cpu.size(); i += 10) CHECK(gpu[i] == Approx(cpu[i]).epsilon(1e-3));
  }
}

TEST_CASE("fit(.device) on the GPU: the CPU's history, validation metrics, and checkpoints that load on the CPU",
          "[gpu]") {
  if (!gpu_available()) return;
  const gd::Device g = gd::cuda(0);
  const gd::train::Data<float, int64_t> train = gradus_test::sum_sign_data(512, 20, 70);
  const gd::Tensor<float>& x = train.x;
  const auto loss = [](const gd::Tensor<int64_t>& l, const gd::Var<float>& p) {
    return gd::losses::sparse_softmax_cross_entropy_with_logits(l, p);
  };
  const auto dir = std::filesystem::temp_directory_path() / "gradus_gpu_fit";
  std::filesystem::remove_all(dir);
  const auto run = [&](std::optional<gd::Device> d, const std::filesystem::path& run_dir) {
    gd::Rng rng(71);
    gd::nn::Sequential net(gd::nn::Dense<float>({.in = 20, .out = 32, .activation = gd::nn::relu}, rng),
                           gd::nn::Dense<float>({.in = 32, .out = 2}, rng));
    gd::optim::Adam<float> opt(net.parameters(), {.lr = 0.01});
    gd::metrics::SparseCategoricalAccuracy acc;
    const auto h = gd::train::fit(net, opt, loss, train,
                                  {.epochs = 3, .batch_size = 64, .seed = 5, .validation = &train, .metrics = {&acc},
                                   .run_dir = run_dir, .device = d});
    return std::pair{h, gd::train::predict(net, x)};
  };
  const auto [hcpu, pcpu] = run(std::nullopt, dir / "cpu");
  const auto [hgpu, pgpu] = run(g, dir / "gpu");
  REQUIRE(hgpu.epochs.size() == 3);
  for (size_t e = 0; e < 3; ++e) {
    CHECK(hgpu.epochs[e].loss == Approx(hcpu.epochs[e].loss).epsilon(1e-3));
    CHECK(hgpu.epochs[e].get("val_sparse_categorical_accuracy") == Approx(hcpu.epochs[e].get("val_sparse_categorical_accuracy")).margin(0.01));
  }
  CHECK(hcpu.epochs.back().get("val_sparse_categorical_accuracy") > 0.85);  // it learned (chance: 0.5)
  CHECK(pgpu.device() == gd::cpu);
  CHECK(max_rel_error(pgpu.to(g), pcpu) <= 1e-3);
  // the GPU run's checkpoint restores a CPU model: resuming it on the CPU finds nothing left to do,
  // and returns the restored History
  gd::Rng rng(72);
  gd::nn::Sequential net(gd::nn::Dense<float>({.in = 20, .out = 32, .activation = gd::nn::relu}, rng),
                         gd::nn::Dense<float>({.in = 32, .out = 2}, rng));
  gd::optim::Adam<float> opt(net.parameters(), {.lr = 0.01});
  const auto resumed = gd::train::fit(net, opt, loss, train, {.epochs = 3, .batch_size = 64, .run_dir = dir / "gpu"});
  REQUIRE(resumed.epochs.size() == 3);
  for (size_t e = 0; e < 3; ++e) CHECK(resumed.epochs[e].loss == hgpu.epochs[e].loss);
  CHECK(max_rel_error(gd::train::predict(net, x).to(g), pgpu) <= 1e-6);
  std::filesystem::remove_all(dir);
}

TEST_CASE("conv2d and pooling on the GPU agree with the CPU, values and gradients", "[gpu][memcheck]") {
  if (!gpu_available()) return;
  const gd::Device g = gd::cuda(0);
  struct Case {
    gd::Shape x, w;
    gd::Conv2dArgs conv;
    gd::Pool2dOptions pool;
  };
  const Case cases[] = {
      {{2, 12, 12, 1}, {5, 5, 1, 4}, {.padding = gd::Padding::valid}, {.ksize = {2, 2}, .strides = {2, 2}}},
      {{3, 9, 7, 3}, {3, 3, 3, 5}, {.strides = {2, 1}, .padding = gd::Padding::same},
       {.ksize = {3, 3}, .strides = {2, 2}, .padding = gd::Padding::same}},
      {{1, 10, 10, 2}, {3, 3, 2, 2}, {.padding = gd::Padding::valid, .dilations = {2, 2}}, {.ksize = {2, 3}, .strides = {1, 2}}},
  };
  for (const Case& c : cases) {
    INFO("conv2d " << c.x << " * " << c.w);
    const auto x = uniform<double>(c.x, -1, 1, 80), w = uniform<double>(c.w, -1, 1, 81);
    const auto b = uniform<double>({c.w[3]}, -1, 1, 82);
    const auto run = [&](gd::Device d, bool max) {
      gd::Var<double> vx(x.to(d), true), vw(w.to(d), true), vb(b.to(d), true);
      gd::Var<double> y = gd::conv2d(vx, vw, vb, c.conv);
      gd::Var<double> z = max ? gd::max_pool2d(y, c.pool) : gd::avg_pool2d(y, c.pool);
      gd::backward(gd::sum(z * z));
      return std::vector<gd::Tensor<double>>{z.value().to(gd::cpu), vx.grad().to(gd::cpu), vw.grad().to(gd::cpu),
                                             vb.grad().to(gd::cpu)};
    };
    for (bool max : {true, false}) {
      INFO(std::string(max ? "max_pool2d" : "avg_pool2d"));
      const auto cpu = run(gd::cpu, max), gpu = run(g, max);
      for (size_t i = 0; i < cpu.size(); ++i)
        for (int64_t j = 0; j < cpu[i].size(); ++j)
          CHECK(gpu[i].data()[j] == Approx(cpu[i].data()[j]).epsilon(1e-11).margin(1e-12));
    }
  }
}

TEST_CASE("300 steps of a LeNet-style CNN on the GPU match the CPU's losses", "[gpu]") {
  if (!gpu_available()) return;
  const gd::Device g = gd::cuda(0);
  gd::Rng data_rng(90);
  const auto x = gd::Tensor<float>::random_normal({32, 28, 28, 1}, data_rng);
  gd::Tensor<int64_t> labels({32});
  for (int64_t i = 0; i < 32; ++i) labels(i) = int64_t(data_rng.below(10));
  const auto train = [&](gd::Device d) {
    gd::Rng rng(91);
    gd::nn::Sequential net(
        gd::nn::Conv2d<float>({.in = 1, .filters = 8, .kernel_size = {5, 5}, .activation = gd::nn::relu}, rng),
        gd::nn::MaxPool2d{},
        gd::nn::Conv2d<float>({.in = 8, .filters = 16, .kernel_size = {5, 5}, .activation = gd::nn::relu}, rng),
        gd::nn::MaxPool2d{}, gd::nn::Flatten{}, gd::nn::Dense<float>({.in = 256, .out = 10}, rng));
    net.to(d);
    gd::optim::SGD<float> opt(net.parameters(), {.lr = 0.02, .momentum = 0.9});
    const auto xd = x.to(d);
    const auto ld = labels.to(d);
    std::vector<double> losses;
    for (int step = 0; step < 300; ++step) {
      gd::Var<float> loss = gd::losses::sparse_softmax_cross_entropy_with_logits(ld, net.forward(xd));
      opt.minimize(loss);
      losses.push_back(loss.value().to(gd::cpu).item());
    }
    return losses;
  };
  const auto cpu = train(gd::cpu), gpu = train(g);
  CHECK(cpu.back() < 0.5 * cpu.front());
  for (size_t i = 0; i < cpu.size(); i += 10) CHECK(gpu[i] == Approx(cpu[i]).epsilon(1e-3));
}
