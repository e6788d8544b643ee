// lstm_sequence (ops/recurrent.hpp), the fused whole-sequence LSTM that nn::LSTM runs: its
// gradient in double w.r.t. the projected inputs, the recurrent kernel, the bias (the form that
// adds it inside the op) and the initial state, through every output (all h, the final h, the
// final c, each alone too); a final state fed on to a second sequence (an encoder's state to a
// decoder); the form with the bias against the form given xp + bias; and its forward and
// gradients in float against the per-step path, LSTMCell::step_projected run over t (slices,
// matmuls and gate expressions: a different code path, which the Keras-equation tests of
// test_recurrent.cpp pin).
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include <gradus/gradus.hpp>
#include <gradus/nn.hpp>
#include <gradus/nn/recurrent.hpp>
#include <gradus/backend/cpu/lstm.hpp>

namespace gd = gradus;
namespace nn = gradus::nn;
using Td = gd::Tensor<double>;
using V = gd::Var<double>;

namespace {

Td normal(gd::Shape s, gd::Rng& rng, double sd = 0.6) { return Td::random_normal(s, rng, 0, sd); }

V flat(const V& v) { return gd::to_var(gd::reshape(v, {-1})); }

void check(const gd::GradientCheckResult& r) {
  INFO(r);
  CHECK(r.ok);
}

/// Inputs of one sequence: xp [n, t, 4u], r [u, 4u], h0, c0 [n, u].
std::vector<Td> sample_inputs(int64_t n, int64_t t, int64_t u, uint64_t seed) {
  gd::Rng rng(seed);
  return {normal({n, t, 4 * u}, rng, 1.0), normal({u, 4 * u}, rng), normal({n, u}, rng), normal({n, u}, rng)};
}

}  // namespace

TEST_CASE("lstm_sequence: gradients in double w.r.t. xp, recurrent_kernel, h0, c0", "[rnn][gradients]") {
  const std::vector<Td> x0 = sample_inputs(2, 4, 3, 11);
  SECTION("through every output") {
    check(gd::check_gradient(
        [](const std::vector<V>& v) {
          auto o = gd::lstm_sequence(v[0], v[1], v[2], v[3]);
          return gd::concat({flat(o.h), flat(o.h_final), flat(o.c_final)}, 0);
        },
        x0));
  }
  SECTION("through the sequence of h alone") {
    check(gd::check_gradient([](const std::vector<V>& v) { return gd::lstm_sequence(v[0], v[1], v[2], v[3]).h; }, x0));
  }
  SECTION("through the final h alone") {
    check(gd::check_gradient(
        [](const std::vector<V>& v) { return gd::lstm_sequence(v[0], v[1], v[2], v[3]).h_final; }, x0));
  }
  SECTION("through the final c alone") {
    check(gd::check_gradient(
        [](const std::vector<V>& v) { return gd::lstm_sequence(v[0], v[1], v[2], v[3]).c_final; }, x0));
  }
  SECTION("one step, one sequence") {
    check(gd::check_gradient(
        [](const std::vector<V>& v) {
          auto o = gd::lstm_sequence(v[0], v[1], v[2], v[3]);
          return gd::concat({flat(o.h), flat(o.c_final)}, 0);
        },
        sample_inputs(1, 1, 2, 12)));
  }
  SECTION("one step over several rows, h0's gradient added to one it already has") {
    // one step takes dh0 from a product with the kernel read transposed, after the rows' pass;
    // sum(h0²)'s node is newer, so it runs first and the op adds to h0's adjoint
    check(gd::check_gradient(
        [](const std::vector<V>& v) {
          auto o = gd::lstm_sequence(v[0], v[1], v[2], v[3]);
          return gd::to_var(gd::sum(o.h * 1.5) + gd::sum(o.c_final) + gd::sum(v[2] * v[2]));
        },
        sample_inputs(5, 1, 3, 15)));
  }
}

TEST_CASE("lstm_sequence: a final state carried into a second sequence is differentiated through", "[rnn][gradients]") {
  std::vector<Td> x0 = sample_inputs(2, 3, 2, 13);
  gd::Rng rng(14);
  x0.push_back(normal({2, 2, 8}, rng, 1.0));  // the decoder's projected inputs
  check(gd::check_gradient(
      [](const std::vector<V>& v) {
        auto enc = gd::lstm_sequence(v[0], v[1], v[2], v[3]);
        auto dec = gd::lstm_sequence(v[4], v[1], enc.h_final, enc.c_final);
        return gd::concat({flat(dec.h), flat(dec.c_final), flat(enc.h)}, 0);
      },
      x0));
}

