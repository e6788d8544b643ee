// gradus/io/remap.hpp — renaming tensors and reordering their axes by rules, for weights that
// come from another framework: PyTorch's Linear stores `weight [out, in]` where a Dense layer has
// `kernel [in, out]`, its Conv2d `weight [out, in, kh, kw]` where Conv2d has `kernel [kh, kw, in,
// out]`, and the names differ too. remap turns such a file into one that restore_module reads:
//
//   const gd::io::Safetensors torch = gd::io::load_safetensors("mlp.safetensors");  // F16/BF16 read as F32
//   const gd::io::Safetensors ours = gd::io::remap(torch, {
//       {.from = "fc*.weight", .to = "model/dense*.kernel", .permute = gd::io::kTorchLinear},
//       {.from = "fc*.bias", .to = "model/dense*.bias"}});
//   gd::io::restore_module(ours, net);
//
// A pattern's `*` matches one or more characters other than '.', so "fc*.weight" matches
// "fc1.weight" (capturing "1") but not "fc1.a.weight". The i-th `*` of `to` is replaced by what
// the i-th `*` of `from` matched. Each tensor takes the first rule that matches it. Every problem
// — a rule that matches nothing (a typo would otherwise drop weights silently), a permutation
// that does not fit a tensor's rank, two tensors renamed to one name, a tensor no rule matches
// (unless kept) — is reported at once in one io_error naming the source.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gradus/core/compiled.hpp"
#include "gradus/io/safetensors.hpp"

namespace gradus::io {

/// One rule of remap (see the top of this file).
struct Remap {
  std::string from;              ///< a name pattern; `*` matches one or more characters other than '.'
  std::string to;                ///< the new name; its i-th `*` is what the i-th `*` of `from` matched
  std::vector<int64_t> permute = {};  ///< axis i of the result is axis permute[i] of the tensor; empty: as it is
};

/// PyTorch's Linear weight [out, in] -> a Dense kernel [in, out].
inline const std::vector<int64_t> kTorchLinear = {1, 0};
/// PyTorch's Conv2d weight [out, in, kh, kw] -> a Conv2d kernel [kh, kw, in, out].
inline const std::vector<int64_t> kTorchConv2d = {2, 3, 1, 0};

struct RemapOptions {
  /// Keep the tensors no rule matches, under their own names (default: they are an error).
  bool keep_unmatched = false;
};

/// `in` with its tensors renamed and permuted by `rules` (each tensor by the first rule that
/// matches it), in `in`'s order; the metadata and `widened` follow the tensors. io_error listing
/// every problem; value_error for a rule whose `to` has more `*` than its `from`.
Safetensors remap(const Safetensors& in, const std::vector<Remap>& rules, const RemapOptions& options = {});

namespace detail {
/// Whether `name` matches `pattern` ('*' = one or more characters other than '.'); fills `parts`
/// with what each '*' matched.
bool match_pattern(std::string_view pattern, std::string_view name, std::vector<std::string_view>& parts);
}  // namespace detail

}  // namespace gradus::io

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
#include <algorithm>
#include <set>

#include "gradus/io/checkpoint.hpp"  // detail::Problems
#include "gradus/ops/shape.hpp"

namespace gradus::io {
namespace detail {

GRADUS_INLINE bool match_pattern(std::string_view pattern, std::string_view name, std::vector<std::string_view>& parts) {
  const size_t star = pattern.find('*');
  if (star == std::string_view::npos) return pattern == name;
  if (name.substr(0, star) != pattern.substr(0, star)) return false;
  const std::string_view rest = pattern.substr(star + 1);
  // The star takes 1..k characters up to the next '.'; try each length (patterns are short).
  for (size_t len = 1; star + len <= name.size() && name[star + len - 1] != '.'; ++len) {
    const size_t kept = parts.size();
    parts.push_back(name.substr(star, len));
    if (match_pattern(rest, name.substr(star + len), parts)) return true;
    parts.resize(kept);
  }
  return false;
}

}  // namespace detail

GRADUS_INLINE Safetensors remap(const Safetensors& in, const std::vector<Remap>& rules, const RemapOptions& options) {
  for (const Remap& r : rules)
    GRADUS_CHECK(value_error, std::count(r.to.begin(), r.to.end(), '*') <= std::count(r.from.begin(), r.from.end(), '*'),
                 "remap: rule '", r.from, "' -> '", r.to, "' has more '*' in its new name than in its pattern");
  Safetensors out;
  out.source = in.source;
  out.metadata = in.metadata;
  detail::Problems problems;
  std::vector<bool> used(rules.size(), false);
  std::set<std::string, std::less<>> names;
  std::vector<std::string_view> parts;
  for (const auto& [name, tensor] : in.tensors) {
    size_t rule = 0;
    for (parts.clear(); rule < rules.size(); ++rule, parts.clear())
      if (detail::match_pattern(rules[rule].from, name, parts)) break;
    std::string renamed = name;
    AnyTensor t = tensor;
    if (rule == rules.size()) {
      if (!options.keep_unmatched) {
        problems.add("no rule matches '", name, "'");
        continue;
      }
    } else {
      const Remap& r = rules[rule];
      used[rule] = true;
      renamed.clear();
      size_t next = 0;
      for (char c : r.to) {
        if (c == '*') renamed += parts[next++];
        else renamed += c;
      }
      if (!r.permute.empty()) {
        const int rank = std::visit([](const auto& x) { return x.rank(); }, tensor);
        std::vector<int64_t> sorted = r.permute;
        std::sort(sorted.begin(), sorted.end());
        bool valid = int(sorted.size()) == rank;
        for (size_t i = 0; valid && i < sorted.size(); ++i) valid = sorted[i] == int64_t(i);
        if (!valid) {
          problems.add("'", name, "' has rank ", rank, ": the permutation ", IntList(r.permute),
                       " of rule '", r.from, "' does not fit it");
          continue;
        }
        std::visit([&](const auto& x) { t = gradus::transpose(x, IntList(r.permute)); }, tensor);
      }
    }
    if (!names.insert(renamed).second) {
      problems.add("two tensors are renamed '", renamed, "'");
      continue;
    }
    if (const auto w = in.widened.find(name); w != in.widened.end()) out.widened.emplace(renamed, w->second);
    out.tensors.emplace_back(std::move(renamed), std::move(t));
  }
  for (size_t i = 0; i < rules.size(); ++i)
    if (!used[i]) problems.add("rule '", rules[i].from, "' matches no tensor");
  GRADUS_CHECK(io_error, problems.empty(), "remap: '", in.source, "': ", problems.text());
  return out;
}

}  // namespace gradus::io
#endif  // GRADUS_DEFINE_COMPILED
