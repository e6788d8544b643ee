// benchmarks/fused_loss.cpp — a fused elementwise loss, sum(exp(a*b + c) * d), over 2^20
// elements (float and double), fixed-seed random inputs in [-1, 1):
//   gradus_forward    gd::sum on tensors (value only)
//   gradus_grad       gd::backward on Vars, then read and zero the four .grad()s
//   gradus_gradients  gd::gradients(loss, {a, b, c, d}) (no accumulation into .grad())
//   hand_grad         one hand-fused pass over 1024-element blocks (Eigen's vectorised exp):
//                     the value and ga = e*d*b, gb = e*d*a, gc = e*d, gd = e, e = exp(a*b + c)
//   hand_forward      the same loop computing the value only
// All run with the same OpenMP thread count (the hand loops split blocks as gradus does).
// benchmarks/run reports gradus_grad / hand_grad (goal <= 1.5x).
#include <benchmark/benchmark.h>
#include <omp.h>

#include <gradus/core/eigen.hpp>  // Eigen/Core, included as gradus includes it
#include <algorithm>
#include <cstdint>

#include <gradus/gradus.hpp>

namespace gd = gradus;

namespace {

constexpr int64_t kN = int64_t(1) << 20, kBlock = 1024;

template <class T>
struct Inputs {
  gd::Tensor<T> a, b, c, d;
  Inputs() {
    gd::Rng rng(11);
    a = gd::Tensor<T>::random_uniform({kN}, rng, -1, 1);
    b = gd::Tensor<T>::random_uniform({kN}, rng, -1, 1);
    c = gd::Tensor<T>::random_uniform({kN}, rng, -1, 1);
    d = gd::Tensor<T>::random_uniform({kN}, rng, -1, 1);
  }
};

template <class T>
using Arr = Eigen::Array<T, Eigen::Dynamic, 1>;
template <class T>
using Map = Eigen::Map<Arr<T>>;
template <class T>
using CMap = Eigen::Map<const Arr<T>>;

/// sum(exp(a*b + c) * d) and its four gradients in one pass over memory.
template <class T>
double hand_value_and_grad(const T* a, const T* b, const T* c, const T* d, T* ga, T* gb, T* gc, T* gd, int64_t n) {
  double total = 0;
#pragma omp parallel for schedule(static) reduction(+ : total)
  for (int64_t s = 0; s < n; s += kBlock) {
    const int64_t m = std::min(kBlock, n - s);
    const CMap<T> A(a + s, m), B(b + s, m), C(c + s, m), D(d + s, m);
    alignas(64) T e[kBlock], ed[kBlock];
    Map<T> E(e, m), ED(ed, m);
    E = (A * B + C).exp();
    ED = E * D;
    total += double(ED.sum());
    Map<T>(ga + s, m) = ED * B;
    Map<T>(gb + s, m) = ED * A;
    Map<T>(gc + s, m) = ED;
    Map<T>(gd + s, m) = E;
  }
  return total;
}

/// sum(exp(a*b + c) * d) in one pass.
template <class T>
double hand_value(const T* a, const T* b, const T* c, const T* d, int64_t n) {
  double total = 0;
#pragma omp parallel for schedule(static) reduction(+ : total)
  for (int64_t s = 0; s < n; s += kBlock) {
    const int64_t m = std::min(kBlock, n - s);
    const CMap<T> A(a + s, m), B(b + s, m), C(c + s, m), D(d + s, m);
    total += double(((A * B + C).exp() * D).sum());
  }
  return total;
}

void set_threads(benchmark::State& state) { omp_set_num_threads(int(state.range(0))); }

template <class T>
void set_bytes(benchmark::State& state, int arrays) {
  state.SetBytesProcessed(int64_t(state.iterations()) * kN * int64_t(sizeof(T)) * arrays);
}

template <class T>
void BM_gradus_forward(benchmark::State& state) {
  set_threads(state);
  const Inputs<T> in;
  for (auto _ : state) benchmark::DoNotOptimize(gd::sum(gd::exp(in.a * in.b + in.c) * in.d).item());
  set_bytes<T>(state, 4);
}

template <class T>
void BM_gradus_grad(benchmark::State& state) {
  set_threads(state);
  const Inputs<T> in;
  gd::Var<T> a(in.a), b(in.b), c(in.c), d(in.d);
  for (auto _ : state) {
    gd::Var<T> loss = gd::sum(gd::exp(a * b + c) * d);
    gd::backward(loss);
    benchmark::DoNotOptimize(loss.item());
    for (gd::Var<T>* v : {&a, &b, &c, &d}) {
      benchmark::DoNotOptimize(v->grad().data());
      benchmark::ClobberMemory();
      v->zero_grad();
    }
  }
  set_bytes<T>(state, 8);
}

template <class T>
void BM_gradus_gradients(benchmark::State& state) {
  set_threads(state);
  const Inputs<T> in;
  gd::Var<T> a(in.a), b(in.b), c(in.c), d(in.d);
  for (auto _ : state) {
    gd::Var<T> loss = gd::sum(gd::exp(a * b + c) * d);
    auto g = gd::gradients(loss, {a, b, c, d});
    benchmark::DoNotOptimize(loss.item());
    benchmark::DoNotOptimize(g.data());
    benchmark::ClobberMemory();
  }
  set_bytes<T>(state, 8);
}

template <class T>
void BM_hand_grad(benchmark::State& state) {
  set_threads(state);
  const Inputs<T> in;
  gd::Tensor<T> ga({kN}), gb({kN}), gc({kN}), gd({kN});
  for (auto _ : state) {
    benchmark::DoNotOptimize(hand_value_and_grad(in.a.data(), in.b.data(), in.c.data(), in.d.data(), ga.data(),
                                                 gb.data(), gc.data(), gd.data(), kN));
    benchmark::ClobberMemory();
  }
  set_bytes<T>(state, 8);
}

template <class T>
void BM_hand_forward(benchmark::State& state) {
  set_threads(state);
  const Inputs<T> in;
  for (auto _ : state) benchmark::DoNotOptimize(hand_value(in.a.data(), in.b.data(), in.c.data(), in.d.data(), kN));
  set_bytes<T>(state, 4);
}

// threads = OpenMP threads for gradus and for the hand loops alike; bytes/s counts the arrays
// read and written (4 inputs; + 4 gradients).
#define FUSED_BENCH(fn, T, label)                                                                            \
  BENCHMARK_TEMPLATE(fn, T)                                                                                  \
      ->Name("fused_loss/" #T "/" label)                                                                     \
      ->ArgName("threads")                                                                                   \
      ->Arg(1)                                                                                               \
      ->Arg(2)                                                                                               \
      ->UseRealTime()                                                                                        \
      ->Unit(benchmark::kMicrosecond)
FUSED_BENCH(BM_gradus_forward, float, "gradus_forward");
FUSED_BENCH(BM_gradus_grad, float, "gradus_grad");
FUSED_BENCH(BM_gradus_gradients, float, "gradus_gradients");
FUSED_BENCH(BM_hand_grad, float, "hand_grad");
FUSED_BENCH(BM_hand_forward, float, "hand_forward");
FUSED_BENCH(BM_gradus_forward, double, "gradus_forward");
FUSED_BENCH(BM_gradus_grad, double, "gradus_grad");
FUSED_BENCH(BM_gradus_gradients, double, "gradus_gradients");
FUSED_BENCH(BM_hand_grad, double, "hand_grad");
FUSED_BENCH(BM_hand_forward, double, "hand_forward");

}  // namespace

BENCHMARK_MAIN();