TEST_CASE("lstm_sequence: gradients in double with the bias inside the op", "[rnn][gradients]") {
  std::vector<Td> x0 = sample_inputs(3, 4, 3, 19);
  gd::Rng rng(20);
  x0.insert(x0.begin() + 2, normal({12}, rng));  // xp, r, bias, h0, c0
  SECTION("through every output") {
    check(gd::check_gradient(
        [](const std::vector<V>& v) {
          auto o = gd::lstm_sequence(v[0], v[1], v[2], v[3], v[4]);
          return gd::concat({flat(o.h), flat(o.h_final), flat(o.c_final)}, 0);
        },
        x0));
  }
  SECTION("the bias's gradient added to one it already has") {
    // sum(bias²)'s node is newer, so it runs first: the op's kernel then adds to the bias's adjoint
    check(gd::check_gradient(
        [](const std::vector<V>& v) {
          auto o = gd::lstm_sequence(v[0], v[1], v[2], v[3], v[4]);
          return gd::to_var(gd::sum(o.h * 1.5) + gd::sum(o.c_final) + gd::sum(v[2] * v[2]));
        },
        x0));
  }
  SECTION("one step, one sequence") {
    std::vector<Td> one = sample_inputs(1, 1, 2, 21);
    one.insert(one.begin() + 2, normal({8}, rng));
    check(gd::check_gradient(
        [](const std::vector<V>& v) {
          auto o = gd::lstm_sequence(v[0], v[1], v[2], v[3], v[4]);
          return gd::concat({flat(o.h), flat(o.c_final)}, 0);
        },
        one));
  }
}

// The bias inside the op against xp + bias outside it, in float: rows enough for several chunks
// of rows on two threads (each chunk sums its own share of the bias's gradient).
TEST_CASE("lstm_sequence: the bias inside the op equals xp + bias", "[rnn]") {
  using Tf = gd::Tensor<float>;
  using Vf = gd::Var<float>;
  gd::Rng rng(22);
  const int64_t n = 37, steps = 5, u = 6;
  const Tf xpt = Tf::random_normal({n, steps, 4 * u}, rng), bt = Tf::random_normal({4 * u}, rng, 0, 0.5),
           rt = Tf::random_normal({u, 4 * u}, rng, 0, 0.4), h0t = Tf::random_normal({n, u}, rng, 0, 0.5),
           c0t = Tf::random_normal({n, u}, rng, 0, 0.5), seed = Tf::random_normal({n, steps, u}, rng);
  auto run = [&](bool inside) {
    Vf xp(xpt.clone()), b(bt.clone()), r(rt.clone()), h0(h0t.clone()), c0(c0t.clone());
    auto o = inside ? gd::lstm_sequence(xp, r, b, h0, c0) : gd::lstm_sequence(Vf(xp + b), r, h0, c0);
    const Vf loss = gd::sum(o.h * seed) + gd::sum(o.h_final) + gd::sum(o.c_final * 2.0f);
    std::vector<Tf> out{o.h.value(), o.h_final.value(), o.c_final.value()};
    for (Tf& g : gd::gradients(loss, {xp, r, b, h0, c0})) out.push_back(g);
    return out;
  };
  const std::vector<Tf> inside = run(true), outside = run(false);
  const char* names[] = {"h", "h_final", "c_final", "d xp", "d recurrent_kernel", "d bias", "d h0", "d c0"};
  for (size_t k = 0; k < inside.size(); ++k) {
    INFO(names[k]);
    REQUIRE(inside[k].shape() == outside[k].shape());
    for (int64_t i = 0; i < inside[k].size(); ++i)
      CHECK(inside[k].data()[i] == Approx(outside[k].data()[i]).epsilon(1e-5).margin(1e-5));
  }
}

TEST_CASE("lstm_sequence: two backward passes over one graph give the same gradients", "[rnn]") {
  const std::vector<Td> x0 = sample_inputs(2, 3, 2, 15);
  std::vector<V> v;
  for (const Td& x : x0) v.emplace_back(x.clone());
  auto o = gd::lstm_sequence(v[0], v[1], v[2], v[3]);
  const V y = gd::sum(o.h) + gd::sum(o.h_final * 2.0) + gd::sum(o.c_final * 3.0);
  const auto g1 = gd::gradients(y, v), g2 = gd::gradients(y, v);
  for (size_t k = 0; k < v.size(); ++k)
    for (int64_t i = 0; i < g1[k].size(); ++i) CHECK(g1[k].data()[i] == g2[k].data()[i]);
}

