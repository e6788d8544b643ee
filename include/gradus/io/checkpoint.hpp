// gradus/io/checkpoint.hpp — what goes into a checkpoint and how it comes back out.
//
// A checkpoint is one safetensors file holding several objects' state, each under a name prefix:
//   "model/<parameter or buffer path>"   every parameter and buffer of a module ("model/dense1.kernel")
//   "optimizer/<state name>"             an optimizer's state_dict ("optimizer/step", "optimizer/param0/m")
//   "rng"                                an Rng's four state words, bit-cast to I64 [4]
// and the metadata "global_step" (written by Saver). Restoring checks every name, dtype and shape
// against the object first — missing entries and unexpected extra entries under the prefix
// included — and changes nothing unless all of them fit; then it copies the values in place, so
// Vars, optimizers and layers that hold these tensors see the restored values.
//   gd::io::TensorList ckpt;
//   gd::io::add_module(ckpt, net);  gd::io::add_optimizer(ckpt, opt);  gd::io::add_rng(ckpt, rng);
//   saver.save(step, ckpt);
//   ...
//   auto c = gd::io::load_safetensors(*gd::io::latest_checkpoint(dir));
//   gd::io::restore_module(c, net);  gd::io::restore_optimizer(c, opt);  gd::io::restore_rng(c, rng);
#pragma once
#include <bit>
#include <charconv>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "gradus/core/rng.hpp"
#include "gradus/io/safetensors.hpp"
#include "gradus/nn/module.hpp"
#include "gradus/optim/optimizer.hpp"

namespace gradus::io {

namespace detail {

/// Collects mismatches into one message: "a; b; c (and 3 more)".
class Problems {
 public:
  template <class... Parts>
  void add(const Parts&... parts) {
    if (count_++ >= kShown) return;
    if (count_ > 1) os_ << "; ";
    (os_ << ... << parts);
  }
  bool empty() const { return count_ == 0; }
  std::string text() const {
    std::string s = os_.str();
    if (count_ > kShown) s += ::gradus::detail::str("; and ", count_ - kShown, " more");
    return s;
  }

