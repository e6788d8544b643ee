// gradus/estimator/feature_columns.hpp — feature columns (tf.feature_column): how the raw fields of
// a batch — numbers, strings, ids, as a CSV file or parsed tf.train.Examples give them — become
// the dense input of a model.
//
// A column reads one field of a batch (a gd::data::Example whose fields are [B] or [B, k] tensors,
// or a list of B strings):
//   numeric_column                   the numbers as they are (shape, default, normalizer);
//   bucketized_column                a numeric column's values by the ranges of `boundaries`;
//   categorical_column_with_*        ids: by a vocabulary list or file (with out-of-vocabulary
//                                    buckets), by hashing (TensorFlow's Fingerprint64, so a string
//                                    lands in TensorFlow's bucket), or the integer itself (identity);
//   indicator_column                 a categorical column as a multi-hot vector;
//   embedding_column                 a categorical column through a trainable embedding table,
//                                    its ids combined by sum, mean or sqrtn.
// A missing value — an empty string, an id of -1 — gives no id, as in TensorFlow.
//
// `Features` lays a list of columns out, sorted by column name as TensorFlow's input layer does,
// and `transform(batch)` packs each batch into one float tensor [B, input_width]: the values of
// the numeric, bucketized (one-hot) and indicator (multi-hot) columns, and for the columns that
// go through a table (embedding columns, and categorical ones in a linear model) their ids as
// float slots (-1 for none; ids are checked to stay below 2^24, where float holds every integer).
// So the pipeline does the string work once, on its threads, and the model receives a plain tensor
// that `fit`, `evaluate` and `predict` move to its device as any other: DenseFeatures and
// LinearModel (estimator/dense_features.hpp) turn the packed tensor into the model's input.
//
//   namespace fc = gd::feature_column;
//   fc::Features f({fc::numeric_column("age"),
//                   fc::bucketized_column(fc::numeric_column("age"), {18, 30, 50}),
//                   fc::indicator_column(fc::categorical_column_with_vocabulary_list("edu", {"hs", "ba", "ms"})),
//                   fc::embedding_column(fc::categorical_column_with_hash_bucket("job", 100), 8)});
//   auto train = gd::data::csv({"census.csv"}, csv).batch(64).map(f.input_fn("income"));   // (x, y)
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "gradus/core/compiled.hpp"
#include "gradus/core/error.hpp"
#include "gradus/core/shape.hpp"
#include "gradus/core/tensor.hpp"
#include "gradus/data/example.hpp"
#include "gradus/detail/fingerprint.hpp"
#include "gradus/init/initializers.hpp"
#include "gradus/io/file.hpp"
#include "gradus/ops/sparse.hpp"

namespace gradus::feature_column {

/// What a column is (Column::kind).
enum class Kind { numeric, bucketized, vocabulary, hashed, identity, indicator, embedding };

/// How a column's slots appear in the packed input: values used as they are, or ids (-1: none)
/// that a table turns into values.
enum class Packing { values, ids };

/// The description of one column; built by the functions below, shared by the copies of a Column.
struct ColumnSpec {
  Kind kind = Kind::numeric;
  std::string key;   ///< the field it reads
  std::string name;  ///< TensorFlow's column name: "age", "age_bucketized", "edu_indicator", ...
  // numeric
  Shape shape{1};
  std::optional<double> default_value;
  std::function<double(double)> normalizer;
  // bucketized
  std::vector<double> boundaries;
  // categorical
  bool integer_keys = false;  ///< the vocabulary (or the field) holds int64 ids, not strings
  std::vector<std::string> vocabulary;
  std::vector<int64_t> int_vocabulary;
  std::unordered_map<std::string, int64_t> string_index;
  std::unordered_map<int64_t, int64_t> int_index;
  int64_t num_oov_buckets = 0;
  int64_t default_id = -1;  ///< the id of an out-of-vocabulary or out-of-range value (-1: none)
  int64_t buckets = 0;      ///< hash buckets, identity buckets
  int64_t max_values = 1;   ///< ids per example: a [B, k] field may give up to k
  // indicator and embedding: the categorical column they wrap (bucketized: its numeric source)
  std::shared_ptr<const ColumnSpec> source;
  int64_t dimension = 0;
  Combiner combiner = Combiner::mean;
  init::Initializer initializer;
};

/// A feature column: a shared, immutable description (copies are cheap and equal).
class Column {
 public:
  Column() = default;
  explicit Column(std::shared_ptr<const ColumnSpec> spec) : spec_(std::move(spec)) {}

