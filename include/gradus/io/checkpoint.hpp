// gradus/io/checkpoint.hpp — what goes into a checkpoint and how it comes back out.
//
// A checkpoint is one safetensors file holding several objects' state, each under a name prefix:
//   "model/<parameter or buffer path>"   every parameter and buffer of a module ("model/dense1.kernel")
//   "optimizer/<state name>"             an optimizer's state: "optimizer/step", and per parameter
//                                        "optimizer/d1.kernel/m" (by name) or "optimizer/param0/m" (by position)
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
// Optimizer state is keyed by parameter name when the model is given ("optimizer/d1.kernel/m":
// add_optimizer(ckpt, opt, net), restore_optimizer(c, opt, net)), by position otherwise
// ("optimizer/param0/m"); the named restore reads both. One call does it all for one file:
//   gd::io::save("net.safetensors", net, opt, step);   step = gd::io::load("net.safetensors", net, opt);
#pragma once
#include <bit>
#include <charconv>
#include <filesystem>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "gradus/core/compiled.hpp"
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
  std::string text() const;

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

namespace detail {

/// restore_module, returning the lazy layers it built (see restore_module) so that a caller whose
/// later step fails can unbuild them.
template <Real T>
std::vector<nn::Module<T>*> restore_module_building(const Safetensors& ckpt, nn::Module<T>& m,
                                                    const std::string& prefix) {
  auto params = m.named_parameters();
  auto buffers = m.named_buffers();
  std::unordered_map<std::string_view, const AnyTensor*> index;
  for (const auto& [name, t] : ckpt.tensors) index.emplace(name, &t);

  // The module that owns each parameter path and its own name for it, for the lazy layers; made
  // only when a shape differs.
  std::unordered_map<std::string, std::pair<nn::Module<T>*, std::string>> owners;
  auto owner_of = [&](const std::string& path) -> std::pair<nn::Module<T>*, std::string> {
    if (owners.empty())
      for (auto& [mpath, mod] : m.named_modules())
        for (auto& [own, v] : mod->named_parameters())
          if (own.find('.') == std::string::npos)
            owners.try_emplace(mpath.empty() ? own : mpath + "." + own, mod, own);
    const auto it = owners.find(path);
    return it == owners.end() ? std::pair<nn::Module<T>*, std::string>{nullptr, {}} : it->second;
  };

  Problems problems;
  std::unordered_set<std::string> expected;
  std::vector<const Tensor<T>*> sources;
  std::vector<std::pair<nn::Module<T>*, int64_t>> builds;  // lazy layers to build, and their input size
  auto check = [&](const std::string& path, const Shape& shape, bool parameter) {
    std::string full = prefix + path;
    const auto it = index.find(full);
    const Tensor<T>* t = nullptr;
    if (it == index.end()) {
      problems.add("missing '", full, "'");
    } else if (t = std::get_if<Tensor<T>>(it->second); t == nullptr) {
      problems.add("'", full, "' is ", safetensors_dtype(*it->second), " in the checkpoint but ",
                   safetensors_dtype<T>(), " in the module");
    } else if (t->shape() != shape) {
      const auto [owner, own] = parameter ? owner_of(path) : std::pair<nn::Module<T>*, std::string>{nullptr, {}};
      const int64_t in = owner ? owner->lazy_input_size(own, t->shape()) : 0;
      if (in > 0) {
        builds.emplace_back(owner, in);  // a lazy layer that has seen no input: built from the checkpoint
      } else {
        problems.add("'", full, "' has shape ", t->shape(), " in the checkpoint but ", shape, " in the module");
        t = nullptr;
      }
    }
    sources.push_back(t);
    expected.insert(std::move(full));
  };
  for (auto& [path, v] : params) check(path, v.shape(), true);
  for (auto& [path, b] : buffers) check(path, b.shape(), false);
  for (const auto& [name, t] : ckpt.tensors)
    if (name.starts_with(prefix) && !expected.count(name)) problems.add("unexpected '", name, "'");
  GRADUS_CHECK(io_error, problems.empty(), "restore_module: '", ckpt.source, "' does not fit the module (prefix '",
               prefix, "'): ", problems.text());

  std::vector<nn::Module<T>*> built;
  for (auto& [layer, in] : builds) {
    layer->build_unfilled(in);  // its parameter Var keeps its identity: params[k] sees the new shape
    built.push_back(layer);
  }
  size_t k = 0;
  for (auto& [path, v] : params) v.value().copy_(*sources[k++]);
  for (auto& [path, b] : buffers) b.copy_(*sources[k++]);
  return built;
}

}  // namespace detail

