// A training step on the GPU does not make the host wait for the GPU: the batch goes through the
// Stager, the step's loss stays on the device until a hook or the epoch's end reads it
// (train::StepLoss), and the values read are the CPU's. Adam updates up to 32 parameters in one kernel there. On the emulated device the driver counts
// the calls after which a real host would have waited for the GPU's kernels
// (gradus_emu_host_waits); on a real GPU only the values are checked.
#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <cmath>
#include <cstdlib>
#include <vector>

#include "gradus/backend/cuda/device.hpp"
#include "gradus/gradus.hpp"
#include "gradus/losses.hpp"
#include "gradus/nn.hpp"
#include "gradus/optim.hpp"
#include "gradus/train.hpp"

#include "../support/gpu.hpp"
#include "../support/without_kernel.hpp"

namespace gd = gradus;

namespace async_step_test {

using WaitCount = unsigned long long (*)();

// Entry point `name` of the emulated driver; null on a real driver (the emulator alone exports
// gradus_emu_host_waits).
void* emulator_symbol(const char* name) {
  const char* path = std::getenv("GRADUS_CUDA_DRIVER");
  void* lib = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : nullptr;
  return lib && dlsym(lib, "gradus_emu_host_waits") ? dlsym(lib, name) : nullptr;
}

// The emulated driver's count of host waits; null on a real driver.
WaitCount emulator_waits() { return reinterpret_cast<WaitCount>(emulator_symbol("gradus_emu_host_waits")); }

// Keeps every step's StepLoss unread, with the host waits since the previous step.
struct Recorder : gd::train::Hook {
  WaitCount waits = nullptr;
  unsigned long long last = 0;
  std::vector<gd::train::StepResult> steps;
  std::vector<unsigned long long> waits_before;
  std::vector<bool> ready_at_step;
  void after_create_session(gd::train::Session&) override { last = waits ? waits() : 0; }
  void after_step(gd::train::Session&, const gd::train::StepResult& r) override {
    const unsigned long long now = waits ? waits() : 0;
    waits_before.push_back(now - last);
    last = now;
    ready_at_step.push_back(r.loss.ready());
    steps.push_back(r);
  }
};

struct Net : gd::nn::Module<float> {
  gd::Rng rng{7};
  gd::nn::Dense<float> d1, d2;
  Net() : d1({.in = 6, .out = 12, .activation = gd::nn::tanh}, rng), d2({.in = 12, .out = 3}, rng) {
    register_module("d1", d1);
    register_module("d2", d2);
  }
  gd::Var<float> forward(const gd::Tensor<float>& x) { return d2.forward(d1.forward(x)); }
};

// Adam (which 0), AMSGrad (1) or AdamW (2) over a 7 x 5 layer on `d`, twelve steps of a loss whose
// gradient changes sign (so AMSGrad's running maximum matters); the weights and bias, on the CPU.
template <class T>
std::pair<gd::Tensor<T>, gd::Tensor<T>> adam_run(int which, gd::Device d) {
  gd::Rng rng(31);
  gd::Var<T> w(gd::Tensor<T>::random_uniform({7, 5}, rng, -1, 1).to(d), true);
  gd::Var<T> b(gd::Tensor<T>::random_uniform({5}, rng, -1, 1).to(d), true);
  const gd::Tensor<T> x = gd::Tensor<T>::random_uniform({4, 7}, rng, -1, 1).to(d);
  std::unique_ptr<gd::optim::Optimizer<T>> opt;
  if (which == 0) opt = std::make_unique<gd::optim::Adam<T>>(std::vector{w, b}, gd::optim::AdamOptions{.lr = 0.05});
  if (which == 1) opt = std::make_unique<gd::optim::AMSGrad<T>>(std::vector{w, b}, gd::optim::AdamOptions{.lr = 0.05});
  if (which == 2)
    opt = std::make_unique<gd::optim::AdamW<T>>(std::vector{w, b},
                                                 gd::optim::AdamWOptions{.lr = 0.05, .weight_decay = 0.1});
  const T w00 = w.value().to(gd::cpu).data()[0];
  for (int step = 0; step < 12; ++step)
    opt->minimize(gd::sum(gd::square(gd::sin(gd::matmul(gd::Var<T>::constant(x), w) + b) - T(0.3))));
  CHECK(w.value().device() == d);  // updated where it lives
  gd::Tensor<T> w_cpu = w.value().to(gd::cpu);
  CHECK(std::abs(double(w_cpu.data()[0] - w00)) > 1e-3);  // it moved
  return {w_cpu, b.value().to(gd::cpu)};
}

}  // namespace async_step_test

