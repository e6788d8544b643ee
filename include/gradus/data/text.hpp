// gradus/data/text.hpp — text helpers for language models: a word vocabulary, PTB-style
// reading and batching for truncated backpropagation through time, and Keras' pad_sequences.
//
//   auto words = gd::data::read_words("ptb.train.txt");            // "<eos>" after every line
//   auto vocab = gd::data::Vocabulary::build(words, {.max_size = 10000});
//   auto train = gd::data::ptb_batches(vocab.encode(words), 20, 35);   // {x: [20,35], y: [20,35]}
//   for (const auto& b : train) { auto [x, y] = b.as<int64_t, int64_t>(); ... }
#pragma once
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gradus/core/compiled.hpp"
#include "gradus/core/error.hpp"
#include "gradus/core/tensor.hpp"
#include "gradus/data/dataset.hpp"

namespace gradus::data {

struct VocabularyOptions {
  int64_t max_size = 0;       ///< the most words kept, special tokens included (0: no limit)
  int64_t min_count = 1;      ///< words seen fewer times are left out (they become `unk`)
  std::string unk = "<unk>";  ///< the id of unknown words ("": none, an unknown word is an error)
  std::string eos = "<eos>";  ///< the end-of-sentence token ("": none)
};

/// Words and their ids. `build` gives the special tokens the first ids (unk 0, then eos), then
/// the words from most to least frequent, words of equal count in bytewise order — so the same
/// text always gives the same ids.
///   auto v = gd::data::Vocabulary::build({"a", "b", "a"});   // <unk> 0, <eos> 1, a 2, b 3
///   v.id("a") == 2;  v.id("zebra") == 0;  v.word(3) == "b";
class Vocabulary {
 public:
  Vocabulary() = default;

  static Vocabulary build(const std::vector<std::string>& tokens, const VocabularyOptions& o = {});

  int64_t size() const { return int64_t(words_.size()); }
  const std::vector<std::string>& words() const { return words_; }
  bool contains(std::string_view w) const { return index_.find(std::string(w)) != index_.end(); }
  /// The id of `w`; the unk id for a word not in the vocabulary (value_error without unk).
  int64_t id(std::string_view w) const {
    if (auto it = index_.find(std::string(w)); it != index_.end()) return it->second;
    GRADUS_CHECK(value_error, unk_ >= 0, "Vocabulary::id: '", w, "' is not in the vocabulary, which has no unk token");
    return unk_;
  }
  const std::string& word(int64_t id) const {
    GRADUS_CHECK(value_error, id >= 0 && id < size(), "Vocabulary::word: id ", id, " is not in [0, ", size(), ")");
    return words_[size_t(id)];
  }
  int64_t unk_id() const { return unk_; }  ///< -1 without one
  int64_t eos_id() const { return eos_; }  ///< -1 without one

  std::vector<int64_t> encode(const std::vector<std::string>& words) const;
  std::vector<std::string> decode(const std::vector<int64_t>& ids) const;

  /// Writes one word per line, in id order.
  void save(const std::string& path) const;
  /// Reads a file of one word per line (id = line - 1); `o.unk` and `o.eos` are found by name.
  /// An empty line or a repeated word is an io_error naming the line.
  static Vocabulary load(const std::string& path, const VocabularyOptions& o = {});

 private:
  void add(std::string w);
  void set_specials(const VocabularyOptions& o);

