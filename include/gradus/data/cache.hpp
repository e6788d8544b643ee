// gradus/data/cache.hpp — Dataset::cache: the first epoch recorded in memory or in a file, later epochs
// replayed from it.
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

// --- cache -------------------------------------------------------------------------------------------

/// Replays a finished recording.
class ReplayStream final : public Stream {
 public:
  explicit ReplayStream(std::shared_ptr<const std::vector<Example>> items) : items_(std::move(items)) {}
  GRADUS_INLINE_DECL std::optional<Example> next() override;
  GRADUS_INLINE_DECL int64_t skip(int64_t k) override;

 private:
  std::shared_ptr<const std::vector<Example>> items_;
  size_t i_ = 0;
};

class MemoryCacheSource final : public UnarySource {
 public:
  explicit MemoryCacheSource(std::shared_ptr<const Source> in) : UnarySource(std::move(in)), state_(std::make_shared<State>()) {}
  GRADUS_INLINE_DECL std::unique_ptr<Stream> open(uint64_t key) const override;

 private:
  struct State {
    std::mutex m;
    std::shared_ptr<const std::vector<Example>> items;
  };
  std::shared_ptr<State> state_;
};

// The cache file: "GDCACHE1", then per element a byte 1, u32 field count and the fields (u32
// name length, name, u8 kind 0..4; tensors: u8 rank, i64 dims, the elements; string: u64
// length and bytes; strings: u64 count, then each as a string), then a byte 0 and the u64
// element count. Little-endian as the machine is: a cache belongs to the machine that wrote it.
inline constexpr char kCacheMagic[8] = {'G', 'D', 'C', 'A', 'C', 'H', 'E', '1'};

class CacheWriter {
 public:
  explicit CacheWriter(std::string path);
  ~CacheWriter();
  void write(const Example& e);
  /// Ends the file and renames it to its final name.
  void commit();

 private:
  void put(const void* p, size_t n);
  void put_u8(uint8_t v) { put(&v, 1); }
  void put_u32(uint32_t v) { put(&v, 4); }
  void put_u64(uint64_t v) { put(&v, 8); }
  void put_str(const std::string& s);
  std::string path_, tmp_;
  FILE* f_ = nullptr;
  uint64_t count_ = 0;
};

class CacheReaderStream final : public Stream {
 public:
  explicit CacheReaderStream(std::string path);
  GRADUS_INLINE_DECL ~CacheReaderStream() override;
  GRADUS_INLINE_DECL std::optional<Example> next() override;

 private:
  void need(uint64_t n, const char* what);
  void get(void* p, uint64_t n);
  uint8_t get_u8() {
    uint8_t v;
    get(&v, 1);
    return v;
  }
  uint32_t get_u32() {
    uint32_t v;
    get(&v, 4);
    return v;
  }
  uint64_t get_u64() {
    uint64_t v;
    get(&v, 8);
    return v;
  }
  std::string get_str(uint64_t n);
  template <class T>
  Tensor<T> get_tensor() {
    const uint8_t r = get_u8();
    GRADUS_CHECK(io_error, r <= kMaxRank, "cache: corrupt file '", path_, "': rank ", int(r));
    int64_t dims[kMaxRank];
    get(dims, 8 * uint64_t(r));
    for (int d = 0; d < r; ++d)
      GRADUS_CHECK(io_error, dims[d] >= 0, "cache: corrupt file '", path_, "': negative dimension ", dims[d]);
    const int64_t n = Shape::count(std::span<const int64_t>(dims, r));
    GRADUS_CHECK(io_error, n >= 0 && uint64_t(n) <= left_ / sizeof(T), "cache: corrupt file '", path_,
                 "': a tensor's shape claims more bytes than the file holds");
    Tensor<T> t(Shape(std::span<const int64_t>(dims, r)));
    get(t.data(), uint64_t(n) * sizeof(T));
    return t;
  }
  std::string path_;
  FILE* f_ = nullptr;
  uint64_t left_ = 0, count_ = 0;
  bool done_ = false;
};