  const ColumnSpec& spec() const;
  /// The shared description itself (what a wrapping column keeps of the column it wraps).
  const std::shared_ptr<const ColumnSpec>& shared_spec() const {
    spec();  // checks that there is one
    return spec_;
  }
  Kind kind() const { return spec().kind; }
  const std::string& name() const { return spec().name; }
  const std::string& key() const { return spec().key; }
  /// Gives ids: the categorical columns, and a bucketized column (one id per value).
  bool categorical() const;
  /// Gives values a DNN can take: numeric, bucketized, indicator and embedding columns.
  bool dense() const;
  /// The number of distinct ids of a categorical column (vocabulary + oov buckets, hash or
  /// identity buckets, bucketized: (boundaries + 1) * values).
  int64_t num_buckets() const;
  /// The width of the column in a DNN's input: the values, the one-hot or multi-hot buckets, or
  /// the embedding's dimension.
  int64_t output_width() const;

 private:
  std::shared_ptr<const ColumnSpec> spec_;
};

/// Options of a vocabulary column: out-of-vocabulary values hash into num_oov_buckets extra ids
/// after the vocabulary (Fingerprint64 of the value, of its decimal string for an integer), or
/// without them get default_value (-1: no id); max_values is the most ids one example may have.
struct VocabularyOptions {
  int64_t num_oov_buckets = 0;
  int64_t default_value = -1;
  int64_t max_values = 1;
};
/// Options of a vocabulary file column: as VocabularyOptions, and the number of lines to use
/// (-1: all; tf's vocabulary_size).
struct VocabularyFileOptions {
  int64_t vocabulary_size = -1;
  int64_t num_oov_buckets = 0;
  int64_t default_value = -1;
  int64_t max_values = 1;
};
/// Options of an embedding column: how an example's ids combine, and the table's initializer
/// (empty: TensorFlow's truncated normal with stddev 1 / sqrt(dimension)).
struct EmbeddingOptions {
  Combiner combiner = Combiner::mean;
  init::Initializer initializer = {};
};

/// Numbers (tf.feature_column.numeric_column): `shape` values per example (a [B] or [B, shape...]
/// field of float, double or int64), `default_value` where the batch lacks the field (none: an
/// error), `normalizer` applied to each value.
Column numeric_column(std::string key, Shape shape = {1}, std::optional<double> default_value = std::nullopt,
                      std::function<double(double)> normalizer = {});
/// A numeric column's values by range (tf.feature_column.bucketized_column): value v falls in
/// bucket i when boundaries[i-1] <= v < boundaries[i] (sorted ascending), len + 1 buckets.
Column bucketized_column(const Column& numeric, std::vector<double> boundaries);
/// Strings to ids by their position in `vocabulary` (tf's categorical_column_with_vocabulary_list).
Column categorical_column_with_vocabulary_list(std::string key, std::vector<std::string> vocabulary,
                                               const VocabularyOptions& opts = {});
/// int64 values to ids by their position in `vocabulary`.
Column categorical_column_with_vocabulary_list(std::string key, std::vector<int64_t> vocabulary,
                                               const VocabularyOptions& opts = {});
/// Strings to ids by the line they are on in a text file (one entry per line; io_error if unreadable).
Column categorical_column_with_vocabulary_file(std::string key, const std::filesystem::path& file,
                                               const VocabularyFileOptions& opts = {});
/// Strings (or int64s, by their decimal string) to Fingerprint64(value) % hash_bucket_size
/// (tf's categorical_column_with_hash_bucket; the same bucket as TensorFlow's).
Column categorical_column_with_hash_bucket(std::string key, int64_t hash_bucket_size, int64_t max_values = 1);
/// int64 values that are ids already, in [0, num_buckets); others get default_value (none: an error).
Column categorical_column_with_identity(std::string key, int64_t num_buckets,
                                        std::optional<int64_t> default_value = std::nullopt, int64_t max_values = 1);
/// A categorical column as a multi-hot vector of num_buckets counts (tf's indicator_column).
Column indicator_column(const Column& categorical);
/// A categorical column through a trainable [num_buckets, dimension] table (tf's embedding_column).
Column embedding_column(const Column& categorical, int64_t dimension, EmbeddingOptions opts = {});

/// A list of columns laid out for packing (see the top of this file): sorted by name, each with
/// its slots in the packed input.
class Features {
 public:
  /// One column's place in the packed input.
  struct Slot {
    Column column;
    Packing packing;
    int64_t offset;  ///< first slot in the packed row
    int64_t width;   ///< slots (values, or id slots)
  };

