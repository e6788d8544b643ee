// gradus/data/sources.hpp — the sources of a Dataset: tensor slices, ranges, generators and text lines.
// Part of the input pipelines of gradus/data/dataset.hpp (include that one): the Source and
// Stream classes behind Dataset's factory functions and transformations.
#pragma once
#include <glob.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gradus/core/compiled.hpp"
#include "gradus/core/error.hpp"
#include "gradus/core/rng.hpp"
#include "gradus/core/shape.hpp"
#include "gradus/core/tensor.hpp"
#include "gradus/data/example.hpp"
#include "gradus/data/idx.hpp"
#include "gradus/data/pipeline.hpp"
#include "gradus/data/queue.hpp"

namespace gradus::data::detail {

// --- from_tensor_slices --------------------------------------------------------------------------

template <class T>
Tensor<T> row_of(const Tensor<T>& t, int64_t i) {
  Shape s = t.shape();
  s.erase(0);
  Tensor<T> r(s);
  const int64_t n = r.size();
  if (n) std::memcpy(r.data(), t.data() + i * n, size_t(n) * sizeof(T));
  return r;
}

Value slice_value(const Value& v, int64_t i);

class SlicesSource final : public Source {
 public:
  explicit SlicesSource(Example columns);
  GRADUS_INLINE_DECL std::unique_ptr<Stream> open(uint64_t) const override;

 private:
  std::shared_ptr<const Example> cols_;
  int64_t n_ = 0;
};

// --- range, generator, text lines ---------------------------------------------------------------

class RangeSource final : public Source {
 public:
  RangeSource(int64_t b, int64_t e, int64_t s);
  GRADUS_INLINE_DECL std::unique_ptr<Stream> open(uint64_t) const override;

 private:
  int64_t b_, e_, s_;
};

class GeneratorSource final : public Source {
 public:
  using Fn = std::function<std::optional<Example>(int64_t)>;
  explicit GeneratorSource(Fn fn);
  GRADUS_INLINE_DECL std::unique_ptr<Stream> open(uint64_t) const override;

 private:
  std::shared_ptr<const Fn> fn_;
};

void check_readable(const std::string& path, const char* who);

class TextLinesSource final : public Source {
 public:
  explicit TextLinesSource(std::vector<std::string> files);
  GRADUS_INLINE_DECL std::unique_ptr<Stream> open(uint64_t) const override;

