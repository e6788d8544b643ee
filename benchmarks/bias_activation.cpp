// benchmarks/bias_activation.cpp — the fused bias + activation step of a Dense layer (MLP shape:
// 128 rows of 500 float units), forward and backward together, one thread:
//   gradus_step/<activation>   backend::cpu::bias_activation_forward and _backward, what Dense runs
//   eigen_step/<activation>    the same two passes written as the op's own Eigen array expressions
//                              (ops/elementwise_math.hpp's forward and backward on z = h + b), row
//                              by row inside with_isa: what the layer ran before leaky ReLU, ELU
//                              and SELU had loops of their own (ReLU's gradient had one already)
// Activations: relu, leaky_relu (alpha 0.1), elu (alpha 1), selu, tanh, sigmoid, softsign. Run with OMP_NUM_THREADS=1 for
// one-thread numbers; the ratio gradus_step / eigen_step is what to read.
#include <benchmark/benchmark.h>

#include <gradus/core/eigen.hpp>  // Eigen/Core, included as gradus includes it
#include <algorithm>
#include <cstdint>
#include <vector>

#include <gradus/gradus.hpp>

namespace gd = gradus;
namespace cpu = gradus::backend::cpu;

namespace {

constexpr int64_t kRows = 128, kN = 500;

struct Data {
  std::vector<float> h, b, y, g, dz;
  Data() : h(size_t(kRows * kN)), b(size_t(kN)), y(h.size()), g(h.size()), dz(h.size()) {
    gd::Rng rng(7);
    const gd::Tensor<float> th = gd::Tensor<float>::random_normal({kRows, kN}, rng, 0.0, 2.0);
    const gd::Tensor<float> tg = gd::Tensor<float>::random_normal({kRows, kN}, rng);
    const gd::Tensor<float> tb = gd::Tensor<float>::random_normal({kN}, rng);
    std::copy(th.data(), th.data() + th.size(), h.begin());
    std::copy(tg.data(), tg.data() + tg.size(), g.begin());
    std::copy(tb.data(), tb.data() + tb.size(), b.begin());
  }
};

template <class Op>
void gradus_step(benchmark::State& state, Op op) {
  Data d;
  for (auto _ : state) {
    cpu::bias_activation_forward(op, d.h.data(), d.b.data(), kRows, kN, d.y.data());
    cpu::bias_activation_backward(op, d.h.data(), d.b.data(), d.y.data(), d.g.data(), kRows, kN, d.dz.data());
    benchmark::DoNotOptimize(d.dz.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kRows * kN);
}

template <class Op>
void eigen_step(benchmark::State& state, Op op) {
  using Row = Eigen::Map<Eigen::ArrayXf>;
  using CRow = Eigen::Map<const Eigen::ArrayXf>;
  Data d;
  Eigen::ArrayXf z(kN);
  const CRow bias(d.b.data(), kN);
  for (auto _ : state) {
    cpu::with_isa([&] {  // compiled for each ISA and chosen from the CPU, as the layer's loops are
      for (int64_t r = 0; r < kRows; ++r) Row(d.y.data() + r * kN, kN) = op.forward(CRow(d.h.data() + r * kN, kN) + bias);
      for (int64_t r = 0; r < kRows; ++r) {
        z = CRow(d.h.data() + r * kN, kN) + bias;
        Row(d.dz.data() + r * kN, kN) = op.backward(z, CRow(d.y.data() + r * kN, kN), CRow(d.g.data() + r * kN, kN));
      }
    });
    benchmark::DoNotOptimize(d.dz.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kRows * kN);
}

}  // namespace

BENCHMARK_CAPTURE(gradus_step, relu, gd::ops::Relu{});
BENCHMARK_CAPTURE(eigen_step, relu, gd::ops::Relu{});
BENCHMARK_CAPTURE(gradus_step, leaky_relu, gd::ops::LeakyRelu(0.1));
BENCHMARK_CAPTURE(eigen_step, leaky_relu, gd::ops::LeakyRelu(0.1));
BENCHMARK_CAPTURE(gradus_step, elu, gd::ops::Elu(1.0));
BENCHMARK_CAPTURE(eigen_step, elu, gd::ops::Elu(1.0));
BENCHMARK_CAPTURE(gradus_step, selu, gd::ops::Selu{});
BENCHMARK_CAPTURE(eigen_step, selu, gd::ops::Selu{});
BENCHMARK_CAPTURE(gradus_step, tanh, gd::ops::Tanh{});
BENCHMARK_CAPTURE(eigen_step, tanh, gd::ops::Tanh{});
BENCHMARK_CAPTURE(gradus_step, sigmoid, gd::ops::Sigmoid{});
BENCHMARK_CAPTURE(eigen_step, sigmoid, gd::ops::Sigmoid{});
BENCHMARK_CAPTURE(gradus_step, softsign, gd::ops::Softsign{});
BENCHMARK_CAPTURE(eigen_step, softsign, gd::ops::Softsign{});

BENCHMARK_MAIN();