  Features() = default;
  /// `linear`: a linear model's layout, where categorical columns (bucketized ones included) are
  /// packed as ids for its weight tables; otherwise a DNN's, where every column must be dense.
  explicit Features(std::vector<Column> columns, bool linear = false);

  const std::vector<Slot>& slots() const { return slots_; }
  int64_t input_width() const { return width_; }
  /// The packed input of a batch [B, input_width]; value_error naming the column and the field
  /// when the batch does not fit.
  Tensor<float> transform(const data::Example& batch) const;
  /// A Dataset map function: a batch -> (x = transform(batch), y = its field `label_key`; string
  /// labels become their index in `label_vocabulary`).
  std::function<data::Example(data::Example)> input_fn(std::string label_key,
                                                       std::vector<std::string> label_vocabulary = {}) const;

 private:
  std::vector<Slot> slots_;
  int64_t width_ = 0;
};

}  // namespace gradus::feature_column

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>

namespace gradus::feature_column {

namespace detail {

/// The largest id a packed float slot holds exactly.
inline constexpr int64_t kMaxPackedId = int64_t(1) << 24;

inline std::shared_ptr<ColumnSpec> new_spec(Kind kind, std::string key, std::string name) {
  auto s = std::make_shared<ColumnSpec>();
  s->kind = kind, s->key = std::move(key), s->name = std::move(name);
  return s;
}

inline void check_key(const std::string& key, const char* who) {
  GRADUS_CHECK(value_error, !key.empty(), who, ": the key (the field to read) is empty");
}

/// The values per example of a numeric column.
inline int64_t numeric_values(const ColumnSpec& s) { return s.shape.numel(); }

/// The field `key` of a batch, or null when the batch lacks it.
inline const data::Value* find_field(const data::Example& b, const std::string& key) {
  return b.has(key) ? &b[std::string_view(key)] : nullptr;
}

/// Field `key` as numbers [rows, per] in double (rows: the batch size), from a float, double or
/// int64 tensor [B] or [B, ...] with `per` values per example.
inline std::vector<double> numbers(const data::Value& v, const ColumnSpec& c, int64_t per, int64_t& rows) {
  std::vector<double> out;
  std::visit(
      [&](const auto& t) {
        using V = std::decay_t<decltype(t)>;
        if constexpr (std::is_same_v<V, std::string> || std::is_same_v<V, data::Strings>) {
          ::gradus::detail::throw_error<value_error>(
              {"feature column '", c.name, "': field '", c.key,
               "' holds strings; a numeric column reads float, double or int64 tensors"});
        } else {
          const auto host = t.device() == gradus::cpu ? t : t.to(gradus::cpu);
          GRADUS_CHECK(value_error, host.rank() >= 1, "feature column '", c.name, "': field '", c.key,
                       "' is a scalar; feature columns read batches [B, ...] (map after .batch(n))");
          const int64_t b = host.shape()[0];
          GRADUS_CHECK(value_error, b == 0 || host.size() == b * per, "feature column '", c.name, "': field '", c.key,
                       "' has shape ", host.shape(), ", expected ", per, " values per example (shape ", c.shape, ")");
          rows = b;
          out.resize(size_t(host.size()));
          for (int64_t i = 0; i < host.size(); ++i) out[size_t(i)] = double(host.data()[i]);
        }
      },
      v);
  return out;
}

/// The bucket of v among sorted boundaries: how many of them are <= v.
inline int64_t bucket_of(const std::vector<double>& boundaries, double v) {
  return int64_t(std::upper_bound(boundaries.begin(), boundaries.end(), v) - boundaries.begin());
}

/// The values of a numeric column for a batch of `rows` (rows < 0: taken from the field).
inline std::vector<double> numeric_rows(const data::Example& b, const ColumnSpec& c, int64_t& rows) {
  const int64_t per = numeric_values(c);
  std::vector<double> v;
  if (const data::Value* f = find_field(b, c.key)) {
    int64_t got = 0;
    v = numbers(*f, c, per, got);
    GRADUS_CHECK(value_error, rows < 0 || got == rows, "feature column '", c.name, "': field '", c.key, "' has ", got,
                 " examples, the batch ", rows);
    rows = got;
  } else {
    GRADUS_CHECK(value_error, c.default_value.has_value(), "feature column '", c.name, "': the batch has no field '",
                 c.key, "' and the column has no default_value (fields: ", b, ")");
    GRADUS_CHECK(value_error, rows >= 0, "feature column '", c.name, "': the batch has no field '", c.key,
                 "' and no other field gives its size");
    v.assign(size_t(rows * per), *c.default_value);
  }
  if (c.normalizer)
    for (double& x : v) x = c.normalizer(x);
  return v;
}

/// The id of one string value of a categorical column (-1: none).
inline int64_t string_id(const ColumnSpec& c, const std::string& s) {
  if (s.empty()) return -1;  // missing, as TensorFlow's default for strings
  switch (c.kind) {
    case Kind::hashed: return int64_t(::gradus::detail::fingerprint64(s) % uint64_t(c.buckets));
    case Kind::vocabulary: {
      GRADUS_CHECK(value_error, !c.integer_keys, "feature column '", c.name, "': field '", c.key,
                   "' holds strings; the vocabulary holds int64 values");
      const auto it = c.string_index.find(s);
      if (it != c.string_index.end()) return it->second;
      if (c.num_oov_buckets > 0)
        return int64_t(c.vocabulary.size()) + int64_t(::gradus::detail::fingerprint64(s) % uint64_t(c.num_oov_buckets));
      return c.default_id;
    }
    default:
      ::gradus::detail::throw_error<value_error>(
          {"feature column '", c.name, "': field '", c.key, "' holds strings; ",
           c.kind == Kind::identity ? "an identity column reads int64 ids" : "it reads numbers"});
  }
}

/// Fingerprint64 of an int64 by its decimal string, as TensorFlow hashes integer ids.
inline uint64_t int_fingerprint(int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return ::gradus::detail::fingerprint64(std::string_view(buf, size_t(r.ptr - buf)));
}

/// The id of one int64 value of a categorical column (-1 is missing: none).
inline int64_t int_id(const ColumnSpec& c, int64_t v) {
  if (v == -1) return -1;
  switch (c.kind) {
    case Kind::hashed: return int64_t(int_fingerprint(v) % uint64_t(c.buckets));
    case Kind::identity:
      if (v >= 0 && v < c.buckets) return v;
      GRADUS_CHECK(value_error, c.default_id >= 0, "feature column '", c.name, "': id ", v, " of field '", c.key,
                   "' is outside [0, ", c.buckets, ") and the column has no default_value");
      return c.default_id;
    case Kind::vocabulary: {
      GRADUS_CHECK(value_error, c.integer_keys, "feature column '", c.name, "': field '", c.key,
                   "' holds int64 values; the vocabulary holds strings");
      const auto it = c.int_index.find(v);
      if (it != c.int_index.end()) return it->second;
      if (c.num_oov_buckets > 0)
        return int64_t(c.int_vocabulary.size()) + int64_t(int_fingerprint(v) % uint64_t(c.num_oov_buckets));
      return c.default_id;
    }
    default: return -1;
  }
}

/// The ids of a categorical column for each example: [rows, max_values], -1 for none.
inline std::vector<int64_t> category_ids(const data::Example& b, const ColumnSpec& c, int64_t& rows,
                                         int64_t& per_row) {
  if (c.kind == Kind::bucketized) {  // one id per value: bucket + value index * (boundaries + 1)
    const ColumnSpec& num = *c.source;
    const std::vector<double> v = numeric_rows(b, num, rows);
    per_row = numeric_values(num);
    const auto nb = int64_t(c.boundaries.size()) + 1;
    std::vector<int64_t> ids(v.size());
    for (size_t i = 0; i < v.size(); ++i) ids[i] = bucket_of(c.boundaries, v[i]) + int64_t(i % size_t(per_row)) * nb;
    return ids;
  }
  per_row = c.max_values;
  const data::Value* f = find_field(b, c.key);
  GRADUS_CHECK(value_error, f != nullptr, "feature column '", c.name, "': the batch has no field '", c.key,
               "' (fields: ", b, ")");
  std::vector<int64_t> ids;
  auto set_rows = [&](int64_t got) {
    GRADUS_CHECK(value_error, rows < 0 || got == rows, "feature column '", c.name, "': field '", c.key, "' has ", got,
                 " examples, the batch ", rows);
    rows = got;
    ids.assign(size_t(rows * per_row), -1);
  };
  if (const auto* strs = std::get_if<data::Strings>(f)) {
    set_rows(int64_t(strs->size()));
    for (int64_t r = 0; r < rows; ++r) ids[size_t(r * per_row)] = string_id(c, (*strs)[size_t(r)]);
  } else if (const auto* t = std::get_if<Tensor<int64_t>>(f)) {
    const Tensor<int64_t> host = t->device() == gradus::cpu ? *t : t->to(gradus::cpu);
    GRADUS_CHECK(value_error, host.rank() == 1 || host.rank() == 2, "feature column '", c.name, "': field '", c.key,
                 "' has shape ", host.shape(), "; a categorical column reads [B] or [B, k] ids (map after .batch(n))");
    const int64_t k = host.rank() == 2 ? host.shape()[1] : 1;
    GRADUS_CHECK(value_error, k <= per_row, "feature column '", c.name, "': field '", c.key, "' has ", k,
                 " values per example, the column takes at most ", per_row, " (max_values)");
    set_rows(host.shape()[0]);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < k; ++j) ids[size_t(r * per_row + j)] = int_id(c, host.data()[r * k + j]);
  } else {
    ::gradus::detail::throw_error<value_error>(
        {"feature column '", c.name, "': field '", c.key, "' is ", data::describe(*f),
         "; a categorical column reads a list of strings or an int64 tensor [B] or [B, k]"});
  }
  return ids;
}

inline const ColumnSpec& categorical_source(const Column& c, const char* who) {
  GRADUS_CHECK(value_error, c.categorical(), who, ": column '", c.name(), "' is not categorical");
  return c.spec();
}

}  // namespace detail

