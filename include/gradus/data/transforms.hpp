// gradus/data/transforms.hpp — the transformations of a Dataset that run on the consumer's thread: zip, map,
// filter, shuffle, repeat, skip, take, shard, batch, padded_batch and interleave.
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
#include "gradus/data/order.hpp"
#include "gradus/data/pipeline.hpp"
#include "gradus/data/queue.hpp"

namespace gradus::data::detail {

// --- zip, map, filter, parallel_map ---------------------------------------------------------------

class ZipSource final : public Source {
 public:
  explicit ZipSource(std::vector<std::shared_ptr<const Source>> in);
  GRADUS_INLINE_DECL std::unique_ptr<Stream> open(uint64_t key) const override;

 private:
  std::vector<std::shared_ptr<const Source>> in_;
};

class MapSource final : public UnarySource {
 public:
  MapSource(std::shared_ptr<const Source> in, Dataset::MapFn fn)
      : UnarySource(std::move(in)), fn_(std::make_shared<Dataset::MapFn>(std::move(fn))) {}
  GRADUS_INLINE_DECL std::unique_ptr<Stream> open(uint64_t key) const override;

 private:
  std::shared_ptr<const Dataset::MapFn> fn_;
};

class FilterSource final : public UnarySource {
 public:
  FilterSource(std::shared_ptr<const Source> in, Dataset::Predicate p)
      : UnarySource(std::move(in)), pred_(std::make_shared<Dataset::Predicate>(std::move(p))) {}
  GRADUS_INLINE_DECL std::unique_ptr<Stream> open(uint64_t key) const override;

 private:
  std::shared_ptr<const Dataset::Predicate> pred_;
};

// --- shuffle, repeat, skip, take, shard ---------------------------------------------------------

class ShuffleSource final : public UnarySource {
 public:
  ShuffleSource(std::shared_ptr<const Source> in, int64_t buffer, uint64_t seed);
  GRADUS_INLINE_DECL std::unique_ptr<Stream> open(uint64_t key) const override;

 private:
  int64_t buffer_;
  uint64_t seed_;
};

class RepeatSource final : public UnarySource {
 public:
  RepeatSource(std::shared_ptr<const Source> in, int64_t count) : UnarySource(std::move(in)), count_(count) {}
  GRADUS_INLINE_DECL std::unique_ptr<Stream> open(uint64_t key) const override;

 private:
  int64_t count_;
};

class SkipTakeSource final : public UnarySource {
 public:
  enum Kind { kSkip, kTake };
  SkipTakeSource(std::shared_ptr<const Source> in, Kind kind, int64_t n) : UnarySource(std::move(in)), kind_(kind), n_(n) {}
  GRADUS_INLINE_DECL std::unique_ptr<Stream> open(uint64_t key) const override;

 private:
  Kind kind_;
  int64_t n_;
};

class ShardSource final : public UnarySource {
 public:
  ShardSource(std::shared_ptr<const Source> in, int64_t num, int64_t index)
      : UnarySource(std::move(in)), shard_(Shard::checked(num, index, "shard")) {}
  GRADUS_INLINE_DECL std::unique_ptr<Stream> open(uint64_t key) const override;