namespace ast = async_step_test;

TEST_CASE("fit on the GPU: the host never waits for the GPU inside an epoch, and the losses read later are the CPU's",
          "[gpu]") {
  if (!gradus_test::gpu_available()) return;
  const ast::WaitCount waits = ast::emulator_waits();
  gd::Tensor<float> x = gd::Tensor<float>::empty({60, 6});
  gd::Tensor<int64_t> y = gd::Tensor<int64_t>::empty({60});
  for (int64_t i = 0; i < 60; ++i) {
    for (int64_t j = 0; j < 6; ++j) x(i, j) = float(std::sin(0.3 * double(i) + 0.9 * double(j)));
    y(i) = (i * 7) % 3;
  }
  const gd::train::Data<float, int64_t> data{x, y};
  const auto loss = [](const gd::Tensor<int64_t>& l, const gd::Var<float>& p) {
    return gd::losses::sparse_softmax_cross_entropy_with_logits(l, p);
  };
  const auto run = [&](std::optional<gd::Device> d, ast::Recorder& rec) {
    ast::Net net;
    gd::optim::Adam<float> opt(net.parameters(), {.lr = 0.05});
    return gd::train::fit(net, opt, loss, data,
                          {.epochs = 3, .batch_size = 10, .seed = 3, .hooks = {&rec}, .device = d});
  };
  ast::Recorder cpu_steps, gpu_steps;
  gpu_steps.waits = waits;
  const gd::train::History cpu = run(std::nullopt, cpu_steps);
  const gd::train::History gpu = run(gd::cuda(0), gpu_steps);
  REQUIRE(gpu_steps.steps.size() == 18);
  REQUIRE(cpu_steps.steps.size() == 18);
  for (size_t k = 0; k < 18; ++k) {
    INFO("step " << k + 1);
    CHECK(cpu_steps.ready_at_step[k]);   // on the CPU a loss is a number at once
    CHECK(!gpu_steps.ready_at_step[k]);  // on the GPU nobody had asked for it
    CHECK(gpu_steps.steps[k].loss.ready());  // the epoch's end read them all
    CHECK(gpu_steps.steps[k].loss.value() == Approx(cpu_steps.steps[k].loss.value()).epsilon(1e-4));
    // inside an epoch (not its first step, which follows the previous epoch's end and validation)
    if (waits && k % 6 != 0) CHECK(gpu_steps.waits_before[k] == 0);
  }
  if (!waits) WARN("a real GPU: host waits are counted on the emulated device only");
  REQUIRE(gpu.epochs.size() == 3);
  for (size_t e = 0; e < 3; ++e) CHECK(gpu.epochs[e].loss == Approx(cpu.epochs[e].loss).epsilon(1e-4));
  CHECK(gpu.epochs[2].loss < gpu.epochs[0].loss);  // it learns
}

TEST_CASE("a Session on the GPU reads the loss when asked: a hook's read, last_loss, epoch_loss", "[gpu]") {
  if (!gradus_test::gpu_available()) return;
  const gd::Device g = gd::cuda(0);
  const ast::WaitCount waits = ast::emulator_waits();
  ast::Net net;
  net.to(g);
  gd::optim::SGD<float> opt(net.parameters(), {.lr = 0.1});
  gd::Tensor<float> x = gd::Tensor<float>::empty({8, 6});
  for (int64_t i = 0; i < x.size(); ++i) x.data()[i] = float(i % 5) * 0.2f - 0.4f;
  const gd::Tensor<float> xd = x.to(g);
  const gd::Tensor<int64_t> yd = gd::Tensor<int64_t>::from({0, 1, 2, 0, 1, 2, 0, 1}).to(g);
  // every third step a hook reads the loss: that step's read settles it and the two before
  struct EveryThird : gd::train::Hook {
    std::vector<gd::train::StepLoss> kept;
    std::vector<double> read;
    void after_step(gd::train::Session&, const gd::train::StepResult& r) override {
      kept.push_back(r.loss);
      if (r.global_step % 3 == 0) {
        CHECK(!kept[kept.size() - 2].ready());
        read.push_back(r.loss);  // the conversion reads it
        CHECK(kept[kept.size() - 2].ready());
      }
    }
  } hook;
  gd::train::Session s(net, opt, {.hooks = {&hook}});
  const unsigned long long before = waits ? waits() : 0;
  for (int k = 0; k < 5; ++k)
    s.run([&] { return gd::losses::sparse_softmax_cross_entropy_with_logits(yd, net.forward(xd)); });
  if (waits) CHECK(waits() - before == 2);  // step 3's read: the loss buffer, and the GPU's pending checks
  REQUIRE(hook.read.size() == 1);
  CHECK(hook.read[0] == hook.kept[2].value());
  CHECK(!hook.kept[4].ready());
  CHECK(s.last_loss() == hook.kept[4].value());
  CHECK(hook.kept[4].ready());
  double mean = 0;
  for (const auto& l : hook.kept) mean += l.value() / 5;
  CHECK(s.epoch_loss() == Approx(mean).epsilon(1e-12));
  CHECK(hook.kept[4].value() < hook.kept[0].value());  // it learns
  const gd::train::EpochLogs& logs = s.end_epoch();
  CHECK(logs.loss == Approx(mean).epsilon(1e-12));
  s.close();
}