GRADUS_INLINE const ColumnSpec& Column::spec() const {
  GRADUS_CHECK(value_error, spec_ != nullptr, "feature column: an empty Column (default-constructed)");
  return *spec_;
}

GRADUS_INLINE bool Column::categorical() const {
  const Kind k = kind();
  return k == Kind::vocabulary || k == Kind::hashed || k == Kind::identity || k == Kind::bucketized;
}

GRADUS_INLINE bool Column::dense() const {
  const Kind k = kind();
  return k == Kind::numeric || k == Kind::bucketized || k == Kind::indicator || k == Kind::embedding;
}

GRADUS_INLINE int64_t Column::num_buckets() const {
  const ColumnSpec& s = spec();
  switch (s.kind) {
    case Kind::vocabulary:
      return int64_t(s.integer_keys ? s.int_vocabulary.size() : s.vocabulary.size()) + s.num_oov_buckets;
    case Kind::hashed:
    case Kind::identity: return s.buckets;
    case Kind::bucketized: return (int64_t(s.boundaries.size()) + 1) * detail::numeric_values(*s.source);
    default:
      ::gradus::detail::throw_error<value_error>(
          {"feature column '", s.name, "' is not categorical: it has no buckets"});
  }
}

GRADUS_INLINE int64_t Column::output_width() const {
  const ColumnSpec& s = spec();
  switch (s.kind) {
    case Kind::numeric: return detail::numeric_values(s);
    case Kind::bucketized: return num_buckets();
    case Kind::indicator: return Column(s.source).num_buckets();
    case Kind::embedding: return s.dimension;
    default: return num_buckets();
  }
}

