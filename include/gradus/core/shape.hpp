// gradus/core/shape.hpp — a tensor's dimensions, stored inline (no heap), up to kMaxRank.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "gradus/core/compiled.hpp"
#include "gradus/core/error.hpp"

namespace gradus {

inline constexpr int kMaxRank = 8;

/// Dimensions of a row-major tensor: `Shape{2, 3}`. Rank 0 is a scalar (one element).
class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) { assign(dims.begin(), dims.end()); }
  explicit Shape(std::span<const int64_t> dims) { assign(dims.data(), dims.data() + dims.size()); }
  explicit Shape(const std::vector<int64_t>& dims) { assign(dims.data(), dims.data() + dims.size()); }

  int rank() const { return rank_; }
  int size() const { return rank_; }
  int64_t operator[](int i) const { return d_[static_cast<size_t>(i)]; }
  int64_t& operator[](int i) { return d_[static_cast<size_t>(i)]; }
  const int64_t* begin() const { return d_.data(); }
  const int64_t* end() const { return d_.data() + rank_; }
  int64_t back() const { return d_[static_cast<size_t>(rank_ - 1)]; }

  /// Number of elements: the product of the dimensions (1 for rank 0). Throws shape_error when
  /// the product of the nonzero dimensions overflows int64 (so every stride, and the count of
  /// any shape made by dropping or moving dimensions, fits as well).
  int64_t numel() const {
    int64_t n = 1;
    bool wrapped = false;
    for (int i = 0; i < rank_; ++i) wrapped |= __builtin_mul_overflow(n, d_[static_cast<size_t>(i)], &n);
    if (wrapped || n == 0) [[unlikely]]
      return checked_numel();
    return n;
  }
  /// The element count of non-negative `dims`, or -1 when the product of the nonzero ones
  /// overflows int64: `count({0, 1ll << 62, 4})` is -1, although such a shape holds nothing.
  static int64_t count(std::span<const int64_t> dims) noexcept {
    int64_t n = 1;
    bool zero = false;
    for (int64_t d : dims) {
      if (d == 0)
        zero = true;
      else if (__builtin_mul_overflow(n, d, &n))
        return -1;
    }
    return zero ? 0 : n;
  }
  void push_back(int64_t d);
  void insert(int pos, int64_t d);
  void erase(int pos) {
    for (int i = pos; i + 1 < rank_; ++i) d_[size_t(i)] = d_[size_t(i + 1)];
    --rank_;
  }
  std::vector<int64_t> vec() const { return {begin(), end()}; }

  friend bool operator==(const Shape& a, const Shape& b) {
    return a.rank_ == b.rank_ && std::equal(a.begin(), a.end(), b.begin());
  }
  friend std::ostream& operator<<(std::ostream& os, const Shape& s) { return s.print(os); }
  /// "[2,3]".
  std::string str() const;

 private:
  void assign(const int64_t* first, const int64_t* last);
  int64_t checked_numel() const;
  std::ostream& print(std::ostream& os) const;
  std::array<int64_t, kMaxRank> d_{};
  int rank_ = 0;
};

/// Row-major strides of `s` in elements.
inline std::array<int64_t, kMaxRank> row_major_strides(const Shape& s) {
  std::array<int64_t, kMaxRank> st{};
  s.numel();  // throws when a stride would overflow
  int64_t acc = 1;
  for (int i = s.rank() - 1; i >= 0; --i) {
    st[size_t(i)] = acc;
    acc *= s[i];
  }
  return st;
}

namespace detail {
[[noreturn, gnu::cold]] void axis_error(int64_t axis, int rank, const char* op);
}  // namespace detail

/// Normalises a possibly negative axis against `rank`; throws naming `op` when out of range.
inline int normalize_axis(int64_t axis, int rank, const char* op) {
  if (!(axis >= -rank && axis < std::max(rank, 1))) [[unlikely]]
    detail::axis_error(axis, rank, op);
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

/// NumPy broadcast of two shapes; throws shape_error naming `op` when they do not fit.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

}  // namespace gradus

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus {
GRADUS_INLINE void Shape::push_back(int64_t d) {
  GRADUS_CHECK(value_error, rank_ < kMaxRank, "shape: rank exceeds ", kMaxRank);
  d_[static_cast<size_t>(rank_++)] = d;
  checked_numel();
}
GRADUS_INLINE void Shape::insert(int pos, int64_t d) {
  push_back(0);
  for (int i = rank_ - 1; i > pos; --i) d_[size_t(i)] = d_[size_t(i - 1)];
  d_[size_t(pos)] = d;
  checked_numel();
}
GRADUS_INLINE std::string Shape::str() const { return detail::str(*this); }
GRADUS_INLINE void Shape::assign(const int64_t* first, const int64_t* last) {
  GRADUS_CHECK(value_error, last - first <= kMaxRank, "shape: rank ", last - first, " exceeds ", kMaxRank);
  rank_ = 0;
  for (; first != last; ++first) {
    GRADUS_CHECK(value_error, *first >= 0, "shape: negative dimension ", *first);
    d_[static_cast<size_t>(rank_++)] = *first;
  }
  checked_numel();
}
GRADUS_INLINE int64_t Shape::checked_numel() const {
  const int64_t n = count({begin(), end()});
  GRADUS_CHECK(shape_error, n >= 0, "shape ", *this, ": more elements than int64 can count (over ", INT64_MAX,
               "), counting only its nonzero dimensions");
  return n;
}
GRADUS_INLINE std::ostream& Shape::print(std::ostream& os) const {
  os << '[';
  for (int i = 0; i < rank_; ++i) os << (i ? "," : "") << d_[size_t(i)];
  return os << ']';
}
GRADUS_INLINE void detail::axis_error(int64_t axis, int rank, const char* op) {
  throw_error<value_error>({op, ": axis ", axis, " out of range for rank ", rank});
}
GRADUS_INLINE Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const int r = std::max(a.rank(), b.rank());
  Shape out;
  for (int i = 0; i < r; ++i) {
    const int ia = i - (r - a.rank()), ib = i - (r - b.rank());
    const int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    GRADUS_CHECK(shape_error, da == db || da == 1 || db == 1, op, ": shapes cannot be broadcast together: ", a,
                 " vs ", b);
    out.push_back(da == 1 ? db : da);
  }
  return out;
}
}  // namespace gradus
#endif  // GRADUS_DEFINE_COMPILED
