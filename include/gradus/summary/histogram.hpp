// gradus/summary/histogram.hpp — histograms with TensorFlow's default bucket limits.
//
// The limits are those of tensorflow/core/lib/histogram/histogram.cc: 1e-12 growing by a
// factor 1.1 while below 1e20, then DBL_MAX; the same mirrored negative; and 0 between them
// (1551 limits). Bucket i counts the values v with limits[i-1] <= v < limits[i].
// Like TF's Histogram::EncodeToProto, each run of empty buckets is collapsed into one empty
// bucket carrying the run's last limit, so only the non-empty buckets and the empty bucket
// to the left of each (which gives its lower edge) are kept; an empty histogram keeps the
// single bucket (DBL_MAX, 0). Non-finite values are rejected (as TF1's histogram summary
// does: "Nan in summary histogram"), because they have no bucket and poison sum/sum_squares.
#pragma once
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gradus/core/compiled.hpp"
#include "gradus/core/error.hpp"
#include "gradus/core/tensor.hpp"

namespace gradus::summary {

/// A HistogramProto: summary statistics plus parallel lists of right bucket limits and counts.
struct Histogram {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> bucket_limit;  // right edge of each bucket, increasing
  std::vector<double> bucket;        // count of each bucket
};

/// TensorFlow's default bucket limits (see the file comment), increasing.
const std::vector<double>& default_bucket_limits();

/// The histogram of `n` values at `data` in the default buckets; value_error naming `tag`
/// and the first offending index when a value is NaN or infinite.
template <class T>
Histogram make_histogram(const T* data, int64_t n, std::string_view tag = "histogram") {
  const std::vector<double>& limits = default_bucket_limits();
  std::vector<double> counts(limits.size(), 0.0);
  Histogram h;
  h.min = DBL_MAX;
  h.max = -DBL_MAX;
  for (int64_t i = 0; i < n; ++i) {
    const double v = double(data[i]);
    GRADUS_CHECK(value_error, std::isfinite(v), "summary histogram '", tag, "': value ", v, " at index ", i,
                 " is not finite");
    const auto b = size_t(std::upper_bound(limits.begin(), limits.end(), v) - limits.begin());
    counts[std::min(b, counts.size() - 1)] += 1;
    h.min = std::min(h.min, v);
    h.max = std::max(h.max, v);
    h.sum += v;
    h.sum_squares += v * v;
  }
  h.num = double(n);
  if (n == 0) h.min = h.max = 0;
  for (size_t i = 0; i < counts.size();) {
    double end = limits[i];
    const double count = counts[i++];
    if (count == 0)
      while (i < counts.size() && counts[i] == 0) end = limits[i++];
    h.bucket_limit.push_back(end);
    h.bucket.push_back(count);
  }
  return h;
}

/// The histogram of every element of `values` (any shape) in TF's default buckets.
template <Element T>
Histogram make_histogram(const Tensor<T>& values, std::string_view tag = "histogram") {
  return make_histogram(values.data(), values.size(), tag);
}

}  // namespace gradus::summary

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::summary {
GRADUS_INLINE const std::vector<double>& default_bucket_limits() {
  static const std::vector<double> limits = [] {
    std::vector<double> pos;
    for (double v = 1e-12; v < 1e20; v *= 1.1) pos.push_back(v);
    pos.push_back(DBL_MAX);
    std::vector<double> all;
    all.reserve(2 * pos.size() + 1);
    for (auto it = pos.rbegin(); it != pos.rend(); ++it) all.push_back(-*it);
    all.push_back(0.0);
    all.insert(all.end(), pos.begin(), pos.end());
    return all;
  }();
  return limits;
}
}  // namespace gradus::summary
#endif  // GRADUS_DEFINE_COMPILED