 private:
  Shard shard_;
};

// --- batch, padded_batch ---------------------------------------------------------------------------

/// Copies `src` (shape s) into the leading corner of `dst` (shape t, t[d] >= s[d], same rank).
template <class T>
void copy_padded(const T* src, const Shape& s, T* dst, const Shape& t) {
  const int r = s.rank();
  if (r == 0) {
    *dst = *src;
    return;
  }
  if (s.numel() == 0) return;
  const int64_t inner = s[r - 1];
  const int64_t rows = s.numel() / inner;
  int64_t idx[kMaxRank] = {};
  for (int64_t row = 0; row < rows; ++row) {
    int64_t off = 0;
    for (int d = 0; d < r - 1; ++d) off = off * t[d] + idx[d];
    std::memcpy(dst + off * t[r - 1], src + row * inner, size_t(inner) * sizeof(T));
    for (int d = r - 2; d >= 0; --d) {  // next row index, odometer order
      if (++idx[d] < s[d]) break;
      idx[d] = 0;
    }
  }
}

/// Stacks field `f` of `items` into one value; `pad` null for batch, else padded_batch's options.
template <class T>
Value stack_tensors(const std::vector<Example>& items, int f, const PaddedBatchOptions* pad, const char* who) {
  const Tensor<T>& first = std::get<Tensor<T>>(items[0][f]);
  const std::string field = items[0].name(f).empty() ? std::to_string(f) : "'" + items[0].name(f) + "'";
  Shape target = first.shape();
  for (size_t i = 1; i < items.size(); ++i) {
    const Shape& s = std::get<Tensor<T>>(items[i][f]).shape();
    if (!pad) {
      GRADUS_CHECK(shape_error, s == first.shape(), who, ": field ", field, " of element ", i, " in the batch has shape ",
                   s, " but element 0's has ", first.shape(), " (padded_batch pads to a common shape)");
      continue;
    }
    GRADUS_CHECK(shape_error, s.rank() == target.rank(), who, ": field ", field, " of element ", i, " has rank ",
                 s.rank(), " ", s, " but element 0's has rank ", target.rank(), " ", first.shape());
    for (int d = 0; d < s.rank(); ++d) target[d] = std::max(target[d], s[d]);
  }
  if (pad && size_t(f) < pad->padded_shapes.size()) {
    const std::vector<int64_t>& want = pad->padded_shapes[size_t(f)];
    GRADUS_CHECK(shape_error, int(want.size()) == target.rank(), who, ": padded shape of field ", field, " has rank ",
                 want.size(), " but the field has rank ", target.rank(), " (", first.shape(), ")");
    for (int d = 0; d < target.rank(); ++d) {
      if (want[size_t(d)] < 0) continue;
      GRADUS_CHECK(shape_error, target[d] <= want[size_t(d)], who, ": field ", field, " has dimension ", d, " of ",
                   target[d], ", longer than its padded shape allows (", want[size_t(d)], ")");
      target[d] = want[size_t(d)];
    }
  }
  Shape out_shape = target;
  out_shape.insert(0, int64_t(items.size()));
  Tensor<T> out(out_shape);
  const int64_t per = target.numel();
  if (pad && out.size()) std::fill_n(out.data(), out.size(), T(pad->padding_value));
  for (size_t i = 0; i < items.size(); ++i) {
    const Tensor<T>& t = std::get<Tensor<T>>(items[i][f]);
    if (!pad || t.shape() == target) {
      if (per) std::memcpy(out.data() + int64_t(i) * per, t.data(), size_t(per) * sizeof(T));
    } else {
      copy_padded(t.data(), t.shape(), out.data() + int64_t(i) * per, target);
    }
  }
  return out;
}

Example stack_examples(std::vector<Example>& items, const PaddedBatchOptions* pad);

class BatchSource final : public UnarySource {
 public:
  /// `pad` null: batch; else padded_batch with these options.
  BatchSource(std::shared_ptr<const Source> in, int64_t n, bool drop, const PaddedBatchOptions* pad);
  GRADUS_INLINE_DECL std::unique_ptr<Stream> open(uint64_t key) const override;

 private:
  int64_t n_;
  bool drop_, padded_;
  PaddedBatchOptions pad_;
};

// --- interleave ------------------------------------------------------------------------------------

class InterleaveSource final : public UnarySource {
 public:
  using Fn = std::function<Dataset(const Example&)>;
  InterleaveSource(std::shared_ptr<const Source> in, Fn fn, int64_t cycle, int64_t block);
  GRADUS_INLINE_DECL std::unique_ptr<Stream> open(uint64_t key) const override;