class FileCacheSource final : public UnarySource {
 public:
  FileCacheSource(std::shared_ptr<const Source> in, std::string path);
  GRADUS_INLINE_DECL std::unique_ptr<Stream> open(uint64_t key) const override;

 private:
  std::string path_;
};

}  // namespace gradus::data::detail

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::data::detail {
GRADUS_INLINE std::optional<Example> ReplayStream::next() {
  if (i_ >= items_->size()) return std::nullopt;
  return (*items_)[i_++];
}

GRADUS_INLINE int64_t ReplayStream::skip(int64_t k) {
  const size_t d = std::min(items_->size() - i_, size_t(std::max<int64_t>(k, 0)));
  i_ += d;
  return int64_t(d);
}

GRADUS_INLINE std::unique_ptr<Stream> MemoryCacheSource::open(uint64_t key) const {
  {
    std::lock_guard lock(state_->m);
    if (state_->items) return std::make_unique<ReplayStream>(state_->items);
  }
  struct S final : UnaryStream {
    std::shared_ptr<State> state;
    std::vector<Example> seen;
    S(std::unique_ptr<Stream> in, std::shared_ptr<State> st) : UnaryStream(std::move(in)), state(std::move(st)) {}
    std::optional<Example> next() override {
      std::optional<Example> e = in_->next();
      if (e) {
        seen.push_back(*e);
      } else {
        std::lock_guard lock(state->m);
        if (!state->items) state->items = std::make_shared<const std::vector<Example>>(std::move(seen));
        seen.clear();
      }
      return e;
    }
  };
  return std::make_unique<S>(in_->open(key), state_);
}

GRADUS_INLINE CacheWriter::CacheWriter(std::string path) : path_(std::move(path)) {
  static std::atomic<uint64_t> counter{0};
  tmp_ = path_ + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  f_ = std::fopen(tmp_.c_str(), "wb");
  GRADUS_CHECK(io_error, f_, "cache: cannot write '", tmp_, "': ", std::strerror(errno));
  put(kCacheMagic, 8);
}

GRADUS_INLINE CacheWriter::~CacheWriter() {
  if (f_) {
    std::fclose(f_);
    std::remove(tmp_.c_str());
  }
}

GRADUS_INLINE void CacheWriter::write(const Example& e) {
  put_u8(1);
  put_u32(uint32_t(e.size()));
  for (const auto& f : e.fields()) {
    put_u32(uint32_t(f.name.size()));
    put(f.name.data(), f.name.size());
    put_u8(uint8_t(f.value.index()));
    std::visit(
        [&](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, std::string>) {
            put_str(v);
          } else if constexpr (std::is_same_v<V, Strings>) {
            put_u64(v.size());
            for (const auto& s : v) put_str(s);
          } else {
            put_u8(uint8_t(v.rank()));
            for (int64_t d : v.shape()) put(&d, 8);
            put(v.data(), size_t(v.size()) * sizeof(typename V::value_type));
          }
        },
        f.value);
  }
  ++count_;
}

GRADUS_INLINE void CacheWriter::commit() {
  put_u8(0);
  put_u64(count_);
  const bool ok = std::fflush(f_) == 0 && ::fsync(::fileno(f_)) == 0;
  const int err = errno;
  std::fclose(f_);
  f_ = nullptr;
  if (!ok || std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    std::remove(tmp_.c_str());
    gradus::detail::throw_error<io_error>({"cache: cannot write '", path_, "': ", std::strerror(ok ? errno : err)});
  }
}

GRADUS_INLINE void CacheWriter::put(const void* p, size_t n) {
  if (n && std::fwrite(p, 1, n, f_) != n)
    gradus::detail::throw_error<io_error>({"cache: cannot write '", tmp_, "': ", std::strerror(errno)});
}

GRADUS_INLINE void CacheWriter::put_str(const std::string& s) {
  put_u64(s.size());
  put(s.data(), s.size());
}

