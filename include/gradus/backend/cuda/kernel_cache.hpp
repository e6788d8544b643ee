// gradus/backend/cuda/kernel_cache.hpp — generated kernels compiled once: cached in memory per
// (expression type, pass, architecture) and, when GRADUS_KERNEL_CACHE names a directory, on disk
// across runs.
//
// A key names the kernel's source by a hash of its text and of every gradus header it includes
// (sources_hash), so a disk entry written by another version of gradus is never reused.
// A disk entry is `<dir>/<key hash>.ptx`: a header line `gradus-ptx <key length> <ptx length>
// <checksum>`, the key, then the PTX. An entry whose header, key or checksum does not match is
// ignored and rewritten, so a corrupt, truncated or colliding file costs a recompile, never a
// wrong kernel. Entries are written to a temporary file and renamed into place, so a reader never
// sees half an entry.
//
//   const std::string& ptx = kernel_ptx<decltype(e)>(Pass::backward, "compute_90");
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <typeinfo>
#include <unistd.h>
#include <unordered_map>
#include <vector>

#include "gradus/backend/cuda/codegen.hpp"
#include "gradus/core/compiled.hpp"

namespace gradus::backend::cuda {

/// 64-bit FNV-1a: the entry's file name (from its key) and its checksum (of key and PTX).
inline uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

class KernelCache {
 public:
  /// The process's cache; its disk directory is $GRADUS_KERNEL_CACHE (none when unset).
  static KernelCache& get();
  explicit KernelCache(std::string dir) : dir_(std::move(dir)) {}

  /// The PTX for `key`, from memory, from disk, or from `compile()` (then stored in both).
  template <class Compile>
  const std::string& ptx(const std::string& key, Compile&& compile) {
    using F = std::remove_reference_t<Compile>;
    return ptx(key, [](void* f) -> std::string { return (*static_cast<F*>(f))(); },
               const_cast<void*>(static_cast<const void*>(&compile)));
  }
  /// The same with the compiler as a function and its argument: the lookup is compiled once,
  /// not once per caller's lambda.
  const std::string& ptx(const std::string& key, std::string (*compile)(void*), void* arg);

  /// Forgets the in-memory entries (a new process, as far as the disk cache can tell).
  void clear_memory() {
    std::lock_guard<std::mutex> lock(mu_);
    memory_.clear();
  }
  const std::string& directory() const { return dir_; }
  /// How many kernels were compiled, and read from disk, since the cache was made.
  int compiles() const { return compiles_; }
  int disk_hits() const { return disk_hits_; }
  /// The file that holds `key` on disk.
  std::string path(const std::string& key) const {
    char name[32];
    std::snprintf(name, sizeof name, "%016llx.ptx", static_cast<unsigned long long>(fnv1a(key)));
    return dir_ + "/" + name;
  }

 private:
  /// The entry's header line, as write() makes it; read() accepts no other spelling.
  static std::string header(const std::string& key, const std::string& ptx) {
    return "gradus-ptx " + std::to_string(key.size()) + ' ' + std::to_string(ptx.size()) + ' ' +
           std::to_string(fnv1a(ptx, fnv1a(key))) + '\n';
  }
  bool read(const std::string& key, std::string& ptx) const;
  void write(const std::string& key, const std::string& ptx) const;

  std::string dir_;
  std::mutex mu_;
  std::unordered_map<std::string, std::string> memory_;
  int compiles_ = 0, disk_hits_ = 0;
};

/// What the GPU path needs of an expression type, as values: its name (for cache keys), how to
/// flatten it for the code generator, and its element type. `launch`, the caches and the
/// generator take this instead of the type, so they are compiled once per program, not once per
/// expression.
struct ExprType {
  const std::type_info* id;
  void (*flatten)(CodegenTree&);
  const char* element;
};

template <class E>
void flatten_expr(CodegenTree& tree) {
  tree.add<E>();
}

/// The ExprType of expression type E.
template <class E>
inline constexpr ExprType expr_type_of{&typeid(E), &flatten_expr<E>, element_type_name<value_type_t<E>>()};

/// 64-bit FNV-1a of `text` (a kernel's source) and of every gradus header it includes (read from
/// `dir`, where the include paths start), transitively: all that NVRTC reads for it, so a
/// disk-cache entry made from other sources (another gradus version) is never reused.
uint64_t sources_hash(const std::string& text, const std::string& dir);
/// "/src-<sources_hash of text, in hex>" for a cache key, the headers read from include_root().
std::string source_tag(const std::string& text);

/// What names a generated kernel within a process: expression type, pass, architecture and the
/// compiler (the loaded-function cache's key).
std::string kernel_id(const ExprType& type, Pass pass, const std::string& arch);
/// The cache key of a generated kernel whose source is `source`: kernel_id and its source_tag.
std::string kernel_key(const ExprType& type, Pass pass, const std::string& arch, const std::string& source);
/// The same, generating the source.
std::string kernel_key(const ExprType& type, Pass pass, const std::string& arch);
template <class E>
std::string kernel_key(Pass pass, const std::string& arch) {
  return kernel_key(expr_type_of<E>, pass, arch);
}

/// The PTX of an expression type's forward or backward kernel for `arch`, compiled at first use.
const std::string& kernel_ptx(const ExprType& type, Pass pass, const std::string& arch,
                              KernelCache& cache = KernelCache::get());
template <class E>
const std::string& kernel_ptx(Pass pass, const std::string& arch, KernelCache& cache = KernelCache::get()) {
  return kernel_ptx(expr_type_of<E>, pass, arch, cache);
}

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
GRADUS_INLINE KernelCache& KernelCache::get() {
  static KernelCache c(std::getenv("GRADUS_KERNEL_CACHE") ? std::getenv("GRADUS_KERNEL_CACHE") : "");
  return c;
}
GRADUS_INLINE const std::string& KernelCache::ptx(const std::string& key, std::string (*compile)(void*), void* arg) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = memory_.find(key); it != memory_.end()) return it->second;
  std::string text;
  if (!dir_.empty() && read(key, text)) {
    ++disk_hits_;
  } else {
    text = compile(arg);
    ++compiles_;
    if (!dir_.empty()) write(key, text);
  }
  return memory_.emplace(key, std::move(text)).first->second;
}

