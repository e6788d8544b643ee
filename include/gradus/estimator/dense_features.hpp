// gradus/estimator/dense_features.hpp — the model side of feature columns: DenseFeatures (Keras'
// DenseFeatures, tf.compat.v1.feature_column.input_layer) and LinearModel (feature_column's
// linear_model), modules that take the packed input of a Features layout ([B, input_width], see
// estimator/feature_columns.hpp) and give the model's dense input or a linear model's outputs.
//
// DenseFeatures: every column's output side by side, in the layout's (name) order — values as
// packed, an embedding column's ids through its table [num_buckets, dimension] (child
// "<name>_embedding", parameter "embedding_weights"), combined per example by its combiner.
// LinearModel: Σ over columns of the column's contribution [B, units] + bias — a dense column's
// values times its weights [width, units], a categorical column's ids each adding its row of
// weights [num_buckets, units] (TensorFlow's sparse_combiner "sum"); weights start at zero, as
// TensorFlow's. The ids are read from the packed input in host memory; the tables are where the
// module is.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gradus/estimator/feature_columns.hpp"
#include "gradus/nn/module.hpp"
#include "gradus/ops/elementwise.hpp"
#include "gradus/ops/linalg.hpp"
#include "gradus/ops/shape.hpp"
#include "gradus/ops/sparse.hpp"

namespace gradus::feature_column {

namespace detail {

/// The ids of slots [offset, offset + width) of packed rows (host floats, -1 for none) as a 2-D
/// SparseTensor [rows, width] in row-major order.
SparseTensor<int64_t> packed_ids(const Tensor<float>& packed, int64_t offset, int64_t width, int64_t buckets,
                                 const std::string& column);

/// The packed input in host memory as float (ids are exact there), from any element type and device.
template <class X>
Tensor<float> host_packed(const X& x) {
  const auto& v = gradus::detail::value_of(x);
  const auto host = v.device() == gradus::cpu ? v : v.to(gradus::cpu);
  if constexpr (std::is_same_v<value_type_t<X>, float>) return host;
  else return cast<float>(host);
}

/// The packed input as a Tensor or Var of T (packed features come as float; a double model takes
/// them as double).
template <Real T, class X>
auto packed_as(const X& x_expr) {
  if constexpr (std::is_same_v<value_type_t<X>, T>) return materialize(x_expr);
  else return cast<T>(materialize(x_expr));
}

/// The packed input of `features` (a Tensor or Var of T), its shape checked for module `who`.
template <Real T, class X>
auto checked_packed(const X& x_expr, const Features& features, const char* who) {
  auto x = packed_as<T>(x_expr);
  const Shape& xs = gradus::detail::value_of(x).shape();
  GRADUS_CHECK(shape_error, xs.rank() == 2 && xs[1] == features.input_width(), who, ": expected the packed features [B, ",
               features.input_width(), "] (Features::transform), got ", xs);
  return x;
}

/// One table of a column: its weights as a parameter named `param`.
template <Real T>
class ColumnTable : public nn::Module<T, ColumnTable<T>> {
 public:
  ColumnTable(const std::string& param, Tensor<T> initial) { weights_ = this->register_parameter(param, std::move(initial)); }
  Var<T> weights() const { return weights_; }

 private:
  Var<T> weights_;
};

}  // namespace detail

/// The dense input of a DNN from the packed features (see the top of this file).
///   gd::feature_column::DenseFeatures<float> input(features, rng);
///   gd::Var<float> h = input(x);   // x [B, features.input_width()] -> [B, output_width()]
template <Real T = float>
class DenseFeatures : public nn::Module<T, DenseFeatures<T>> {
 public:
  DenseFeatures(Features features, Rng& rng) : features_(std::move(features)) {
    for (const Features::Slot& s : features_.slots()) {
      GRADUS_CHECK(value_error, s.column.dense(), "DenseFeatures: column '", s.column.name(),
                   "' is categorical; wrap it in indicator_column or embedding_column");
      width_ += s.column.output_width();
      if (s.column.kind() != Kind::embedding) {
        tables_.push_back(nullptr);
        continue;
      }
      const ColumnSpec& c = s.column.spec();
      const int64_t buckets = Column(c.source).num_buckets();
      tables_.push_back(&this->register_module(
          c.name, std::make_unique<detail::ColumnTable<T>>(
                      "embedding_weights", c.initializer.template operator()<T>({buckets, c.dimension}, rng))));
    }
  }

  /// x [B, input_width] (the packed features; a Tensor or Var of float or T) -> [B, output_width].
  template <Expression X>
  Var<T> forward(const X& x_expr) {
    auto x = detail::checked_packed<T>(x_expr, features_, "DenseFeatures");
    Tensor<float> host;  // the ids, read once
    std::vector<Var<T>> parts;
    int64_t run_begin = 0, run_width = 0;  // neighbouring value slots are one slice
    auto flush = [&] {
      if (run_width > 0) parts.push_back(to_var(slice(x, {0, run_begin}, {-1, run_width})));
      run_width = 0;
    };
    const auto& slots = features_.slots();
    for (size_t k = 0; k < slots.size(); ++k) {
      const Features::Slot& s = slots[k];
      if (s.packing == Packing::values) {
        if (run_width == 0) run_begin = s.offset;
        run_width += s.width;
        continue;
      }
      flush();
      if (!host.defined()) host = detail::host_packed(x);
      const ColumnSpec& c = s.column.spec();
      const SparseTensor<int64_t> ids =
          detail::packed_ids(host, s.offset, s.width, Column(c.source).num_buckets(), c.name);
      parts.push_back(to_var(embedding_lookup_sparse(tables_[k]->weights(), ids, c.combiner)));
    }
    flush();
    if (parts.size() == 1) return parts[0];
    return to_var(concat(parts, 1));
  }

