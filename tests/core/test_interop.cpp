// Tests of the Eigen and xtensor interop: values, layouts, aliasing and lifetimes.
#include "gradus/core/eigen.hpp"  // Eigen/Core, included as gradus includes it
#include <xtensor/xarray.hpp>
#include <xtensor/xmanipulation.hpp>
#include <xtensor/xtensor.hpp>
#include <xtensor/xview.hpp>

#include <catch2/catch.hpp>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "gradus/core/interop_eigen.hpp"
#include "gradus/core/interop_xtensor.hpp"

namespace gd = gradus;

namespace {

template <class T>
std::vector<T> values(const gd::Tensor<T>& t) {
  return {t.begin(), t.end()};
}

template <class X>
concept can_eigen_map = requires(X&& x) { gd::eigen_map(std::forward<X>(x)); };

template <class M>
constexpr bool writable_coeffs = std::is_assignable_v<decltype(std::declval<M&>()(0, 0)), int>;

}  // namespace

TEST_CASE("eigen_map views a rank-2 tensor without copying", "[interop][eigen]") {
  gd::Tensor<float> t = gd::Tensor<float>::from({1, 2, 3, 4, 5, 6}, {2, 3});
  auto m = gd::eigen_map(t);
  static_assert(writable_coeffs<decltype(m)>);
  REQUIRE(m.rows() == 2);
  REQUIRE(m.cols() == 3);
  CHECK(m.data() == t.data());
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) CHECK(m(i, j) == t(i, j));

  m(1, 2) = 60.f;
  CHECK(t(1, 2) == 60.f);
  m.row(0).setConstant(-1.f);
  CHECK(values(t) == std::vector<float>{-1, -1, -1, 4, 5, 60});
  t(0, 1) = 7.f;
  CHECK(m(0, 1) == 7.f);
}

TEST_CASE("eigen_map of a rank-1 tensor is a column; other ranks throw", "[interop][eigen]") {
  gd::Tensor<double> v = gd::Tensor<double>::from({1, 2, 3});
  auto m = gd::eigen_map(v);
  CHECK(m.rows() == 3);
  CHECK(m.cols() == 1);
  m(2, 0) = 30;
  CHECK(v(2) == 30);

  gd::Tensor<double> s = gd::Tensor<double>::scalar(1);
  gd::Tensor<double> r3 = gd::Tensor<double>::zeros({2, 2, 2});
  CHECK_THROWS_AS(gd::eigen_map(s), gd::shape_error);
  CHECK_THROWS_WITH(gd::eigen_map(r3), Catch::Contains("rank 1 or 2") && Catch::Contains("[2,2,2]"));
}

TEST_CASE("eigen_map: const tensors give read-only maps, temporaries are refused", "[interop][eigen]") {
  const gd::Tensor<float> t = gd::Tensor<float>::from({1, 2, 3, 4}, {2, 2});
  auto m = gd::eigen_map(t);
  static_assert(std::is_same_v<decltype(m), Eigen::Map<const gd::RowMajorMatrix<float>>>);
  static_assert(!writable_coeffs<decltype(m)>);
  CHECK(m(1, 0) == 3.f);
  CHECK(m.data() == t.data());

  static_assert(can_eigen_map<gd::Tensor<float>&>);
  static_assert(can_eigen_map<const gd::Tensor<float>&>);
  static_assert(!can_eigen_map<gd::Tensor<float>>);  // a map of a temporary would dangle
}

TEST_CASE("eigen_map lets Eigen compute into tensors", "[interop][eigen]") {
  gd::Tensor<double> a = gd::Tensor<double>::from({1, 2, 3, 4, 5, 6}, {2, 3});
  gd::Tensor<double> b = gd::Tensor<double>::from({1, 0, 0, 1, 1, 1}, {3, 2});
  gd::Tensor<double> c = gd::Tensor<double>::zeros({2, 2});
  gd::eigen_map(c).noalias() = gd::eigen_map(a) * gd::eigen_map(b);
  CHECK(values(c) == std::vector<double>{4, 5, 10, 11});
}

