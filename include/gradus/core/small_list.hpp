// gradus/core/small_list.hpp — short lists of axis numbers, sizes or paddings, stored inline.
//
// The shape ops take their per-axis arguments (a permutation, slice begins and sizes, paddings)
// as SmallList: it holds at most kMaxRank entries without touching the heap, so a call such as
// `gd::slice(x, {0, t, 0}, {n, 1, -1})` in a training step allocates nothing. Built from a braced
// list, a std::vector or a Shape; unlike Shape its entries may be negative (-1: infer, axis -1).
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <span>
#include <utility>
#include <vector>

#include "gradus/core/error.hpp"
#include "gradus/core/shape.hpp"

namespace gradus {

template <class V>
class SmallList {
 public:
  SmallList() = default;
  SmallList(std::initializer_list<V> v) { assign(v.begin(), v.size()); }
  SmallList(const std::vector<V>& v) { assign(v.data(), v.size()); }
  SmallList(std::span<const V> v) { assign(v.data(), v.size()); }
  SmallList(const Shape& s)
    requires std::same_as<V, int64_t>
  {
    assign(s.begin(), size_t(s.rank()));
  }

  size_t size() const { return size_t(n_); }
  bool empty() const { return n_ == 0; }
  const V& operator[](size_t i) const { return v_[i]; }
  V& operator[](size_t i) { return v_[i]; }
  const V* begin() const { return v_.data(); }
  const V* end() const { return v_.data() + n_; }
  const V* data() const { return v_.data(); }
  operator std::span<const V>() const { return {v_.data(), size()}; }
  void push_back(const V& x) {
    GRADUS_CHECK(value_error, n_ < kMaxRank, "a list of per-axis values holds at most ", kMaxRank, " entries");
    v_[size_t(n_++)] = x;
  }
  friend bool operator==(const SmallList& a, const SmallList& b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }

 private:
  void assign(const V* p, size_t n) {
    GRADUS_CHECK(value_error, n <= size_t(kMaxRank), "a list of per-axis values holds at most ", kMaxRank,
                 " entries, got ", n);
    std::copy_n(p, n, v_.begin());
    n_ = int(n);
  }
  std::array<V, kMaxRank> v_{};
  int n_ = 0;
};

/// Axis numbers or sizes (may be negative).
using IntList = SmallList<int64_t>;
/// {before, after} per axis, for `pad`.
using PadList = SmallList<std::pair<int64_t, int64_t>>;

/// `[a,b,c]`.
inline std::ostream& operator<<(std::ostream& os, const IntList& v) {
  os << '[';
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  return os << ']';
}

}  // namespace gradus