TEST_CASE("lstm_sequence: bad shapes name the op and the shapes", "[rnn]") {
  const std::vector<Td> x = sample_inputs(2, 3, 2, 16);
  const V xp(x[0]), r(x[1]), h0(x[2]), c0(x[3]);
  CHECK_THROWS_WITH(gd::lstm_sequence(V(Td::zeros({2, 3, 7})), r, h0, c0),
                    Catch::Contains("lstm_sequence: projected inputs must be [N, T, 4 units]"));
  CHECK_THROWS_WITH(gd::lstm_sequence(xp, V(Td::zeros({3, 8})), h0, c0),
                    Catch::Contains("recurrent_kernel must be [2, 8]"));
  CHECK_THROWS_WITH(gd::lstm_sequence(xp, r, V(Td::zeros({3, 2})), c0), Catch::Contains("h0 must be [2, 2]"));
  CHECK_THROWS_WITH(gd::lstm_sequence(xp, r, h0, V(Td::zeros({2, 3}))), Catch::Contains("c0 must be [2, 2]"));
  CHECK_THROWS_WITH(gd::lstm_sequence(xp, r, V(Td::zeros({2, 4})), h0, c0),
                    Catch::Contains("lstm_sequence: bias must be [8] for projected inputs [2,3,8], got [2,4]"));
}

// The fused op against LSTMCell::step_projected over t, in float: forward values and the
// gradients of every parameter and of the initial state.
// Sizes: where the CPU has AVX-512 the per-step products run on the in-place kernel (elsewhere
// on the general GEMM): units 9 (gate blocks of 36 columns: 2 full vectors and a masked one;
// 9 columns in the backward products), units 50 with 7 rows (200 columns: 3 full panels and a
// masked vector; rows as 4 + 2 + 1) and units 64 with 6 rows (whole panels; 4 + 2 rows) and
// k = 256 in the backward products (two k-blocks).
TEST_CASE("lstm_sequence: equals the per-step LSTMCell path in float", "[rnn]") {
  using Tf = gd::Tensor<float>;
  using Vf = gd::Var<float>;
  struct Size {
    int64_t n, steps, in, u;
  };
  const Size size = GENERATE(Size{5, 7, 6, 9}, Size{7, 4, 5, 50}, Size{6, 3, 5, 64});
  const int64_t n = size.n, steps = size.steps, in = size.in, u = size.u;
  INFO("N " << n << ", T " << steps << ", in " << in << ", units " << u);
  gd::Rng rng(17);
  nn::LSTMCell<float> cell({.in = in, .units = u}, rng);
  cell.bias().value().copy_(Tf::random_normal({4 * u}, rng, 0, 0.3));
  const Tf x = Tf::random_normal({n, steps, in}, rng), h0t = Tf::random_normal({n, u}, rng, 0, 0.5),
           c0t = Tf::random_normal({n, u}, rng, 0, 0.5), seed = Tf::random_normal({n, steps, u}, rng);
  const Tf seed_h = Tf::random_normal({n, u}, rng), seed_c = Tf::random_normal({n, u}, rng);

  // One run: values of all h, final h and c, and gradients of kernel, recurrent_kernel, bias, h0, c0.
  auto run = [&](bool fused) {
    Vf h0(h0t.clone()), c0(c0t.clone());
    const Vf xp = cell.project(Vf::constant(x));
    Vf hs, hT, cT;
    if (fused) {
      auto o = gd::lstm_sequence(xp, cell.recurrent_kernel(), h0, c0);
      hs = o.h, hT = o.h_final, cT = o.c_final;
    } else {
      nn::LSTMState<float> s{h0, c0};
      std::vector<Vf> all;
      for (int64_t t = 0; t < steps; ++t) {
        s = cell.step_projected(gd::to_var(gd::reshape(gd::slice(xp, {0, t, 0}, {n, 1, 4 * u}), {n, 4 * u})), s);
        all.push_back(s.h);
      }
      hs = gd::to_var(gd::stack(all, 1)), hT = s.h, cT = s.c;
    }
    const Vf loss = gd::sum(hs * seed) + gd::sum(hT * seed_h) + gd::sum(cT * seed_c);
    std::vector<Tf> out{hs.value(), hT.value(), cT.value()};
    for (Tf& g : gd::gradients(loss, {cell.kernel(), cell.recurrent_kernel(), cell.bias(), h0, c0})) out.push_back(g);
    return out;
  };
  const std::vector<Tf> fused = run(true), steps_ref = run(false);
  const char* names[] = {"h", "h_final", "c_final", "d kernel", "d recurrent_kernel", "d bias", "d h0", "d c0"};
  for (size_t k = 0; k < fused.size(); ++k) {
    INFO(names[k]);
    REQUIRE(fused[k].shape() == steps_ref[k].shape());
    float worst = 0;
    for (int64_t i = 0; i < fused[k].size(); ++i)
      worst = std::max(worst, std::abs(fused[k].data()[i] - steps_ref[k].data()[i]) /
                                  std::max(1.f, std::abs(steps_ref[k].data()[i])));
    CHECK(worst < 5e-5f);
  }
}