TEST_CASE("from_eigen copies into row-major order", "[interop][eigen]") {
  Eigen::MatrixXd col(2, 3);  // column-major: memory is 1 4 2 5 3 6
  col << 1, 2, 3, 4, 5, 6;
  REQUIRE(col.data()[1] == 4);
  const gd::Tensor<double> t = gd::from_eigen(col);
  CHECK(t.shape() == gd::Shape{2, 3});
  CHECK(values(t) == std::vector<double>{1, 2, 3, 4, 5, 6});
  CHECK(t.data() != col.data());

  gd::RowMajorMatrix<float> row(2, 2);
  row << 1, 2, 3, 4;
  CHECK(values(gd::from_eigen(row)) == std::vector<float>{1, 2, 3, 4});

  SECTION("expressions and blocks") {
    CHECK(values(gd::from_eigen(col.transpose() * 2.0)) == std::vector<double>{2, 8, 4, 10, 6, 12});
    CHECK(gd::from_eigen(col.transpose()).shape() == gd::Shape{3, 2});
    CHECK(values(gd::from_eigen(col.block(0, 1, 2, 2))) == std::vector<double>{2, 3, 5, 6});
  }
  SECTION("vectors become [n, 1], row vectors [1, n]") {
    Eigen::VectorXf v(3);
    v << 7, 8, 9;
    CHECK(gd::from_eigen(v).shape() == gd::Shape{3, 1});
    CHECK(gd::from_eigen(v.transpose()).shape() == gd::Shape{1, 3});
    CHECK(values(gd::from_eigen(v)) == std::vector<float>{7, 8, 9});
  }
  SECTION("int64 matrices") {
    Eigen::Matrix<int64_t, 2, 2> m;
    m << 1, -2, 3, int64_t(1) << 40;
    CHECK(values(gd::from_eigen(m)) == std::vector<int64_t>{1, -2, 3, int64_t(1) << 40});
  }
  SECTION("round trip through eigen_map copies") {
    gd::Tensor<double> a = gd::Tensor<double>::from({1, 2, 3, 4, 5, 6}, {3, 2});
    gd::Tensor<double> b = gd::from_eigen(gd::eigen_map(a));
    CHECK(b.shape() == a.shape());
    CHECK(values(b) == values(a));
    CHECK_FALSE(b.shares_storage(a));
  }
}

TEST_CASE("to_xtensor aliases the tensor's memory", "[interop][xtensor]") {
  gd::Tensor<float> t = gd::Tensor<float>::from({1, 2, 3, 4, 5, 6}, {2, 3});
  auto x = gd::to_xtensor(t);
  static_assert(writable_coeffs<decltype(x)>);
  REQUIRE(x.dimension() == 2);
  CHECK(x.shape()[0] == 2);
  CHECK(x.shape()[1] == 3);
  CHECK(x.data() == t.data());
  for (size_t i = 0; i < 2; ++i)
    for (size_t j = 0; j < 3; ++j) CHECK(x(i, j) == t(int64_t(i), int64_t(j)));

  x(1, 2) = 60.f;
  CHECK(t(1, 2) == 60.f);
  t(0, 0) = -1.f;
  CHECK(x(0, 0) == -1.f);
  x += 1.f;
  CHECK(values(t) == std::vector<float>{0, 3, 4, 5, 6, 61});
  CHECK(xt::sum(x)() == 79.f);
}

TEST_CASE("to_xtensor keeps the storage alive", "[interop][xtensor]") {
  gd::Tensor<double> t = gd::Tensor<double>::full({2, 2}, 3.0);
  const int before = t.use_count();
  {
    auto x = gd::to_xtensor(t);
    CHECK(t.use_count() == before + 1);
  }
  CHECK(t.use_count() == before);

  auto y = gd::to_xtensor(gd::Tensor<double>::full({3}, 4.0));  // the temporary is gone now
  CHECK(y.size() == 3);
  CHECK(y(2) == 4.0);
  y(0) = 5.0;
  CHECK(y(0) == 5.0);

  const gd::Tensor<double> c = t;
  auto z = gd::to_xtensor(c);
  static_assert(!writable_coeffs<decltype(z)>);
  CHECK(z(1, 1) == 3.0);
  CHECK(z.data() == t.data());
}