 private:
  std::shared_ptr<const Fn> fn_;
  int64_t cycle_, block_;
};

}  // namespace gradus::data::detail

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::data::detail {
GRADUS_INLINE ZipSource::ZipSource(std::vector<std::shared_ptr<const Source>> in) : in_(std::move(in)) {
  GRADUS_CHECK(value_error, !in_.empty(), "zip: no datasets");
}

GRADUS_INLINE std::unique_ptr<Stream> ZipSource::open(uint64_t key) const {
  struct S final : Stream {
    std::vector<std::unique_ptr<Stream>> in;
    std::optional<Example> next() override {
      Example out;
      for (auto& s : in) {
        std::optional<Example> e = s->next();
        if (!e) return std::nullopt;
        for (auto& f : e->fields()) out.add(std::move(f.name), std::move(f.value));
      }
      return out;
    }
    void cancel() override {
      for (auto& s : in) s->cancel();
    }
  };
  auto s = std::make_unique<S>();
  // Every input gets the pass's own key, so inputs shuffled with the same seed stay aligned.
  for (const auto& in : in_) s->in.push_back(in->open(key));
  return s;
}

GRADUS_INLINE std::unique_ptr<Stream> MapSource::open(uint64_t key) const {
  struct S final : UnaryStream {
    std::shared_ptr<const Dataset::MapFn> fn;
    S(std::unique_ptr<Stream> in, std::shared_ptr<const Dataset::MapFn> f) : UnaryStream(std::move(in)), fn(std::move(f)) {}
    std::optional<Example> next() override {
      std::optional<Example> e = in_->next();
      if (!e) return std::nullopt;
      return (*fn)(std::move(*e));
    }
    int64_t skip(int64_t n) override { return in_->skip(n); }
  };
  return std::make_unique<S>(in_->open(key), fn_);
}

GRADUS_INLINE std::unique_ptr<Stream> FilterSource::open(uint64_t key) const {
  struct S final : UnaryStream {
    std::shared_ptr<const Dataset::Predicate> pred;
    S(std::unique_ptr<Stream> in, std::shared_ptr<const Dataset::Predicate> p)
        : UnaryStream(std::move(in)), pred(std::move(p)) {}
    std::optional<Example> next() override {
      while (std::optional<Example> e = in_->next())
        if ((*pred)(*e)) return e;
      return std::nullopt;
    }
  };
  return std::make_unique<S>(in_->open(key), pred_);
}

GRADUS_INLINE ShuffleSource::ShuffleSource(std::shared_ptr<const Source> in, int64_t buffer, uint64_t seed)
    : UnarySource(std::move(in)), buffer_(buffer), seed_(seed) {
  GRADUS_CHECK(value_error, buffer >= 1, "shuffle: buffer size must be >= 1, got ", buffer);
}

GRADUS_INLINE std::unique_ptr<Stream> ShuffleSource::open(uint64_t key) const {
  // The buffer is filled first. When the whole pass fits in it, the pass is given in
  // epoch_permutation order (data/order.hpp). Otherwise each element out is drawn from the
  // buffer and the next input takes its slot; once the input ends, the buffer is drawn empty.
  struct S final : UnaryStream {
    std::vector<Example> buf;
    size_t cap;
    uint64_t seed, key;
    Rng rng;
    bool filled = false, in_done = false;
    std::optional<Example> pending;   // the input after a full buffer, refilling the first slot drawn
    std::vector<int64_t> order;       // the whole pass in the buffer: the order it is given in
    size_t at = 0;
    S(std::unique_ptr<Stream> in, size_t c, uint64_t s, uint64_t k)
        : UnaryStream(std::move(in)), cap(c), seed(s), key(k), rng(shuffle_rng(s, k)) {}
    void fill() {
      filled = true;
      while (buf.size() < cap) {
        std::optional<Example> e = in_->next();
        if (!e) break;
        buf.push_back(std::move(*e));
      }
      if (buf.size() == cap) pending = in_->next();
      if (!pending) {
        in_done = true;
        order = epoch_permutation(int64_t(buf.size()), seed, key);
      }
    }
    std::optional<Example> next() override {
      if (!filled) fill();
      if (!order.empty() || buf.empty()) {
        if (at >= order.size()) return std::nullopt;
        return std::move(buf[size_t(order[at++])]);
      }
      std::optional<Example> e = std::move(pending);
      pending.reset();
      if (!e && !in_done) e = in_->next();
      if (!e) {
        in_done = true;
        return draw(buf, rng);
      }
      Example& slot = buf[size_t(rng.below(buf.size()))];
      Example out = std::move(slot);
      slot = std::move(*e);
      return out;
    }
  };
  return std::make_unique<S>(in_->open(key), size_t(std::min<int64_t>(buffer_, int64_t(1) << 40)), seed_, key);
}

GRADUS_INLINE std::unique_ptr<Stream> RepeatSource::open(uint64_t key) const {
  struct S final : Stream {
    std::shared_ptr<const Source> src;
    uint64_t key;
    int64_t count, rep = 0, in_rep = 0;
    std::mutex m;  // guards `cur` against cancel() from another thread
    std::unique_ptr<Stream> cur;
    std::atomic<bool> cancelled{false};
    S(std::shared_ptr<const Source> s, uint64_t k, int64_t c) : src(std::move(s)), key(k), count(c) {}
    std::optional<Example> next() override {
      for (;;) {
        if (!cur) {
          if ((count >= 0 && rep >= count) || cancelled) return std::nullopt;
          auto s = src->open(mix_key(key, uint64_t(rep)));
          std::lock_guard lock(m);
          cur = std::move(s);
          in_rep = 0;
        }
        if (std::optional<Example> e = cur->next()) {
          ++in_rep;
          return e;
        }
        {
          std::lock_guard lock(m);
          cur.reset();
        }
        ++rep;
        if (in_rep == 0) return std::nullopt;  // an empty pass: repeating it forever would hang
      }
    }
    void cancel() override {
      cancelled = true;
      std::lock_guard lock(m);
      if (cur) cur->cancel();
    }
  };
  return std::make_unique<S>(in_, key, count_);
}

GRADUS_INLINE std::unique_ptr<Stream> SkipTakeSource::open(uint64_t key) const {
  struct S final : UnaryStream {
    Kind kind;
    int64_t n;
    S(std::unique_ptr<Stream> in, Kind k, int64_t n_) : UnaryStream(std::move(in)), kind(k), n(n_) {}
    std::optional<Example> next() override {
      if (kind == kSkip) {
        if (n > 0) {
          in_->skip(n);
          n = 0;
        }
        return in_->next();
      }
      if (n == 0) return std::nullopt;
      std::optional<Example> e = in_->next();
      if (e && n > 0) --n;
      return e;
    }
    int64_t skip(int64_t k) override {
      if (kind == kSkip) {
        if (n > 0) {
          in_->skip(n);
          n = 0;
        }
        return in_->skip(k);
      }
      const int64_t d = in_->skip(n < 0 ? k : std::min(k, n));
      if (n > 0) n -= d;
      return d;
    }
  };
  return std::make_unique<S>(in_->open(key), kind_, kind_ == kSkip ? std::max<int64_t>(n_, 0) : n_);
}

GRADUS_INLINE std::unique_ptr<Stream> ShardSource::open(uint64_t key) const {
  // Rounds of num_shards elements: skip the elements before this shard's, give its own, and
  // skip the rest of the round on the way to the next one.
  struct S final : UnaryStream {
    Shard shard;
    bool first = true;
    S(std::unique_ptr<Stream> in, Shard s) : UnaryStream(std::move(in)), shard(s) {}
    std::optional<Example> next() override {
      const int64_t gap = (first ? 0 : shard.after(1)) + shard.first(0, 1);
      first = false;
      if (in_->skip(gap) < gap) return std::nullopt;
      return in_->next();
    }
  };
  return std::make_unique<S>(in_->open(key), shard_);
}

GRADUS_INLINE Example stack_examples(std::vector<Example>& items, const PaddedBatchOptions* pad) {
  const char* who = pad ? "padded_batch" : "batch";
  const Example& e0 = items[0];
  for (size_t i = 1; i < items.size(); ++i) {
    GRADUS_CHECK(value_error, items[i].size() == e0.size(), who, ": element ", i, " of the batch has ", items[i].size(),
                 " fields ", items[i], ", element 0 has ", e0.size(), " ", e0);
    for (int f = 0; f < e0.size(); ++f) {
      GRADUS_CHECK(value_error, items[i].name(f) == e0.name(f) && items[i][f].index() == e0[f].index(), who,
                   ": element ", i, " of the batch is ", items[i], ", element 0 is ", e0, " (field ", f, " differs)");
    }
  }
  Example out;
  for (int f = 0; f < e0.size(); ++f) {
    Value v;
    switch (e0[f].index()) {
      case 0: v = stack_tensors<float>(items, f, pad, who); break;
      case 1: v = stack_tensors<double>(items, f, pad, who); break;
      case 2: v = stack_tensors<int64_t>(items, f, pad, who); break;
      case 3: {
        Strings s;
        s.reserve(items.size());
        for (auto& it : items) s.push_back(std::move(std::get<std::string>(it[f])));
        v = std::move(s);
        break;
      }
      default:
        gradus::detail::throw_error<value_error>(
            {who, ": field ", f, " holds ", describe(e0[f]), "; a batch of string lists is not supported"});
    }
    out.fields().push_back({e0.name(f), std::move(v)});
  }
  return out;
}

GRADUS_INLINE BatchSource::BatchSource(std::shared_ptr<const Source> in, int64_t n, bool drop,
                                       const PaddedBatchOptions* pad)
    : UnarySource(std::move(in)), n_(n), drop_(drop), padded_(pad != nullptr) {
  GRADUS_CHECK(value_error, n >= 1, padded_ ? "padded_batch" : "batch", ": batch size must be >= 1, got ", n);
  if (pad) pad_ = *pad;
}

GRADUS_INLINE std::unique_ptr<Stream> BatchSource::open(uint64_t key) const {
  struct S final : UnaryStream {
    const BatchSource& self;
    S(std::unique_ptr<Stream> in, const BatchSource& b) : UnaryStream(std::move(in)), self(b) {}
    std::optional<Example> next() override {
      std::vector<Example> items;
      items.reserve(size_t(std::min<int64_t>(self.n_, 1 << 16)));
      while (int64_t(items.size()) < self.n_) {
        std::optional<Example> e = in_->next();
        if (!e) break;
        items.push_back(std::move(*e));
      }
      if (items.empty() || (self.drop_ && int64_t(items.size()) < self.n_)) return std::nullopt;
      return stack_examples(items, self.padded_ ? &self.pad_ : nullptr);
    }
    int64_t skip(int64_t k) override {
      if (k <= 0) return 0;
      const int64_t n = self.n_;
      const int64_t want = k > std::numeric_limits<int64_t>::max() / n ? std::numeric_limits<int64_t>::max() : k * n;
      const int64_t got = in_->skip(want);
      return self.drop_ ? got / n : (got + n - 1) / n;
    }
  };
  return std::make_unique<S>(in_->open(key), *this);
}

GRADUS_INLINE InterleaveSource::InterleaveSource(std::shared_ptr<const Source> in, Fn fn, int64_t cycle,
                                                 int64_t block)
    : UnarySource(std::move(in)), fn_(std::make_shared<Fn>(std::move(fn))), cycle_(cycle), block_(block) {
  GRADUS_CHECK(value_error, *fn_, "interleave: empty function");
  GRADUS_CHECK(value_error, cycle >= 1 && cycle <= (int64_t(1) << 16), "interleave: cycle_length must be in [1, 65536], got ",
               cycle);
  GRADUS_CHECK(value_error, block >= 1, "interleave: block_length must be >= 1, got ", block);
}

GRADUS_INLINE std::unique_ptr<Stream> InterleaveSource::open(uint64_t key) const {
  // tf.data's order: the slot at `cur` gives up to `block` elements, then the next slot; an
  // empty slot takes the next input element's dataset; a finished one is emptied.
  struct S final : UnaryStream {
    std::shared_ptr<const Fn> fn;
    uint64_t key;
    int64_t block, cur = 0, in_block = 0, opened = 0, open_count = 0;
    bool input_done = false;
    std::mutex m;  // guards the slots against cancel() from another thread
    std::vector<std::shared_ptr<const Source>> owners;  // keep each slot's source alive (declared first: freed last)
    std::vector<std::unique_ptr<Stream>> slots;
    S(std::unique_ptr<Stream> in, std::shared_ptr<const Fn> f, uint64_t k, int64_t cycle, int64_t b)
        : UnaryStream(std::move(in)), fn(std::move(f)), key(k), block(b), owners(size_t(cycle)), slots(size_t(cycle)) {}
    void advance() {
      in_block = 0;
      cur = (cur + 1) % int64_t(slots.size());
    }
    std::optional<Example> next() override {
      while (!input_done || open_count > 0) {
        auto& slot = slots[size_t(cur)];
        if (slot) {
          if (std::optional<Example> e = slot->next()) {
            if (++in_block == block) advance();
            return e;
          }
          {
            std::lock_guard lock(m);
            slot.reset();
          }
          owners[size_t(cur)].reset();
          --open_count;
          advance();
        } else if (!input_done) {
          std::optional<Example> e = in_->next();
          if (!e) {
            input_done = true;
            continue;
          }
          Dataset d = (*fn)(*e);
          GRADUS_CHECK(value_error, d.source() != nullptr, "interleave: the function returned an empty Dataset");
          auto s = d.source()->open(mix_key(key, uint64_t(opened++)));
          std::lock_guard lock(m);
          owners[size_t(cur)] = d.source();
          slot = std::move(s);
          ++open_count;
        } else {
          advance();
        }
      }
      return std::nullopt;
    }
    void cancel() override {
      in_->cancel();
      std::lock_guard lock(m);
      for (auto& s : slots)
        if (s) s->cancel();
    }
  };
  return std::make_unique<S>(in_->open(key), fn_, key, cycle_, block_);
}
}  // namespace gradus::data::detail
#endif  // GRADUS_DEFINE_COMPILED