GRADUS_INLINE Column numeric_column(std::string key, Shape shape, std::optional<double> default_value,
                                    std::function<double(double)> normalizer) {
  detail::check_key(key, "numeric_column");
  GRADUS_CHECK(value_error, shape.numel() >= 1, "numeric_column '", key, "': shape ", shape,
               " must hold at least one value");
  auto s = detail::new_spec(Kind::numeric, key, key);
  s->shape = shape, s->default_value = default_value, s->normalizer = std::move(normalizer);
  return Column(std::move(s));
}

GRADUS_INLINE Column bucketized_column(const Column& numeric, std::vector<double> boundaries) {
  GRADUS_CHECK(value_error, numeric.kind() == Kind::numeric, "bucketized_column: the source '", numeric.name(),
               "' must be a numeric_column");
  GRADUS_CHECK(value_error, !boundaries.empty(), "bucketized_column '", numeric.name(), "': no boundaries");
  for (size_t i = 1; i < boundaries.size(); ++i)
    GRADUS_CHECK(value_error, boundaries[i - 1] < boundaries[i], "bucketized_column '", numeric.name(),
                 "': boundaries must be sorted ascending without repeats, got ", boundaries[i - 1], " before ",
                 boundaries[i]);
  auto s = detail::new_spec(Kind::bucketized, numeric.key(), numeric.name() + "_bucketized");
  s->boundaries = std::move(boundaries);
  s->source = numeric.shared_spec();
  s->max_values = detail::numeric_values(numeric.spec());
  return Column(std::move(s));
}