/// Copies the checkpoint's "<prefix><path>" entries into the parameters and buffers of `m`.
/// io_error listing every problem — a missing entry, an entry under `prefix` that `m` does not
/// have, another dtype or shape — before anything is changed. With an empty prefix every entry
/// of the checkpoint must belong to `m`. A lazy layer that has not seen an input yet (Dense,
/// Conv2d, LSTM without `.in`) is built from the checkpoint's shape for its kernel, so a model
/// restores into a freshly constructed twin of itself.
template <Real T>
void restore_module(const Safetensors& ckpt, nn::Module<T>& m, const std::string& prefix = "model/") {
  detail::restore_module_building(ckpt, m, prefix);
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
    ::gradus::detail::throw_error<io_error>(
        {"restore_optimizer: '", ckpt.source, "' does not fit the optimizer (prefix '", prefix, "'): ", e.what()});
  }
}

namespace detail {

/// The checkpoint name of each of the optimizer's parameters: its path in `model`, or "param<i>"
/// (its position) for a Var the model does not have.
template <Real T>
std::vector<std::string> optimizer_param_names(const optim::Optimizer<T>& opt, const nn::Module<T>& model) {
  std::unordered_map<const void*, std::string> path;
  for (const auto& [name, v] : model.named_parameters()) path.emplace(v.node(), name);
  std::vector<std::string> out;
  for (size_t i = 0; i < opt.params().size(); ++i) {
    const auto it = path.find(opt.params()[i].node());
    out.push_back(it != path.end() ? it->second : "param" + std::to_string(i));
  }
  return out;
}

/// "param<i>/<slot>" (a state_dict key) with <i> replaced by names[i]; "step" stays.
std::string named_state_key(const std::string& key, const std::vector<std::string>& names);

}  // namespace detail

/// Appends the optimizer's state keyed by parameter name rather than position:
/// "<prefix>step" and "<prefix><parameter path>/<slot>" ("optimizer/d1.kernel/m"), the path being
/// the parameter's in `model` ("param<i>" for a Var the model does not have). A checkpoint
/// written so restores into an optimizer whose parameters come in another order.
template <Real T>
void add_optimizer(TensorList& out, const optim::Optimizer<T>& opt, const nn::Module<T>& model,
                   const std::string& prefix = "optimizer/") {
  const std::vector<std::string> names = detail::optimizer_param_names(opt, model);
  for (auto& [key, t] : opt.state_dict()) out.emplace_back(prefix + detail::named_state_key(key, names), std::move(t));
}