TEST_CASE("Adam, AMSGrad and AdamW on the GPU: one kernel for the parameters, the CPU's updates", "[gpu]") {
  if (!gradus_test::gpu_available()) return;
  const gd::Device g = gd::cuda(0);
  CHECK(gd::backend::implements<gd::backend::kernel::AdamUpdate, float>(g));
  CHECK(gd::backend::implements<gd::backend::kernel::AdamUpdate, float>(gd::cpu));  // one pass on the CPU too
  for (int which = 0; which < 3; ++which) {
    INFO("optimizer " << (which == 0 ? "Adam" : which == 1 ? "AMSGrad" : "AdamW"));
    const auto [wf, bf] = ast::adam_run<float>(which, gd::cpu);
    const auto [wfg, bfg] = ast::adam_run<float>(which, g);
    const auto [wd, bd] = ast::adam_run<double>(which, gd::cpu);
    const auto [wdg, bdg] = ast::adam_run<double>(which, g);
    for (int64_t i = 0; i < wf.size(); ++i) {
      CHECK(wfg.data()[i] == Approx(wf.data()[i]).epsilon(1e-4).margin(1e-5));
      CHECK(wdg.data()[i] == Approx(wd.data()[i]).epsilon(1e-11).margin(1e-12));
    }
    for (int64_t i = 0; i < bf.size(); ++i) CHECK(bdg.data()[i] == Approx(bd.data()[i]).epsilon(1e-11).margin(1e-12));
  }
}

TEST_CASE("Adam, AMSGrad and AdamW on a GPU whose backend lacks the one-pass update: the CPU's, on host copies",
          "[gpu]") {
  if (!gradus_test::gpu_available()) return;
  namespace be = gd::backend;
  const gd::Device g = gd::cuda(0);
  for (int which = 0; which < 3; ++which) {
    INFO("optimizer " << (which == 0 ? "Adam" : which == 1 ? "AMSGrad" : "AdamW"));
    const auto [wg, bg] = ast::adam_run<double>(which, g);  // the GPU's one-pass update
    const auto [wc, bc] = ast::adam_run<double>(which, gd::cpu);
    // the GPU backend's kernel taken out: the parameters go to AdamRule::update, which runs the
    // CPU's update on host copies and writes weights and state back to the GPU
    gradus_test::WithoutKernel<be::kernel::AdamUpdate, double> fallback(gd::DeviceType::cuda);
    REQUIRE_FALSE(be::implements<be::kernel::AdamUpdate, double>(g));
    const auto [wf, bf] = ast::adam_run<double>(which, g);  // the CPU's update on host copies
    for (int64_t i = 0; i < wf.size(); ++i) {
      CHECK(wf.data()[i] == Approx(wg.data()[i]).epsilon(1e-12).margin(1e-13));
      CHECK(wf.data()[i] == Approx(wc.data()[i]).epsilon(1e-11).margin(1e-12));
    }
    for (int64_t i = 0; i < bf.size(); ++i) CHECK(bf.data()[i] == Approx(bg.data()[i]).epsilon(1e-12).margin(1e-13));
  }
}