namespace detail {
inline void check_vocabulary_options(const std::string& key, int64_t size, int64_t oov, int64_t dflt, int64_t max_values) {
  GRADUS_CHECK(value_error, size >= 1, "categorical vocabulary column '", key, "': the vocabulary is empty");
  GRADUS_CHECK(value_error, oov >= 0, "categorical vocabulary column '", key, "': num_oov_buckets must be >= 0, got ",
               oov);
  GRADUS_CHECK(value_error, oov == 0 || dflt == -1, "categorical vocabulary column '", key,
               "': give num_oov_buckets or default_value, not both (TensorFlow's rule)");
  GRADUS_CHECK(value_error, dflt >= -1 && dflt < size, "categorical vocabulary column '", key, "': default_value ",
               dflt, " must be -1 or an id in [0, ", size, ")");
  GRADUS_CHECK(value_error, max_values >= 1, "categorical column '", key, "': max_values must be >= 1, got ",
               max_values);
}
}  // namespace detail

GRADUS_INLINE Column categorical_column_with_vocabulary_list(std::string key, std::vector<std::string> vocabulary,
                                                             const VocabularyOptions& o) {
  detail::check_key(key, "categorical_column_with_vocabulary_list");
  detail::check_vocabulary_options(key, int64_t(vocabulary.size()), o.num_oov_buckets, o.default_value, o.max_values);
  auto s = detail::new_spec(Kind::vocabulary, key, key);
  for (size_t i = 0; i < vocabulary.size(); ++i) {
    GRADUS_CHECK(value_error, s->string_index.emplace(vocabulary[i], int64_t(i)).second,
                 "categorical_column_with_vocabulary_list '", key, "': '", vocabulary[i], "' is in the vocabulary twice");
  }
  s->vocabulary = std::move(vocabulary);
  s->num_oov_buckets = o.num_oov_buckets, s->default_id = o.default_value, s->max_values = o.max_values;
  return Column(std::move(s));
}

GRADUS_INLINE Column categorical_column_with_vocabulary_list(std::string key, std::vector<int64_t> vocabulary,
                                                             const VocabularyOptions& o) {
  detail::check_key(key, "categorical_column_with_vocabulary_list");
  detail::check_vocabulary_options(key, int64_t(vocabulary.size()), o.num_oov_buckets, o.default_value, o.max_values);
  auto s = detail::new_spec(Kind::vocabulary, key, key);
  s->integer_keys = true;
  for (size_t i = 0; i < vocabulary.size(); ++i)
    GRADUS_CHECK(value_error, s->int_index.emplace(vocabulary[i], int64_t(i)).second,
                 "categorical_column_with_vocabulary_list '", key, "': ", vocabulary[i], " is in the vocabulary twice");
  s->int_vocabulary = std::move(vocabulary);
  s->num_oov_buckets = o.num_oov_buckets, s->default_id = o.default_value, s->max_values = o.max_values;
  return Column(std::move(s));
}

GRADUS_INLINE Column categorical_column_with_vocabulary_file(std::string key, const std::filesystem::path& file,
                                                             const VocabularyFileOptions& o) {
  const std::string text = io::read_file(file, "categorical_column_with_vocabulary_file");
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    words.push_back(line);
  }
  GRADUS_CHECK(value_error, o.vocabulary_size == -1 || (o.vocabulary_size >= 1 && o.vocabulary_size <= int64_t(words.size())),
               "categorical_column_with_vocabulary_file '", key, "': vocabulary_size ", o.vocabulary_size, " for a file of ",
               words.size(), " lines (", file.string(), ")");
  if (o.vocabulary_size > 0) words.resize(size_t(o.vocabulary_size));
  return categorical_column_with_vocabulary_list(std::move(key), std::move(words),
                                                 {o.num_oov_buckets, o.default_value, o.max_values});
}