/// Restores state written by the add_optimizer above, matching each parameter by its path in
/// `model`. A checkpoint keyed by position ("optimizer/param0/m", as written by the
/// add_optimizer without a model and by gradus before names) is restored by position. io_error
/// listing what is missing or unexpected, and no change, when the state does not fit.
template <Real T>
void restore_optimizer(const Safetensors& ckpt, optim::Optimizer<T>& opt, const nn::Module<T>& model,
                       const std::string& prefix = "optimizer/") {
  bool by_position = false;  // a file keyed by position: every per-parameter entry reads "param<i>/..."
  for (const auto& [name, t] : ckpt.tensors) {
    if (!name.starts_with(prefix) || name == prefix + "step") continue;
    const std::string_view rest = std::string_view(name).substr(prefix.size());
    const size_t digits = rest.starts_with("param") ? rest.find_first_not_of("0123456789", 5) : 5;
    if (digits == 5 || digits == std::string_view::npos || rest[digits] != '/') {
      by_position = false;
      break;
    }
    by_position = true;
  }
  if (by_position) return restore_optimizer(ckpt, opt, prefix);

  const std::vector<std::string> names = detail::optimizer_param_names(opt, model);
  std::unordered_map<std::string, std::string> positional;  // full named key -> state_dict key
  for (const auto& [key, t] : opt.state_dict()) positional.emplace(prefix + detail::named_state_key(key, names), key);

  optim::StateDict<T> state;
  detail::Problems problems;  // missing entries first, then unexpected ones, then other dtypes
  for (const auto& [key, t] : opt.state_dict()) {
    const std::string full = prefix + detail::named_state_key(key, names);
    if (!ckpt.find(full)) problems.add("missing '", full, "'");
  }
  for (const auto& [name, t] : ckpt.tensors)
    if (name.starts_with(prefix) && !positional.count(name)) problems.add("unexpected '", name, "'");
  for (const auto& [name, t] : ckpt.tensors) {
    const auto it = positional.find(name);
    if (it == positional.end()) continue;
    if (const Tensor<T>* typed = std::get_if<Tensor<T>>(&t))
      state.emplace_back(it->second, *typed);
    else
      problems.add("'", name, "' is ", detail::safetensors_dtype(t), " in the checkpoint but ",
                   detail::safetensors_dtype<T>(), " in the optimizer");
  }
  GRADUS_CHECK(io_error, problems.empty(), "restore_optimizer: '", ckpt.source, "' does not fit ", opt.name(),
               " (prefix '", prefix, "'): ", problems.text());
  try {
    opt.load_state_dict(state);
  } catch (const error& e) {
    ::gradus::detail::throw_error<io_error>(
        {"restore_optimizer: '", ckpt.source, "' does not fit the optimizer (prefix '", prefix, "'): ", e.what()});
  }
}

/// Appends the whole state of `rng` as the I64 [4] tensor `name` (the words bit-cast).
void add_rng(TensorList& out, const Rng& rng, const std::string& name = "rng");

/// Sets `rng` to the state saved by add_rng under `name`; io_error when the entry is missing or is
/// not I64 [4] (the generator is then unchanged).
void restore_rng(const Safetensors& ckpt, Rng& rng, const std::string& name = "rng");

/// The step stored in the checkpoint's metadata "global_step" (a non-negative decimal integer);
/// io_error when it is missing or malformed.
int64_t checkpoint_step(const Safetensors& ckpt);

/// Saves `model` (every parameter and buffer, "model/<path>"), the state of `optimizer` keyed by
/// parameter name ("optimizer/<path>/<slot>") and `step` (metadata "global_step") into one
/// safetensors file at `path`, atomically: an interrupted save leaves the previous file intact.
///   gd::io::save("net.safetensors", net, opt, step);
template <Real T>
void save(const std::filesystem::path& path, const nn::Module<T>& model, const optim::Optimizer<T>& optimizer,
          int64_t step = 0) {
  GRADUS_CHECK(value_error, step >= 0, "save: step must be >= 0, got ", step);
  TensorList list;
  add_module(list, model);
  add_optimizer(list, optimizer, model);
  save_safetensors(path, list, {{"global_step", std::to_string(step)}});
}
/// Saves `model` alone (and `step`), its float tensors stored as `storage`: gd::bf16 or
/// gd::fp16, rounded to the nearest (ties to even) in half the bytes, as weights are published to
/// run elsewhere (`load` widens them back to float exactly); gd::fp32 as they are. A double model's
/// tensors stay F64. value_error for a weight too large for the 16-bit type.
///   gd::io::save("net.bf16.safetensors", net, gd::bf16);
template <Real T>
void save(const std::filesystem::path& path, const nn::Module<T>& model, Precision storage, int64_t step = 0) {
  GRADUS_CHECK(value_error, step >= 0, "save: step must be >= 0, got ", step);
  TensorList list;
  add_module(list, model);
  save_safetensors(path, list, {{"global_step", std::to_string(step)}}, storage);
}
/// Saves `model` alone (and `step`), as float.
///   gd::io::save("net.safetensors", net);
template <Real T>
void save(const std::filesystem::path& path, const nn::Module<T>& model, int64_t step = 0) {
  save(path, model, fp32, step);
}