 private:
  static constexpr int kShown = 12;
  std::ostringstream os_;
  int count_ = 0;
};

}  // namespace detail

/// Appends every parameter and buffer of `m` as "<prefix><path>" (sharing storage, not copying:
/// encode or save the list before the module changes).
template <Real T>
void add_module(TensorList& out, const nn::Module<T>& m, const std::string& prefix = "model/") {
  for (auto& [name, v] : m.named_parameters()) out.emplace_back(prefix + name, v.value());
  for (auto& [name, b] : m.named_buffers()) out.emplace_back(prefix + name, b);
}

/// Copies the checkpoint's "<prefix><path>" entries into the parameters and buffers of `m`.
/// io_error listing every problem — a missing entry, an entry under `prefix` that `m` does not
/// have, another dtype or shape — before anything is changed. With an empty prefix every entry
/// of the checkpoint must belong to `m`.
template <Real T>
void restore_module(const Safetensors& ckpt, nn::Module<T>& m, const std::string& prefix = "model/") {
  auto params = m.named_parameters();
  auto buffers = m.named_buffers();
  std::unordered_map<std::string_view, const AnyTensor*> index;
  for (const auto& [name, t] : ckpt.tensors) index.emplace(name, &t);

  detail::Problems problems;
  std::unordered_set<std::string> expected;
  std::vector<const Tensor<T>*> sources;
  auto check = [&](const std::string& path, const Shape& shape) {
    std::string full = prefix + path;
    const auto it = index.find(full);
    const Tensor<T>* t = nullptr;
    if (it == index.end()) {
      problems.add("missing '", full, "'");
    } else if (t = std::get_if<Tensor<T>>(it->second); t == nullptr) {
      problems.add("'", full, "' is ", detail::safetensors_dtype(*it->second), " in the checkpoint but ",
                   detail::safetensors_dtype<T>(), " in the module");
    } else if (t->shape() != shape) {
      problems.add("'", full, "' has shape ", t->shape(), " in the checkpoint but ", shape, " in the module");
      t = nullptr;
    }
    sources.push_back(t);
    expected.insert(std::move(full));
  };
  for (auto& [path, v] : params) check(path, v.shape());
  for (auto& [path, b] : buffers) check(path, b.shape());
  for (const auto& [name, t] : ckpt.tensors)
    if (name.starts_with(prefix) && !expected.count(name)) problems.add("unexpected '", name, "'");
  GRADUS_CHECK(io_error, problems.empty(), "restore_module: '", ckpt.source, "' does not fit the module (prefix '",
               prefix, "'): ", problems.text());

  size_t k = 0;
  for (auto& [path, v] : params) v.value().copy_(*sources[k++]);
  for (auto& [path, b] : buffers) b.copy_(*sources[k++]);
}

/// Appends the optimizer's state_dict() (a snapshot) as "<prefix><state name>".
template <Real T>
void add_optimizer(TensorList& out, const optim::Optimizer<T>& opt, const std::string& prefix = "optimizer/") {
  for (auto& [name, t] : opt.state_dict()) out.emplace_back(prefix + name, std::move(t));
}

/// Loads the checkpoint's "<prefix>..." entries into `opt` with load_state_dict: every state
/// entry must be there with its shape and the optimizer's dtype, and no other entry under
/// `prefix`; io_error (naming the checkpoint) and no change otherwise.
template <Real T>
void restore_optimizer(const Safetensors& ckpt, optim::Optimizer<T>& opt, const std::string& prefix = "optimizer/") {
  optim::StateDict<T> state;
  detail::Problems problems;
  for (const auto& [name, t] : ckpt.tensors) {
    if (!name.starts_with(prefix)) continue;
    if (const Tensor<T>* typed = std::get_if<Tensor<T>>(&t))
      state.emplace_back(name.substr(prefix.size()), *typed);
    else
      problems.add("'", name, "' is ", detail::safetensors_dtype(t), " in the checkpoint but ",
                   detail::safetensors_dtype<T>(), " in the optimizer");
  }
  GRADUS_CHECK(io_error, problems.empty(), "restore_optimizer: '", ckpt.source, "' does not fit ", opt.name(),
               " (prefix '", prefix, "'): ", problems.text());
  GRADUS_CHECK(io_error, !state.empty(), "restore_optimizer: '", ckpt.source, "' has no optimizer state (no entry under '",
               prefix, "')");
  try {
    opt.load_state_dict(state);
  } catch (const error& e) {
    throw io_error(::gradus::detail::str("restore_optimizer: '", ckpt.source, "' does not fit the optimizer (prefix '",
                                         prefix, "'): ", e.what()));
  }
}

/// Appends the whole state of `rng` as the I64 [4] tensor `name` (the words bit-cast).
inline void add_rng(TensorList& out, const Rng& rng, const std::string& name = "rng") {
  const Rng::State s = rng.state();
  Tensor<int64_t> t = Tensor<int64_t>::empty({4});
  for (size_t i = 0; i < 4; ++i) t.data()[i] = std::bit_cast<int64_t>(s[i]);
  out.emplace_back(name, std::move(t));
}

/// Sets `rng` to the state saved by add_rng under `name`; io_error when the entry is missing or is
/// not I64 [4] (the generator is then unchanged).
inline void restore_rng(const Safetensors& ckpt, Rng& rng, const std::string& name = "rng") {
  const AnyTensor* t = ckpt.find(name);
  GRADUS_CHECK(io_error, t != nullptr, "restore_rng: '", ckpt.source, "' has no entry '", name, "'");
  const Tensor<int64_t>* typed = std::get_if<Tensor<int64_t>>(t);
  GRADUS_CHECK(io_error, typed != nullptr && typed->shape() == Shape{4}, "restore_rng: '", ckpt.source, "': '", name,
               "' must be I64 [4], got ", detail::safetensors_dtype(*t), " ", detail::shape_of(*t));
  Rng::State s;
  for (size_t i = 0; i < 4; ++i) s[i] = std::bit_cast<uint64_t>(typed->data()[i]);
  rng.set_state(s);
}

/// The step stored in the checkpoint's metadata "global_step" (a non-negative decimal integer);
/// io_error when it is missing or malformed.
inline int64_t checkpoint_step(const Safetensors& ckpt) {
  const auto it = ckpt.metadata.find("global_step");
  GRADUS_CHECK(io_error, it != ckpt.metadata.end(), "checkpoint_step: '", ckpt.source,
               "' has no metadata 'global_step'");
  const std::string& s = it->second;
  int64_t step = -1;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), step);
  GRADUS_CHECK(io_error, ec == std::errc() && end == s.data() + s.size() && step >= 0 && !s.empty() && s[0] != '-',
               "checkpoint_step: '", ckpt.source, "': metadata 'global_step' must be a non-negative integer, got '", s,
               "'");
  return step;
}

}  // namespace gradus::io