TEST_CASE("lstm_sequence: nn::LSTM runs it and matches the per-step cell, stateful included", "[rnn]") {
  using Tf = gd::Tensor<float>;
  using Vf = gd::Var<float>;
  gd::Rng rng(18);
  nn::LSTM<float> lstm({.in = 4, .units = 5, .return_sequences = true, .stateful = true}, rng);
  const Tf x = Tf::random_normal({3, 6, 4}, rng);
  auto per_step = [&](nn::LSTMState<float> s) {
    const Vf xp = lstm.cell().project(Vf::constant(x));
    std::vector<Vf> all;
    for (int64_t t = 0; t < 6; ++t) {
      s = lstm.cell().step_projected(gd::to_var(gd::reshape(gd::slice(xp, {0, t, 0}, {3, 1, 20}), {3, 20})), s);
      all.push_back(s.h);
    }
    return std::pair{gd::eval(gd::stack(all, 1)), s};
  };
  auto close = [](const Tf& a, const Tf& b) {
    REQUIRE(a.shape() == b.shape());
    for (int64_t i = 0; i < a.size(); ++i) CHECK(a.data()[i] == Approx(b.data()[i]).margin(2e-6));
  };
  auto [ref1, s1] = per_step(lstm.cell().initial_state(3));
  close(lstm.forward(x).value(), ref1);
  close(lstm.states()->h.value(), s1.h.value());
  close(lstm.states()->c.value(), s1.c.value());
  auto [ref2, s2] = per_step({s1.h.detach(), s1.c.detach()});
  close(lstm.forward(x).value(), ref2);  // from the carried state
  close(lstm.states()->c.value(), s2.c.value());
}

// The per-step product of the sequence kernels (backend/cpu/lstm.hpp), c = or += a · b with b
// read in place, against a double triple loop: through step_gemm (whatever this CPU runs) and
// each in-place kernel this CPU can run (AVX-512, AVX2; backend/cpu/gemm_inplace.hpp) called
// directly; row counts that take every block of rows (AVX-512: 4, then 1, 2, 3 or 5; AVX2: 6,
// then 1 to 5), column counts that end in a full panel, a partial panel of whole vectors, or a
// masked vector; depths of one and of several k-blocks.
TEST_CASE("lstm_sequence: the per-step product against a double loop", "[rnn]") {
  namespace cpu = gd::backend::cpu;
  using Fn = void (*)(const float*, const float*, float*, int64_t, int64_t, int64_t, bool);
  std::vector<std::pair<const char*, Fn>> kernels{{"step_gemm", &cpu::lstm_detail::step_gemm<float>}};
#if defined(GRADUS_SGEMM_X86)
  if (cpu::gemm_kernel_supported(cpu::GemmKernel::avx2))
    kernels.emplace_back("avx2", [](const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n,
                                    bool add) { cpu::inplace::gemm_avx2(a, b, c, m, k, n, n, add); });
  if (cpu::gemm_kernel_supported(cpu::GemmKernel::avx512))
    kernels.emplace_back("avx512", [](const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n,
                                      bool add) { cpu::inplace::gemm_avx512(a, b, c, m, k, n, n, add); });
#endif
  gd::Rng rng(23);
  for (const auto& [name, kernel] : kernels)
    for (int64_t m : {1, 2, 3, 5, 7, 10, 13})
      for (int64_t n : {5, 7, 12, 16, 36, 50, 64, 100, 200, 256})
        for (int64_t k : {9, 128, 300})
          for (bool add : {false, true}) {
            const gd::Tensor<float> a = gd::Tensor<float>::random_normal({m, k}, rng),
                                    b = gd::Tensor<float>::random_normal({k, n}, rng),
                                    c0 = gd::Tensor<float>::random_normal({m, n}, rng);
            gd::Tensor<float> c = c0.clone();
            kernel(a.data(), b.data(), c.data(), m, k, n, add);
            double worst = 0;
            for (int64_t i = 0; i < m; ++i)
              for (int64_t j = 0; j < n; ++j) {
                double ref = add ? double(c0.data()[i * n + j]) : 0.0, mag = std::abs(ref);
                for (int64_t p = 0; p < k; ++p) {
                  const double t = double(a.data()[i * k + p]) * double(b.data()[p * n + j]);
                  ref += t, mag += std::abs(t);
                }
                worst = std::max(worst, std::abs(ref - double(c.data()[i * n + j])) / mag);
              }
            INFO(name << ": m " << m << ", n " << n << ", k " << k << ", add " << add);
            CHECK(worst < double(k + 2) * 6e-8);  // (k + 2) unit roundoffs of float, relative to sum |terms|
          }
}