  const Features& features() const { return features_; }
  int64_t output_width() const { return width_; }
  /// The table [num_buckets, dimension] of embedding column `name` ("edu_embedding").
  Var<T> embedding_weights(std::string_view name) const {
    const auto& slots = features_.slots();
    for (size_t k = 0; k < slots.size(); ++k)
      if (tables_[k] && slots[k].column.name() == name) return tables_[k]->weights();
    gradus::detail::throw_error<value_error>({"DenseFeatures: no embedding column '", name, "'"});
  }

 private:
  Features features_;
  std::vector<detail::ColumnTable<T>*> tables_;  // per slot: the embedding table, or null
  int64_t width_ = 0;
};

/// A linear model over feature columns (feature_column's linear_model; see the top of this file).
///   gd::feature_column::LinearModel<float> lin(gd::feature_column::Features(cols, true), 3);
template <Real T = float>
class LinearModel : public nn::Module<T, LinearModel<T>> {
 public:
  LinearModel(Features features, int64_t units) : features_(std::move(features)), units_(units) {
    GRADUS_CHECK(value_error, units >= 1, "LinearModel: units must be >= 1, got ", units);
    for (const Features::Slot& s : features_.slots()) {
      GRADUS_CHECK(value_error, s.column.kind() != Kind::embedding, "LinearModel: column '", s.column.name(),
                   "' is an embedding column; a linear model takes the categorical column itself");
      const int64_t rows = s.packing == Packing::ids ? s.column.num_buckets() : s.width;
      tables_.push_back(&this->register_module(
          s.column.name(), std::make_unique<detail::ColumnTable<T>>("weights", Tensor<T>::zeros({rows, units}))));
    }
    bias_ = this->register_parameter("bias_weights", Tensor<T>::zeros({units}));
  }

  /// x [B, input_width] (the packed features of a linear layout) -> [B, units].
  template <Expression X>
  Var<T> forward(const X& x_expr) {
    auto x = detail::checked_packed<T>(x_expr, features_, "LinearModel");
    Tensor<float> host;
    Var<T> sum;
    const auto& slots = features_.slots();
    for (size_t k = 0; k < slots.size(); ++k) {
      const Features::Slot& s = slots[k];
      Var<T> part;
      if (s.packing == Packing::values) {
        part = to_var(matmul(slice(x, {0, s.offset}, {-1, s.width}), tables_[k]->weights()));
      } else {
        if (!host.defined()) host = detail::host_packed(x);
        const SparseTensor<int64_t> ids = detail::packed_ids(host, s.offset, s.width, s.column.num_buckets(), s.column.name());
        part = to_var(embedding_lookup_sparse(tables_[k]->weights(), ids, Combiner::sum));
      }
      sum = k == 0 ? part : to_var(sum + part);
    }
    return to_var(sum + bias_);
  }

  const Features& features() const { return features_; }
  int64_t units() const { return units_; }
  /// The weights of column `name` ([width or num_buckets, units]) and the bias [units].
  Var<T> weights(std::string_view name) const {
    const auto& slots = features_.slots();
    for (size_t k = 0; k < slots.size(); ++k)
      if (slots[k].column.name() == name) return tables_[k]->weights();
    gradus::detail::throw_error<value_error>({"LinearModel: no column '", name, "'"});
  }
  Var<T> bias() const { return bias_; }

 private:
  Features features_;
  int64_t units_;
  std::vector<detail::ColumnTable<T>*> tables_;
  Var<T> bias_;
};

}  // namespace gradus::feature_column

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::feature_column::detail {
GRADUS_INLINE SparseTensor<int64_t> packed_ids(const Tensor<float>& packed, int64_t offset, int64_t width,
                                               int64_t buckets, const std::string& column) {
  const int64_t rows = packed.shape()[0], stride = packed.shape()[1];
  int64_t nnz = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < width; ++j) nnz += packed.data()[r * stride + offset + j] >= 0;
  SparseTensor<int64_t> sp{Tensor<int64_t>(Shape{nnz, 2}), Tensor<int64_t>(Shape{nnz}), Shape{rows, width}};
  int64_t i = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < width; ++j) {
      const float v = packed.data()[r * stride + offset + j];
      if (!(v >= 0)) continue;
      const auto id = int64_t(v);
      GRADUS_CHECK(value_error, float(id) == v && id < buckets, "feature column '", column, "': packed id ", v,
                   " of example ", r, " is not an id in [0, ", buckets, ")");
      sp.indices.data()[2 * i] = r, sp.indices.data()[2 * i + 1] = j, sp.values.data()[i] = id;
      ++i;
    }
  return sp;
}
}  // namespace gradus::feature_column::detail
#endif  // GRADUS_DEFINE_COMPILED