GRADUS_INLINE bool KernelCache::read(const std::string& key, std::string& ptx) const {
  std::ifstream in(path(key), std::ios::binary);
  if (!in) return false;
  std::string line;
  if (!std::getline(in, line) || line.size() > 80) return false;
  std::istringstream fields(line);
  std::string magic;
  uint64_t key_len = 0, ptx_len = 0;
  if (!(fields >> magic >> key_len >> ptx_len) || magic != "gradus-ptx") return false;
  if (key_len != key.size() || ptx_len > (uint64_t(1) << 30)) return false;
  std::string k(key_len, '\0'), p(ptx_len, '\0');
  if (!in.read(k.data(), std::streamsize(key_len)) || !in.read(p.data(), std::streamsize(ptx_len))) return false;
  if (in.peek() != std::char_traits<char>::eof()) return false;  // trailing bytes: not ours
  if (k != key || header(k, p) != line + '\n') return false;   // checksum, and the exact spelling
  ptx = std::move(p);
  return true;
}

GRADUS_INLINE void KernelCache::write(const std::string& key, const std::string& ptx) const {
  const std::string target = path(key), tmp = target + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return;  // an unwritable cache directory only costs recompiles
    out << header(key, ptx) << key << ptx;
    if (!out.flush()) {
      out.close();
      std::remove(tmp.c_str());
      return;
    }
  }
  if (std::rename(tmp.c_str(), target.c_str()) != 0) std::remove(tmp.c_str());
}

GRADUS_INLINE uint64_t sources_hash(const std::string& text, const std::string& dir) {
  const auto includes = [](const std::string& body, std::vector<std::string>& out) {
    const std::string mark = std::string("#inc") + "lude \"gradus/";  // in pieces: the layering check reads includes
    for (size_t at = body.find(mark); at != std::string::npos; at = body.find(mark, at + 1)) {
      const size_t begin = at + 10, end = body.find('"', begin);
      if (end != std::string::npos) out.push_back(body.substr(begin, end - begin));
    }
  };
  uint64_t h = fnv1a(text);
  std::vector<std::string> todo;
  std::set<std::string> seen;
  includes(text, todo);
  while (!todo.empty()) {
    const std::string path = todo.back();
    todo.pop_back();
    if (!seen.insert(path).second) continue;
    std::ifstream in(dir + "/" + path, std::ios::binary);
    const std::string body((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    h = fnv1a(path + '\n' + body, h);  // an unreadable file hashes as empty: NVRTC will say why
    includes(body, todo);
  }
  return h;
}

GRADUS_INLINE std::string source_tag(const std::string& text) {
  char hex[24];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(sources_hash(text, include_root())));
  return std::string("/src-") + hex;
}

GRADUS_INLINE std::string kernel_id(const ExprType& type, Pass pass, const std::string& arch) {
  const Nvrtc& n = Nvrtc::get();
  return std::string(type.id->name()) + "/" + pass_name(pass) + "/" + arch + "/nvrtc-" + std::to_string(n.major) +
         "." + std::to_string(n.minor);
}

GRADUS_INLINE std::string kernel_key(const ExprType& type, Pass pass, const std::string& arch,
                                     const std::string& source) {
  return kernel_id(type, pass, arch) + source_tag(source);
}

GRADUS_INLINE std::string kernel_key(const ExprType& type, Pass pass, const std::string& arch) {
  CodegenTree tree;
  type.flatten(tree);
  return kernel_key(type, pass, arch, elementwise_source(tree, type.element, pass, {}).source);
}

GRADUS_INLINE const std::string& kernel_ptx(const ExprType& type, Pass pass, const std::string& arch,
                                            KernelCache& cache) {
  CodegenTree tree;
  type.flatten(tree);
  struct Job {
    KernelSource kernel;
    const std::string& arch;
  } job{elementwise_source(tree, type.element, pass, {}), arch};  // generated once: the key and the compile
  return cache.ptx(
      kernel_key(type, pass, arch, job.kernel.source),
      [](void* p) {
        const Job& j = *static_cast<const Job*>(p);
        return compile_kernel(j.kernel, j.arch);
      },
      &job);
}
#endif  // GRADUS_DEFINE_COMPILED
}  // namespace gradus::backend::cuda
