// tests/dist/test_mpi.cpp — Context, all-reduce and broadcast against sums written by hand.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "gradus/dist.hpp"

namespace gd = gradus;

namespace {
// The value rank r puts at element i: distinct per rank and per element, exact in float.
template <class T>
T value_at(int r, int64_t i) {
  return T((i % 97) - 40) * T(0.5) + T(r * 1000 + 3);
}
}  // namespace

TEST_CASE("dist: the Context knows the job", "[dist]") {
  REQUIRE(gd::dist::size() == 2);  // ctest launches 2 ranks
  const int r = gd::dist::rank();
  REQUIRE((r == 0 || r == 1));
  // both ranks reach the same barrier; the sum of ranks is 0 + 1
  gd::dist::barrier();
  auto t = gd::Tensor<double>::full({1}, double(r));
  gd::dist::all_reduce_sum(t);
  CHECK(t.item() == 1.0);
}

TEMPLATE_TEST_CASE("dist: all_reduce_sum and mean of odd sizes against hand sums", "[dist]", float, double) {
  using T = TestType;
  const int r = gd::dist::rank(), n = gd::dist::size();
  for (int64_t size : {int64_t(1), int64_t(7), int64_t(1001), int64_t(65537)}) {
    gd::Tensor<T> t = gd::Tensor<T>::empty({size});
    for (int64_t i = 0; i < size; ++i) t.data()[i] = value_at<T>(r, i);
    gd::Tensor<T> m = t.clone();
    gd::dist::all_reduce_sum(t);
    gd::dist::all_reduce_mean(m);
    int bad_sum = 0, bad_mean = 0;
    for (int64_t i = 0; i < size; ++i) {
      double want = 0;
      for (int q = 0; q < n; ++q) want += double(value_at<T>(q, i));
      bad_sum += double(t.data()[i]) != want;  // small integers and halves: exact
      bad_mean += double(m.data()[i]) != want / n;
    }
    INFO("size " << size);
    CHECK(bad_sum == 0);
    CHECK(bad_mean == 0);
  }
}

TEST_CASE("dist: all_reduce of a shared tensor leaves the other handle alone", "[dist]") {
  gd::Tensor<float> a = gd::Tensor<float>::full({3}, 2.f);
  gd::Tensor<float> b = a;  // shares a's storage
  gd::dist::all_reduce_sum(b);
  CHECK(b.data()[0] == 4.f);
  CHECK(a.data()[0] == 2.f);
}

TEMPLATE_TEST_CASE("dist: broadcast from rank 0 and from rank 1", "[dist]", float, double) {
  using T = TestType;
  const int r = gd::dist::rank();
  for (int root : {0, 1}) {
    gd::Tensor<T> t = gd::Tensor<T>::empty({3, 5});
    for (int64_t i = 0; i < 15; ++i) t.data()[i] = value_at<T>(r, i);
    gd::dist::broadcast(t, root);
    int bad = 0;
    for (int64_t i = 0; i < 15; ++i) bad += t.data()[i] != value_at<T>(root, i);
    CHECK(bad == 0);
  }
}

TEST_CASE("dist: mismatched sizes and bad roots are errors, not hangs", "[dist]") {
  const int r = gd::dist::rank();
  gd::Tensor<float> t = gd::Tensor<float>::zeros({r == 0 ? 3 : 4});
  CHECK_THROWS_AS(gd::dist::all_reduce_sum(t), gd::shape_error);
  CHECK_THROWS_AS(gd::dist::broadcast(t, 0), gd::shape_error);
  CHECK_THROWS_AS(gd::dist::broadcast(t, 5), gd::value_error);
  gd::Tensor<double> undefined;
  CHECK_THROWS_WITH(gd::dist::all_reduce_sum(undefined), Catch::Contains("dist::all_reduce_sum: the tensor is undefined"));
}

TEST_CASE("dist: an MPI failure becomes dist_error with the call's name and MPI's message", "[dist]") {
  // a root outside the communicator, passed to MPI itself
  float x = 0;
  try {
    gd::dist::detail::check_mpi(MPI_Bcast(&x, 1, MPI_FLOAT, 7, MPI_COMM_WORLD), "MPI_Bcast");
    FAIL("MPI_Bcast with root 7 of 2 should fail");
  } catch (const gd::dist_error& e) {
    CHECK_THAT(e.what(), Catch::StartsWith("MPI_Bcast: ") && Catch::Contains("root"));
  }
}