GRADUS_INLINE Column categorical_column_with_hash_bucket(std::string key, int64_t hash_bucket_size, int64_t max_values) {
  detail::check_key(key, "categorical_column_with_hash_bucket");
  GRADUS_CHECK(value_error, hash_bucket_size >= 1, "categorical_column_with_hash_bucket '", key,
               "': hash_bucket_size must be >= 1, got ", hash_bucket_size);
  GRADUS_CHECK(value_error, max_values >= 1, "categorical_column_with_hash_bucket '", key,
               "': max_values must be >= 1, got ", max_values);
  auto s = detail::new_spec(Kind::hashed, key, key);
  s->buckets = hash_bucket_size, s->max_values = max_values;
  return Column(std::move(s));
}

GRADUS_INLINE Column categorical_column_with_identity(std::string key, int64_t num_buckets,
                                                      std::optional<int64_t> default_value, int64_t max_values) {
  detail::check_key(key, "categorical_column_with_identity");
  GRADUS_CHECK(value_error, num_buckets >= 1, "categorical_column_with_identity '", key,
               "': num_buckets must be >= 1, got ", num_buckets);
  GRADUS_CHECK(value_error, !default_value || (*default_value >= 0 && *default_value < num_buckets),
               "categorical_column_with_identity '", key, "': default_value must be in [0, ", num_buckets, ")");
  GRADUS_CHECK(value_error, max_values >= 1, "categorical_column_with_identity '", key,
               "': max_values must be >= 1, got ", max_values);
  auto s = detail::new_spec(Kind::identity, key, key);
  s->buckets = num_buckets, s->default_id = default_value.value_or(-1), s->max_values = max_values;
  return Column(std::move(s));
}

GRADUS_INLINE Column indicator_column(const Column& categorical) {
  const ColumnSpec& src = detail::categorical_source(categorical, "indicator_column");
  auto s = detail::new_spec(Kind::indicator, src.key, src.name + "_indicator");
  s->source = categorical.shared_spec();
  return Column(std::move(s));
}

GRADUS_INLINE Column embedding_column(const Column& categorical, int64_t dimension, EmbeddingOptions o) {
  const ColumnSpec& src = detail::categorical_source(categorical, "embedding_column");
  GRADUS_CHECK(value_error, dimension >= 1, "embedding_column '", src.name, "': dimension must be >= 1, got ",
               dimension);
  auto s = detail::new_spec(Kind::embedding, src.key, src.name + "_embedding");
  s->source = categorical.shared_spec();
  s->dimension = dimension, s->combiner = o.combiner;
  s->initializer = o.initializer ? std::move(o.initializer)
                                 : init::Initializer(init::truncated_normal{0.0, 1.0 / std::sqrt(double(dimension))});
  return Column(std::move(s));
}

GRADUS_INLINE Features::Features(std::vector<Column> columns, bool linear) {
  GRADUS_CHECK(value_error, !columns.empty(), "Features: no columns");
  std::stable_sort(columns.begin(), columns.end(), [](const Column& a, const Column& b) { return a.name() < b.name(); });
  for (size_t i = 1; i < columns.size(); ++i)
    GRADUS_CHECK(value_error, columns[i - 1].name() != columns[i].name(), "Features: two columns are named '",
                 columns[i].name(), "'");
  for (const Column& c : columns) {
    Slot s{c, Packing::values, width_, 0};
    switch (c.kind()) {
      case Kind::numeric:
      case Kind::indicator: s.width = c.output_width(); break;
      case Kind::bucketized:
        if (linear)
          s.packing = Packing::ids, s.width = c.spec().max_values;
        else
          s.width = c.output_width();
        break;
      case Kind::embedding:
        s.packing = Packing::ids;
        s.width = c.spec().source->max_values;  // a bucketized source: one id per value
        break;
      default:
        GRADUS_CHECK(value_error, linear, "Features: column '", c.name(), "' is categorical; a DNN takes it through "
                     "indicator_column or embedding_column (a linear model takes it as it is)");
        s.packing = Packing::ids, s.width = c.spec().max_values;
    }
    if (s.packing == Packing::ids) {
      const Column src = c.kind() == Kind::embedding ? Column(c.spec().source) : c;
      GRADUS_CHECK(value_error, src.num_buckets() <= detail::kMaxPackedId, "Features: column '", c.name(), "' has ",
                   src.num_buckets(), " buckets; packed ids go up to 2^24 (", detail::kMaxPackedId, ")");
    }
    width_ += s.width;
    slots_.push_back(std::move(s));
  }
}