  std::vector<std::string> words_;
  std::unordered_map<std::string, int64_t> index_;
  int64_t unk_ = -1, eos_ = -1;
};

/// The whitespace-separated words of a text file, with `eos` after every line (none when "").
std::vector<std::string> read_words(const std::string& path, const std::string& eos = "<eos>");

/// PTB-style batches for truncated BPTT (TensorFlow's ptb_producer): the ids are cut to a
/// multiple of batch_size and laid out as [batch_size, L] (row r is the r-th contiguous
/// stretch); batch i is x = columns [i*num_steps, (i+1)*num_steps) and y = the same shifted by
/// one; there are (L - 1) / num_steps of them, as {x: [batch_size, num_steps], y: ...} int64.
///   ids 0..9, batch_size 2, num_steps 2: rows [0..4], [5..9];
///   batch 0: x [[0,1],[5,6]], y [[1,2],[6,7]];  batch 1: x [[2,3],[7,8]], y [[3,4],[8,9]]
Dataset ptb_batches(const std::vector<int64_t>& ids, int64_t batch_size, int64_t num_steps);

/// Where pad_sequences pads or cuts: at the start (pre) or the end (post) of a sequence.
enum class Pad { pre, post };

struct PadOptions {
  int64_t maxlen = -1;         ///< the length of every row (-1: the longest sequence)
  Pad padding = Pad::pre;      ///< where short sequences get `value`
  Pad truncating = Pad::pre;   ///< where long sequences lose elements
  double value = 0;
};

/// Keras' pad_sequences: the sequences as rows of a [n, maxlen] tensor, padded and truncated
/// as the options say (Keras' defaults: both at the start).
///   pad_sequences({{1, 2, 3}, {4}}, {.maxlen = 2})  ->  [[2, 3], [0, 4]]
template <gradus::Element T>
Tensor<T> pad_sequences(const std::vector<std::vector<T>>& seqs, const PadOptions& o = {}) {
  int64_t maxlen = o.maxlen;
  if (maxlen < 0)
    for (const auto& s : seqs) maxlen = std::max(maxlen, int64_t(s.size()));
  maxlen = std::max<int64_t>(maxlen, 0);
  Tensor<T> out = Tensor<T>::full({int64_t(seqs.size()), maxlen}, T(o.value));
  for (size_t i = 0; i < seqs.size(); ++i) {
    const auto& s = seqs[i];
    const int64_t keep = std::min<int64_t>(int64_t(s.size()), maxlen);
    const T* from = s.data() + (o.truncating == Pad::pre ? int64_t(s.size()) - keep : 0);
    T* to = out.data() + int64_t(i) * maxlen + (o.padding == Pad::pre ? maxlen - keep : 0);
    std::copy_n(from, keep, to);
  }
  return out;
}
inline Tensor<int64_t> pad_sequences(const std::vector<std::vector<int64_t>>& seqs, const PadOptions& o = {}) {
  return pad_sequences<int64_t>(seqs, o);
}

}  // namespace gradus::data

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::data {
GRADUS_INLINE Vocabulary Vocabulary::build(const std::vector<std::string>& tokens, const VocabularyOptions& o) {
  GRADUS_CHECK(value_error, o.max_size >= 0 && o.min_count >= 1, "Vocabulary::build: max_size must be >= 0 and ",
               "min_count >= 1, got ", o.max_size, " and ", o.min_count);
  GRADUS_CHECK(value_error, o.unk.empty() || o.unk != o.eos, "Vocabulary::build: unk and eos are both '", o.unk, "'");
  std::unordered_map<std::string_view, int64_t> counts;
  for (const auto& t : tokens)
    if (t != o.unk && t != o.eos) ++counts[t];
  std::vector<std::pair<std::string_view, int64_t>> order(counts.begin(), counts.end());
  std::sort(order.begin(), order.end(),
            [](const auto& a, const auto& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
  Vocabulary v;
  for (const std::string* s : {&o.unk, &o.eos})
    if (!s->empty()) v.add(*s);
  for (const auto& [w, c] : order) {
    if (c < o.min_count || (o.max_size > 0 && v.size() >= o.max_size)) break;
    v.add(std::string(w));
  }
  v.set_specials(o);
  return v;
}

GRADUS_INLINE std::vector<int64_t> Vocabulary::encode(const std::vector<std::string>& words) const {
  std::vector<int64_t> ids;
  ids.reserve(words.size());
  for (const auto& w : words) ids.push_back(id(w));
  return ids;
}

GRADUS_INLINE std::vector<std::string> Vocabulary::decode(const std::vector<int64_t>& ids) const {
  std::vector<std::string> out;
  out.reserve(ids.size());
  for (int64_t i : ids) out.push_back(word(i));
  return out;
}

GRADUS_INLINE void Vocabulary::save(const std::string& path) const {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  GRADUS_CHECK(io_error, f.is_open(), "Vocabulary::save: cannot write '", path, "'");
  for (const auto& w : words_) {
    GRADUS_CHECK(value_error, w.find_first_of("\r\n") == std::string::npos, "Vocabulary::save: the word '", w,
                 "' holds a line break");
    f << w << '\n';
  }
  f.flush();
  GRADUS_CHECK(io_error, f.good(), "Vocabulary::save: cannot write '", path, "'");
}

GRADUS_INLINE Vocabulary Vocabulary::load(const std::string& path, const VocabularyOptions& o) {
  std::ifstream f(path, std::ios::binary);
  GRADUS_CHECK(io_error, f.is_open(), "Vocabulary::load: cannot open '", path, "'");
  Vocabulary v;
  std::string line;
  for (int64_t n = 1; std::getline(f, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    GRADUS_CHECK(io_error, !line.empty(), "Vocabulary::load: '", path, "' line ", n, " is empty");
    GRADUS_CHECK(io_error, !v.contains(line), "Vocabulary::load: '", path, "' line ", n, ": '", line,
                 "' appears twice");
    v.add(line);
  }
  v.set_specials(o);
  return v;
}

GRADUS_INLINE void Vocabulary::add(std::string w) {
  index_.emplace(w, size());
  words_.push_back(std::move(w));
}

GRADUS_INLINE void Vocabulary::set_specials(const VocabularyOptions& o) {
  auto find = [&](const std::string& w) -> int64_t {
    if (w.empty()) return -1;
    auto it = index_.find(w);
    return it == index_.end() ? -1 : it->second;
  };
  unk_ = find(o.unk);
  eos_ = find(o.eos);
}

GRADUS_INLINE std::vector<std::string> read_words(const std::string& path, const std::string& eos) {
  detail::check_readable(path, "read_words");
  std::ifstream f(path, std::ios::binary);
  GRADUS_CHECK(io_error, f.is_open(), "read_words: cannot open '", path, "'");
  std::vector<std::string> out;
  std::string line;
  while (std::getline(f, line)) {
    size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
      size_t j = i;
      while (j < line.size() && !std::isspace(static_cast<unsigned char>(line[j]))) ++j;
      if (j > i) out.emplace_back(line, i, j - i);
      i = j;
    }
    if (!eos.empty()) out.push_back(eos);
  }
  return out;
}

GRADUS_INLINE Dataset ptb_batches(const std::vector<int64_t>& ids, int64_t batch_size, int64_t num_steps) {
  GRADUS_CHECK(value_error, batch_size >= 1 && num_steps >= 1, "ptb_batches: batch_size and num_steps must be >= 1, got ",
               batch_size, " and ", num_steps);
  const int64_t len = int64_t(ids.size()) / batch_size;
  const int64_t n = len > 0 ? (len - 1) / num_steps : 0;
  GRADUS_CHECK(value_error, n > 0, "ptb_batches: ", ids.size(), " ids make no batch of ", batch_size, " x ", num_steps,
               " (need at least ", batch_size * (num_steps + 1), "); decrease batch_size or num_steps");
  Tensor<int64_t> x({n, batch_size, num_steps}), y({n, batch_size, num_steps});
  for (int64_t i = 0; i < n; ++i)
    for (int64_t r = 0; r < batch_size; ++r)
      for (int64_t t = 0; t < num_steps; ++t) {
        const size_t at = size_t(r * len + i * num_steps + t);
        x.data()[(i * batch_size + r) * num_steps + t] = ids[at];
        y.data()[(i * batch_size + r) * num_steps + t] = ids[at + 1];
      }
  return Dataset::from_tensor_slices({{"x", x}, {"y", y}});
}
}  // namespace gradus::data
#endif  // GRADUS_DEFINE_COMPILED