/// Loads a file written by `save` (or by a Saver / fit checkpoint) into `model` and `optimizer`
/// and returns its step (0 when the file has none). Everything is checked first: io_error naming
/// the file and every mismatch, and neither the model nor the optimizer changes. Optimizer state
/// keyed by position (older files) loads too.
///   const int64_t step = gd::io::load("net.safetensors", net, opt);
template <Real T>
int64_t load(const std::filesystem::path& path, nn::Module<T>& model, optim::Optimizer<T>& optimizer) {
  const Safetensors ckpt = load_safetensors(path, "load");
  const int64_t step = ckpt.metadata.count("global_step") ? checkpoint_step(ckpt) : 0;
  TensorList before;  // to put the model back if the optimizer's state does not fit
  for (auto& [name, v] : model.named_parameters()) before.emplace_back(name, v.value().clone());
  for (auto& [name, b] : model.named_buffers()) before.emplace_back(name, b.clone());
  const std::vector<nn::Module<T>*> built = detail::restore_module_building(ckpt, model, "model/");
  try {
    restore_optimizer(ckpt, optimizer, model);
  } catch (...) {
    for (nn::Module<T>* layer : built) layer->unbuild();
    size_t k = 0;
    for (auto& [name, v] : model.named_parameters()) v.value().copy_(std::get<Tensor<T>>(before[k++].second));
    for (auto& [name, b] : model.named_buffers()) b.copy_(std::get<Tensor<T>>(before[k++].second));
    throw;
  }
  return step;
}
/// Loads the model alone (any optimizer state in the file is left unread); returns the step.
///   gd::io::load("net.safetensors", net);
template <Real T>
int64_t load(const std::filesystem::path& path, nn::Module<T>& model) {
  const Safetensors ckpt = load_safetensors(path, "load");
  const int64_t step = ckpt.metadata.count("global_step") ? checkpoint_step(ckpt) : 0;
  restore_module(ckpt, model);
  return step;
}

}  // namespace gradus::io

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::io::detail {
GRADUS_INLINE std::string Problems::text() const {
  std::string s = os_.str();
  if (count_ > kShown) s += ::gradus::detail::str("; and ", count_ - kShown, " more");
  return s;
}

GRADUS_INLINE std::string named_state_key(const std::string& key, const std::vector<std::string>& names) {
  if (!key.starts_with("param")) return key;
  const size_t slash = key.find('/');
  size_t i = 0;
  const auto [end, ec] = std::from_chars(key.data() + 5, key.data() + slash, i);
  if (ec != std::errc() || end != key.data() + slash || i >= names.size()) return key;
  return names[i] + key.substr(slash);
}
}  // namespace gradus::io::detail
namespace gradus::io {
GRADUS_INLINE void add_rng(TensorList& out, const Rng& rng, const std::string& name) {
  const Rng::State s = rng.state();
  Tensor<int64_t> t = Tensor<int64_t>::empty({4});
  for (size_t i = 0; i < 4; ++i) t.data()[i] = std::bit_cast<int64_t>(s[i]);
  out.emplace_back(name, std::move(t));
}

GRADUS_INLINE void restore_rng(const Safetensors& ckpt, Rng& rng, const std::string& name) {
  const AnyTensor* t = ckpt.find(name);
  GRADUS_CHECK(io_error, t != nullptr, "restore_rng: '", ckpt.source, "' has no entry '", name, "'");
  const Tensor<int64_t>* typed = std::get_if<Tensor<int64_t>>(t);
  GRADUS_CHECK(io_error, typed != nullptr && typed->shape() == Shape{4}, "restore_rng: '", ckpt.source, "': '", name,
               "' must be I64 [4], got ", detail::safetensors_dtype(*t), " ", detail::shape_of(*t));
  Rng::State s;
  for (size_t i = 0; i < 4; ++i) s[i] = std::bit_cast<uint64_t>(typed->data()[i]);
  rng.set_state(s);
}

GRADUS_INLINE int64_t checkpoint_step(const Safetensors& ckpt) {
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
#endif  // GRADUS_DEFINE_COMPILED

#if GRADUS_INSTANCES  // compiled once in libgradus with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::io {
GRADUS_INSTANCE void add_module(TensorList&, const nn::Module<float>&, const std::string&);
GRADUS_INSTANCE_DOUBLE void add_module(TensorList&, const nn::Module<double>&, const std::string&);
GRADUS_INSTANCE void restore_module(const Safetensors&, nn::Module<float>&, const std::string&);
GRADUS_INSTANCE_DOUBLE void restore_module(const Safetensors&, nn::Module<double>&, const std::string&);
GRADUS_INSTANCE std::vector<nn::Module<float>*> detail::restore_module_building(const Safetensors&, nn::Module<float>&,
                                                                                const std::string&);
GRADUS_INSTANCE_DOUBLE std::vector<nn::Module<double>*> detail::restore_module_building(const Safetensors&,
                                                                                        nn::Module<double>&,
                                                                                        const std::string&);
GRADUS_INSTANCE void add_optimizer(TensorList&, const optim::Optimizer<float>&, const std::string&);
GRADUS_INSTANCE_DOUBLE void add_optimizer(TensorList&, const optim::Optimizer<double>&, const std::string&);
GRADUS_INSTANCE void add_optimizer(TensorList&, const optim::Optimizer<float>&, const nn::Module<float>&,
                                   const std::string&);
GRADUS_INSTANCE_DOUBLE void add_optimizer(TensorList&, const optim::Optimizer<double>&, const nn::Module<double>&,
                                          const std::string&);
GRADUS_INSTANCE void restore_optimizer(const Safetensors&, optim::Optimizer<float>&, const std::string&);
GRADUS_INSTANCE_DOUBLE void restore_optimizer(const Safetensors&, optim::Optimizer<double>&, const std::string&);
GRADUS_INSTANCE void restore_optimizer(const Safetensors&, optim::Optimizer<float>&, const nn::Module<float>&,
                                       const std::string&);
GRADUS_INSTANCE_DOUBLE void restore_optimizer(const Safetensors&, optim::Optimizer<double>&, const nn::Module<double>&,
                                              const std::string&);
GRADUS_INSTANCE void save(const std::filesystem::path&, const nn::Module<float>&, const optim::Optimizer<float>&,
                          int64_t);
GRADUS_INSTANCE_DOUBLE void save(const std::filesystem::path&, const nn::Module<double>&,
                                 const optim::Optimizer<double>&, int64_t);
GRADUS_INSTANCE void save(const std::filesystem::path&, const nn::Module<float>&, int64_t);
GRADUS_INSTANCE_DOUBLE void save(const std::filesystem::path&, const nn::Module<double>&, int64_t);
GRADUS_INSTANCE void save(const std::filesystem::path&, const nn::Module<float>&, Precision, int64_t);
GRADUS_INSTANCE_DOUBLE void save(const std::filesystem::path&, const nn::Module<double>&, Precision, int64_t);
GRADUS_INSTANCE int64_t load(const std::filesystem::path&, nn::Module<float>&, optim::Optimizer<float>&);
GRADUS_INSTANCE_DOUBLE int64_t load(const std::filesystem::path&, nn::Module<double>&, optim::Optimizer<double>&);
GRADUS_INSTANCE int64_t load(const std::filesystem::path&, nn::Module<float>&);
GRADUS_INSTANCE_DOUBLE int64_t load(const std::filesystem::path&, nn::Module<double>&);
}  // namespace gradus::io
#endif