GRADUS_INLINE Tensor<float> Features::transform(const data::Example& batch) const {
  // every column's values first, then one [B, width] tensor
  int64_t rows = -1;
  std::vector<std::vector<float>> parts(slots_.size());
  for (size_t k = 0; k < slots_.size(); ++k) {
    const Slot& slot = slots_[k];
    const ColumnSpec& c = slot.column.spec();
    std::vector<float>& out = parts[k];
    if (slot.packing == Packing::ids) {
      const ColumnSpec& src = c.kind == Kind::embedding ? *c.source : c;
      int64_t per = 0;
      const std::vector<int64_t> ids = detail::category_ids(batch, src, rows, per);
      out.assign(ids.begin(), ids.end());
      continue;
    }
    switch (c.kind) {
      case Kind::numeric: {
        const std::vector<double> v = detail::numeric_rows(batch, c, rows);
        out.assign(v.begin(), v.end());
        break;
      }
      case Kind::bucketized: {
        const std::vector<double> v = detail::numeric_rows(batch, *c.source, rows);
        out.assign(size_t(rows * slot.width), 0.0f);
        const int64_t per = detail::numeric_values(*c.source), nb = int64_t(c.boundaries.size()) + 1;
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < per; ++j)
            out[size_t(r * slot.width + j * nb + detail::bucket_of(c.boundaries, v[size_t(r * per + j)]))] = 1.0f;
        break;
      }
      case Kind::indicator: {
        int64_t per = 0;
        const std::vector<int64_t> ids = detail::category_ids(batch, *c.source, rows, per);
        out.assign(size_t(rows * slot.width), 0.0f);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < per; ++j)
            if (const int64_t id = ids[size_t(r * per + j)]; id >= 0) out[size_t(r * slot.width + id)] += 1.0f;
        break;
      }
      default: break;
    }
  }
  GRADUS_CHECK(value_error, rows >= 0, "Features::transform: no column found its field in the batch ", batch);
  Tensor<float> x(Shape{rows, width_});
  for (size_t k = 0; k < slots_.size(); ++k) {
    const Slot& slot = slots_[k];
    for (int64_t r = 0; r < rows; ++r)
      std::copy_n(parts[k].data() + r * slot.width, slot.width, x.data() + r * width_ + slot.offset);
  }
  return x;
}

GRADUS_INLINE std::function<data::Example(data::Example)> Features::input_fn(std::string label_key,
                                                                              std::vector<std::string> label_vocabulary) const {
  std::unordered_map<std::string, int64_t> labels;
  for (size_t i = 0; i < label_vocabulary.size(); ++i) labels.emplace(label_vocabulary[i], int64_t(i));
  return [features = *this, label_key = std::move(label_key), labels = std::move(labels)](data::Example batch) {
    Tensor<float> x = features.transform(batch);
    GRADUS_CHECK(value_error, batch.has(label_key), "input_fn: the batch has no label field '", label_key,
                 "' (fields: ", batch, ")");
    const data::Value& y = batch[std::string_view(label_key)];
    if (const auto* strs = std::get_if<data::Strings>(&y)) {
      GRADUS_CHECK(value_error, !labels.empty(), "input_fn: the label field '", label_key,
                   "' holds strings; give a label_vocabulary to turn them into class ids");
      Tensor<int64_t> ids(Shape{int64_t(strs->size())});
      for (size_t i = 0; i < strs->size(); ++i) {
        const auto it = labels.find((*strs)[i]);
        GRADUS_CHECK(value_error, it != labels.end(), "input_fn: label '", (*strs)[i], "' of example ", i,
                     " is not in the label_vocabulary");
        ids.data()[i] = it->second;
      }
      return data::Example::tuple(std::move(x), std::move(ids));
    }
    GRADUS_CHECK(value_error, !std::holds_alternative<std::string>(y), "input_fn: the label field '", label_key,
                 "' is one string; feature columns read batches (map after .batch(n))");
    data::Example out = data::Example::tuple(std::move(x));
    out.add("", y);
    return out;
  };
}

}  // namespace gradus::feature_column
#endif  // GRADUS_DEFINE_COMPILED