TEST_CASE("Adam over 40 parameters of different sizes on the GPU: two launches a step, the CPU's weights", "[gpu]") {
  namespace ast = async_step_test;
  if (!gradus_test::gpu_available()) return;
  const gd::Device g = gd::cuda(0);
  using Launches = unsigned long long (*)();
  const auto launches = reinterpret_cast<Launches>(ast::emulator_symbol("gradus_emu_launches"));
  const auto run = [&](gd::Device d, bool amsgrad) {
    gd::Rng rng(37);
    std::vector<gd::Var<double>> ws;
    for (int k = 0; k < 40; ++k)  // 1 to 300 elements: the batch's bisection meets every boundary
      ws.emplace_back(gd::Tensor<double>::random_uniform({1 + (k * 37) % 300}, rng, -1, 1).to(d), true);
    gd::optim::Adam<double> opt(ws, {.lr = 0.02, .amsgrad = amsgrad});
    unsigned long long per_step = 0;
    for (int step = 0; step < 4; ++step) {
      gd::Var<double> loss = gd::Var<double>::constant(gd::Tensor<double>::zeros({}).to(d));
      for (size_t k = 0; k < ws.size(); ++k) loss = loss + gd::sum(gd::sin(ws[k] * double(k % 7 + 1)));
      opt.zero_grad();
      gd::backward(loss);
      const unsigned long long before = launches ? launches() : 0;
      opt.step();
      if (launches) per_step = launches() - before;
    }
    std::vector<gd::Tensor<double>> out;
    for (const auto& w : ws) out.push_back(w.value().to(gd::cpu));
    return std::pair{out, per_step};
  };
  for (bool amsgrad : {false, true}) {
    INFO((amsgrad ? "AMSGrad" : "Adam"));
    const auto [cpu, cpu_launches] = run(gd::cpu, amsgrad);
    const auto [gpu, gpu_launches] = run(g, amsgrad);
    for (size_t k = 0; k < cpu.size(); ++k)
      for (int64_t i = 0; i < cpu[k].size(); ++i)
        CHECK(gpu[k].data()[i] == Approx(cpu[k].data()[i]).epsilon(1e-12).margin(1e-13));
    if (launches) CHECK(gpu_launches == 2);  // 32 parameters, then 8
  }
}

TEST_CASE("column sums of tall matrices on the GPU (a bias gradient): in two stages, the CPU's values, the same bits twice",
          "[gpu]") {
  if (!gradus_test::gpu_available()) return;
  const gd::Device g = gd::cuda(0);
  for (const gd::Shape& s : {gd::Shape{100, 7}, gd::Shape{257, 3}, gd::Shape{5000, 32}, gd::Shape{1021, 1}}) {
    INFO("shape " << s);
    gd::Rng rng(41);
    const gd::Tensor<float> x = gd::Tensor<float>::random_uniform(s, rng, -1, 1);
    const gd::Tensor<float> xd = x.to(g);
    const auto column_sums = [&] {
      gd::Tensor<float> out = gd::Tensor<float>::empty({s[1]}, g);
      gd::backend::sum_rows(xd.device_data(), s[0], s[1], out.device_data(), g);
      return out.to(gd::cpu);
    };
    const gd::Tensor<float> first = column_sums(), second = column_sums();
    for (int64_t c = 0; c < s[1]; ++c) {
      double exact = 0;
      for (int64_t r = 0; r < s[0]; ++r) exact += double(x(r, c));
      CHECK(double(first(c)) == Approx(exact).margin(1e-5 * double(s[0])));
      CHECK(first(c) == second(c));  // no atomics: the order depends on the shape only
    }
  }
}

TEST_CASE("another library's context made current on this thread: the next launch makes gradus's current again",
          "[gpu]") {
  if (!gradus_test::gpu_available()) return;
  using SetCurrent = int (*)(void*);
  using GetCurrent = int (*)(void**);
  const auto set = reinterpret_cast<SetCurrent>(ast::emulator_symbol("cuCtxSetCurrent"));
  const auto get = reinterpret_cast<GetCurrent>(ast::emulator_symbol("cuCtxGetCurrent"));
  if (!set || !get) {
    WARN("a real GPU: the context switch is checked on the emulated device only");
    return;
  }
  const gd::Device g = gd::cuda(0);
  const gd::Tensor<float> x = gd::Tensor<float>::ones({8}).to(g);
  CHECK(gd::eval(x + 1.f).to(gd::cpu)(3) == 2.f);
  void* ours = nullptr;
  REQUIRE(get(&ours) == 0);
  REQUIRE(ours != nullptr);
  int foreign = 0;
  REQUIRE(set(&foreign) == 0);  // as the CUDA runtime of another library would
  CHECK(gd::eval(x * 3.f).to(gd::cpu)(5) == 3.f);
  void* now = nullptr;
  REQUIRE(get(&now) == 0);
  CHECK(now == ours);
}