GRADUS_INLINE CacheReaderStream::CacheReaderStream(std::string path) : path_(std::move(path)) {
  f_ = std::fopen(path_.c_str(), "rb");
  GRADUS_CHECK(io_error, f_, "cache: cannot open '", path_, "': ", std::strerror(errno));
  std::error_code ec;
  left_ = uint64_t(std::filesystem::file_size(path_, ec));
  char magic[8];
  get(magic, 8);
  GRADUS_CHECK(io_error, std::memcmp(magic, kCacheMagic, 8) == 0, "cache: '", path_, "' is not a gradus cache file");
}

GRADUS_INLINE CacheReaderStream::~CacheReaderStream() {
  if (f_) std::fclose(f_);
}

GRADUS_INLINE std::optional<Example> CacheReaderStream::next() {
  if (done_) return std::nullopt;
  if (get_u8() == 0) {
    const uint64_t n = get_u64();
    GRADUS_CHECK(io_error, n == count_ && left_ == 0, "cache: corrupt file '", path_, "': it ends with count ", n,
                 " after ", count_, " elements", left_ ? " and has trailing bytes" : "");
    done_ = true;
    return std::nullopt;
  }
  Example e;
  const uint32_t nf = get_u32();
  for (uint32_t i = 0; i < nf; ++i) {
    std::string name = get_str(get_u32());
    const uint8_t kind = get_u8();
    Value v;
    switch (kind) {
      case 0: v = get_tensor<float>(); break;
      case 1: v = get_tensor<double>(); break;
      case 2: v = get_tensor<int64_t>(); break;
      case 3: v = get_str(get_u64()); break;
      case 4: {
        const uint64_t n = get_u64();
        need(n > left_ / 8 ? UINT64_MAX : n * 8, "a string list");
        Strings s;
        for (uint64_t k = 0; k < n; ++k) s.push_back(get_str(get_u64()));
        v = std::move(s);
        break;
      }
      default: gradus::detail::throw_error<io_error>({"cache: corrupt file '", path_, "': field kind ", int(kind)});
    }
    e.fields().push_back({std::move(name), std::move(v)});
  }
  ++count_;
  return e;
}

GRADUS_INLINE void CacheReaderStream::need(uint64_t n, const char* what) {
  GRADUS_CHECK(io_error, n <= left_, "cache: truncated file '", path_, "': ", what, " needs ", n, " bytes, ", left_,
               " are left");
}

GRADUS_INLINE void CacheReaderStream::get(void* p, uint64_t n) {
  need(n, "the next field");
  if (n && std::fread(p, 1, size_t(n), f_) != n)
    gradus::detail::throw_error<io_error>({"cache: read error in '", path_, "'"});
  left_ -= n;
}

GRADUS_INLINE std::string CacheReaderStream::get_str(uint64_t n) {
  need(n, "a string");
  std::string s(size_t(n), '\0');
  get(s.data(), n);
  return s;
}

GRADUS_INLINE FileCacheSource::FileCacheSource(std::shared_ptr<const Source> in, std::string path)
    : UnarySource(std::move(in)), path_(std::move(path)) {
  GRADUS_CHECK(value_error, !path_.empty(), "cache: empty file name (use cache() for memory)");
}

GRADUS_INLINE std::unique_ptr<Stream> FileCacheSource::open(uint64_t key) const {
  std::error_code ec;
  if (std::filesystem::exists(path_, ec)) return std::make_unique<CacheReaderStream>(path_);
  struct S final : UnaryStream {
    CacheWriter w;
    bool committed = false;
    S(std::unique_ptr<Stream> in, const std::string& p) : UnaryStream(std::move(in)), w(p) {}
    std::optional<Example> next() override {
      std::optional<Example> e = in_->next();
      if (e)
        w.write(*e);
      else if (!committed) {
        committed = true;
        w.commit();
      }
      return e;
    }
  };
  return std::make_unique<S>(in_->open(key), path_);
}
}  // namespace gradus::data::detail
#endif  // GRADUS_DEFINE_COMPILED
