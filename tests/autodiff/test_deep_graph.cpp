// A graph as long as an RNN over a long sequence: building, differentiating and freeing it
// must not depend on the stack's size. The chains below are built, differentiated and freed on a
// thread whose stack is 512 KB: a recursion over their 100,000 nodes needs at least 16 bytes a
// level (a return address and a saved register), 1.6 MB, so any recursive pass overflows it,
// and the test costs a tenth of a million-node chain on an 8 MB stack (it runs under ASan in CI).
#include <catch2/catch.hpp>
#include <cmath>
#include <exception>
#include <gradus/gradus.hpp>
#include <pthread.h>

namespace gd = gradus;

namespace {

/// Runs `f` on a new thread with a stack of `bytes`, and rethrows what it threw.
template <class F>
void on_small_stack(size_t bytes, F f) {
  struct Job {
    F f;
    std::exception_ptr error;
  } job{std::move(f), nullptr};
  pthread_attr_t attr;
  REQUIRE(pthread_attr_init(&attr) == 0);
  REQUIRE(pthread_attr_setstacksize(&attr, bytes) == 0);
  pthread_t thread;
  const int rc = pthread_create(
      &thread, &attr,
      [](void* p) -> void* {
        auto* j = static_cast<Job*>(p);
        try {
          j->f();
        } catch (...) {
          j->error = std::current_exception();
        }
        return nullptr;
      },
      &job);
  pthread_attr_destroy(&attr);
  REQUIRE(rc == 0);
  REQUIRE(pthread_join(thread, nullptr) == 0);
  if (job.error) std::rethrow_exception(job.error);
}

}  // namespace

TEST_CASE("deep graph: a chain of 10^5 nodes back-propagates and is freed without recursion", "[autodiff]") {
  const int n = 100'000;
  // computed on the small stack, checked here (Catch2's assertions are not for other threads)
  double grad = 0, sums[2] = {0, 0};
  on_small_stack(512 * 1024, [&] {
    gd::Var<double> w(gd::Tensor<double>::from({1.0}));
    {
      gd::Var<double> x = w * 1.0;
      for (int i = 0; i < n; ++i) x = x * 1.000001;
      gd::backward(x);
      grad = w.grad().item();
    }  // the last Var of the chain goes here: one release frees every node
    w.zero_grad();
    // The same chain dropped without a backward pass, and built again: the freed nodes are reused.
    for (double& sum : sums) {
      gd::Var<double> x = w * 1.0;
      for (int i = 0; i < n; ++i) x = x + 1e-6;
      sum = x.value().item();
    }
  });
  CHECK(grad == Approx(std::pow(1.000001, n)).epsilon(1e-9));  // d x / d w = 1.000001^n
  CHECK(sums[0] == Approx(1.1).epsilon(1e-9));
  CHECK(sums[1] == Approx(1.1).epsilon(1e-9));
}