 private:
  std::vector<std::string> files_;
};

}  // namespace gradus::data::detail

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::data::detail {
GRADUS_INLINE Value slice_value(const Value& v, int64_t i) {
  if (const auto* s = std::get_if<Strings>(&v)) return (*s)[size_t(i)];
  return std::visit(
      [&](const auto& x) -> Value {
        if constexpr (std::is_same_v<std::decay_t<decltype(x)>, std::string> ||
                      std::is_same_v<std::decay_t<decltype(x)>, Strings>)
          return x;  // unreachable: checked when the source is made
        else
          return row_of(x, i);
      },
      v);
}

GRADUS_INLINE SlicesSource::SlicesSource(Example columns) : cols_(std::make_shared<Example>(std::move(columns))) {
  GRADUS_CHECK(value_error, !cols_->empty(), "from_tensor_slices: no fields");
  for (int f = 0; f < cols_->size(); ++f) {
    const Value& v = (*cols_)[f];
    int64_t rows = 0;
    if (const auto* s = std::get_if<Strings>(&v)) {
      rows = int64_t(s->size());
    } else {
      GRADUS_CHECK(value_error, v.index() < 3, "from_tensor_slices: field ", f,
                   " is a single string; slice a tensor [N, ...] or Strings of N");
      std::visit(
          [&](const auto& t) {
            if constexpr (!std::is_same_v<std::decay_t<decltype(t)>, std::string> &&
                          !std::is_same_v<std::decay_t<decltype(t)>, Strings>) {
              GRADUS_CHECK(value_error, t.defined() && t.rank() >= 1, "from_tensor_slices: field ", f,
                           " must be a tensor of rank >= 1 ([N, ...]), got ", describe(v));
              GRADUS_CHECK(device_error, t.in_host_memory(), "from_tensor_slices: field ", f, " is on ",
                           t.device(), "; pipelines read host memory (copy it with .to(gd::cpu))");
              rows = t.dim(0);
            }
          },
          v);
    }
    if (f == 0) n_ = rows;
    GRADUS_CHECK(shape_error, rows == n_, "from_tensor_slices: fields have different lengths: field 0 has ", n_,
                 " rows, field ", f, " (", describe(v), ") has ", rows);
  }
}

GRADUS_INLINE std::unique_ptr<Stream> SlicesSource::open(uint64_t) const {
  struct S final : Stream {
    std::shared_ptr<const Example> cols;
    int64_t n, i = 0;
    S(std::shared_ptr<const Example> c, int64_t n_) : cols(std::move(c)), n(n_) {}
    std::optional<Example> next() override {
      if (i >= n) return std::nullopt;
      Example e;
      for (const auto& f : cols->fields()) e.fields().push_back({f.name, slice_value(f.value, i)});
      ++i;
      return e;
    }
    int64_t skip(int64_t k) override {
      const int64_t d = std::clamp<int64_t>(n - i, 0, std::max<int64_t>(k, 0));
      i += d;
      return d;
    }
  };
  return std::make_unique<S>(cols_, n_);
}

GRADUS_INLINE RangeSource::RangeSource(int64_t b, int64_t e, int64_t s) : b_(b), e_(e), s_(s) {
  GRADUS_CHECK(value_error, s != 0, "range: step must not be 0");
}

GRADUS_INLINE std::unique_ptr<Stream> RangeSource::open(uint64_t) const {
  struct S final : Stream {
    int64_t v, e, s;
    S(int64_t b, int64_t e_, int64_t s_) : v(b), e(e_), s(s_) {}
    bool more() const { return s > 0 ? v < e : v > e; }
    // The distance to e and the step's size, in unsigned arithmetic: e - v overflows int64 for
    // range(INT64_MIN, INT64_MAX, ...), but never uint64.
    uint64_t span() const { return s > 0 ? uint64_t(e) - uint64_t(v) : uint64_t(v) - uint64_t(e); }
    uint64_t stride() const { return s > 0 ? uint64_t(s) : uint64_t(0) - uint64_t(s); }
    std::optional<Example> next() override {
      if (!more()) return std::nullopt;
      Example out(Tensor<int64_t>::scalar(v));
      v = span() <= stride() ? e : int64_t(uint64_t(v) + uint64_t(s));  // never past e
      return out;
    }
    int64_t skip(int64_t k) override {
      int64_t d = 0;
      if (k > 0 && more()) {
        const uint64_t span = this->span(), step = stride();
        const uint64_t left = span / step + (span % step != 0);
        d = int64_t(std::min<uint64_t>(left, uint64_t(k)));
        v = uint64_t(d) == left ? e : int64_t(uint64_t(v) + uint64_t(d) * uint64_t(s));
      }
      return d;
    }
  };
  return std::make_unique<S>(b_, e_, s_);
}

GRADUS_INLINE GeneratorSource::GeneratorSource(Fn fn) : fn_(std::make_shared<Fn>(std::move(fn))) {
  GRADUS_CHECK(value_error, *fn_, "generator: empty function");
}

GRADUS_INLINE std::unique_ptr<Stream> GeneratorSource::open(uint64_t) const {
  struct S final : Stream {
    std::shared_ptr<const Fn> fn;
    int64_t i = 0;
    bool done = false;
    explicit S(std::shared_ptr<const Fn> f) : fn(std::move(f)) {}
    std::optional<Example> next() override {
      if (done) return std::nullopt;
      std::optional<Example> e = (*fn)(i++);
      done = !e;
      return e;
    }
  };
  return std::make_unique<S>(fn_);
}

GRADUS_INLINE void check_readable(const std::string& path, const char* who) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto st = fs::status(path, ec);
  GRADUS_CHECK(io_error, fs::exists(st), who, ": cannot open '", path, "': no such file");
  GRADUS_CHECK(io_error, !fs::is_directory(st), who, ": cannot open '", path, "': it is a directory");
}

GRADUS_INLINE TextLinesSource::TextLinesSource(std::vector<std::string> files) : files_(std::move(files)) {
  for (const auto& f : files_) check_readable(f, "text_lines");
}

GRADUS_INLINE std::unique_ptr<Stream> TextLinesSource::open(uint64_t) const {
  struct S final : Stream {
    const std::vector<std::string>& files;
    size_t f = 0;
    std::ifstream in;
    bool open = false;
    explicit S(const std::vector<std::string>& fs) : files(fs) {}
    std::optional<Example> next() override {
      for (;;) {
        if (!open) {
          if (f >= files.size()) return std::nullopt;
          check_readable(files[f], "text_lines");
          in = std::ifstream(files[f], std::ios::binary);
          GRADUS_CHECK(io_error, in.is_open(), "text_lines: cannot open '", files[f], "': ", std::strerror(errno));
          open = true;
        }
        std::string line;
        if (std::getline(in, line)) {
          if (!line.empty() && line.back() == '\r') line.pop_back();
          return Example(std::move(line));
        }
        GRADUS_CHECK(io_error, in.eof(), "text_lines: read error in '", files[f], "'");
        in.close();
        open = false;
        ++f;
      }
    }
  };
  return std::make_unique<S>(files_);
}
}  // namespace gradus::data::detail
#endif  // GRADUS_DEFINE_COMPILED