TEST_CASE("from_xtensor copies expressions into row-major tensors", "[interop][xtensor]") {
  xt::xarray<double> a = {{1, 2, 3}, {4, 5, 6}};

  SECTION("an lvalue array is copied") {
    gd::Tensor<double> t = gd::from_xtensor(a);
    CHECK(t.shape() == gd::Shape{2, 3});
    CHECK(values(t) == std::vector<double>{1, 2, 3, 4, 5, 6});
    CHECK(t.data() != a.data());
    a(0, 0) = 100;
    CHECK(t(0, 0) == 1);
  }
  SECTION("column-major input") {
    xt::xarray<double, xt::layout_type::column_major> cm = a;
    REQUIRE(cm.data()[1] == 4);
    CHECK(values(gd::from_xtensor(cm)) == std::vector<double>{1, 2, 3, 4, 5, 6});
    CHECK(values(gd::from_xtensor(std::move(cm))) == std::vector<double>{1, 2, 3, 4, 5, 6});
  }
  SECTION("lazy expressions and strided views") {
    const gd::Tensor<double> t = gd::from_xtensor(xt::transpose(a) + 1.0);
    CHECK(t.shape() == gd::Shape{3, 2});
    CHECK(values(t) == std::vector<double>{2, 5, 3, 6, 4, 7});
    CHECK(values(gd::from_xtensor(xt::view(a, xt::all(), xt::range(0, 3, 2)))) == std::vector<double>{1, 3, 4, 6});
  }
  SECTION("int64 arrays, rank 0 and rank 3") {
    xt::xarray<int64_t> i = {int64_t(1) << 40, -3};
    CHECK(values(gd::from_xtensor(i)) == std::vector<int64_t>{int64_t(1) << 40, -3});
    xt::xarray<float> s(2.5f);
    const gd::Tensor<float> ts = gd::from_xtensor(s);
    CHECK(ts.rank() == 0);
    CHECK(ts.item() == 2.5f);
    xt::xtensor<float, 3> r3 = xt::reshape_view(xt::arange<float>(24), {2, 3, 4});
    const gd::Tensor<float> t3 = gd::from_xtensor(r3);
    CHECK(t3.shape() == gd::Shape{2, 3, 4});
    CHECK(t3(1, 2, 3) == 23.f);
  }
  SECTION("rank above the tensor limit throws") {
    xt::xarray<float> big = xt::zeros<float>(std::vector<size_t>(9, 1));
    CHECK_THROWS_AS(gd::from_xtensor(big), gd::shape_error);
  }
  SECTION("round trip through to_xtensor copies") {
    gd::Tensor<float> t = gd::Tensor<float>::from({1, 2, 3, 4, 5, 6}, {3, 2});
    gd::Tensor<float> u = gd::from_xtensor(gd::to_xtensor(t));
    CHECK(u.shape() == t.shape());
    CHECK(values(u) == values(t));
    CHECK_FALSE(u.shares_storage(t));
  }
}

TEST_CASE("from_xtensor adopts a temporary row-major container without copying", "[interop][xtensor]") {
  SECTION("xarray") {
    xt::xarray<float> a = {{1, 2}, {3, 4}, {5, 6}};
    const float* p = a.data();
    gd::Tensor<float> t = gd::from_xtensor(std::move(a));
    CHECK(t.data() == p);
    CHECK(t.shape() == gd::Shape{3, 2});
    CHECK(values(t) == std::vector<float>{1, 2, 3, 4, 5, 6});
    gd::Tensor<float> u = t;  // the buffer lives as long as any handle
    t = gd::Tensor<float>();
    CHECK(u(2, 1) == 6.f);
  }
  SECTION("xtensor<T, N>") {
    xt::xtensor<double, 2> a = {{1, 2, 3}};
    const double* p = a.data();
    const gd::Tensor<double> t = gd::from_xtensor(std::move(a));
    CHECK(t.data() == p);
    CHECK(t.shape() == gd::Shape{1, 3});
    CHECK(values(t) == std::vector<double>{1, 2, 3});
  }
  SECTION("a prvalue") {
    const gd::Tensor<int64_t> t = gd::from_xtensor(xt::xarray<int64_t>{7, 8, 9});
    CHECK(values(t) == std::vector<int64_t>{7, 8, 9});
  }
}
