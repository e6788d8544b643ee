// gradus/backend/cuda/nccl.hpp — collectives between GPUs through NCCL, loaded at run time: the
// CUDA backend's CollectiveHooks (backend/collective.hpp), which gd::dist uses for tensors in GPU
// memory. As with the driver and cuBLAS, nothing is needed at build time: libnccl.so.2 is opened
// with dlopen on first use ($GRADUS_NCCL first), and a missing library is a gd::device_error that
// says where it was looked for.
//
// One group per process, one GPU per rank (NCCL refuses two ranks of a group on one GPU). The
// calls run on the device's default stream, in order with the kernels: an all-reduce started
// during backward runs as soon as the kernels before it have, and the host does not wait for it.
#pragma once
#include <string>
#include <vector>

#include "gradus/backend/collective.hpp"
#include "gradus/backend/cuda/memory.hpp"
#include "gradus/backend/cuda/runtime.hpp"
#include "gradus/core/compiled.hpp"

namespace gradus::backend::cuda {

/// The part of NCCL gradus uses (signatures of nccl.h; ncclComm_t and cudaStream_t are opaque
/// pointers, the enums ints, ncclUniqueId a 128-byte struct passed by value).
struct Nccl {
  struct UniqueId {
    char bytes[128];
  };
  using GetVersion = int (*)(int*);
  using GetUniqueId = int (*)(UniqueId*);
  using CommInitRank = int (*)(void**, int, UniqueId, int);
  using AllReduce = int (*)(const void*, void*, size_t, int, int, void*, void*);
  using Broadcast = int (*)(const void*, void*, size_t, int, int, void*, void*);
  using CommDestroy = int (*)(void*);
  using GetErrorString = const char* (*)(int);

  GetVersion get_version = nullptr;
  GetUniqueId get_unique_id = nullptr;
  CommInitRank comm_init_rank = nullptr;
  AllReduce all_reduce = nullptr;
  Broadcast broadcast = nullptr;
  CommDestroy comm_destroy = nullptr;
  GetErrorString get_error_string = nullptr;
  std::string library;  ///< the file that was loaded
  std::string problem;  ///< why NCCL cannot be used; empty when it can
  int version = 0;      ///< major * 10000 + minor * 100 + patch

  static constexpr int kInt64 = 4, kFloat32 = 7, kFloat64 = 8;  // ncclDataType_t
  static constexpr int kSum = 0, kAvg = 4;                      // ncclRedOp_t (ncclAvg: NCCL 2.10)
  static constexpr int kMinVersion = 21000;

  /// The process's NCCL, loaded on first use: $GRADUS_NCCL, then libnccl.so.2 and libnccl.so on
  /// the loader's path, under $CUDA_HOME/lib64 and /usr/local/cuda/lib64.
  static const Nccl& get() {
    static const Nccl n = load();
    return n;
  }
  std::string error_string(int code) const {
    const char* s = get_error_string ? get_error_string(code) : nullptr;
    return s ? s : "NCCL error " + std::to_string(code);
  }
  void check(int rc, const char* what) const {
    if (rc != 0) [[unlikely]]
      fail(rc, what);
  }

 private:
  static Nccl load();
  [[noreturn]] void fail(int rc, const char* what) const;
};

/// The CUDA backend's collective library (NCCL); gd::cuda's constructor registers it.
CollectiveHooks nccl_hooks();

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
GRADUS_INLINE Nccl Nccl::load() {
  static Library lib([] {
    std::vector<std::string> names;
    if (const char* e = std::getenv("GRADUS_NCCL"); e && *e) names.emplace_back(e);
    std::vector<std::string> dirs{""};
    if (const char* home = std::getenv("CUDA_HOME"); home && *home) dirs.push_back(std::string(home) + "/lib64/");
    dirs.emplace_back("/usr/local/cuda/lib64/");
    for (const std::string& d : dirs)
      for (const char* suffix : {".so.2", ".so"}) names.push_back(d + "libnccl" + suffix);
    return names;
  }());
  Nccl n;
  if (!lib.loaded()) {
    n.problem = "NCCL not found (tried " + lib.tried() + "; set GRADUS_NCCL to its path)";
    return n;
  }
  n.library = lib.name();
  n.get_version = lib.find<GetVersion>("ncclGetVersion");
  n.get_unique_id = lib.find<GetUniqueId>("ncclGetUniqueId");
  n.comm_init_rank = lib.find<CommInitRank>("ncclCommInitRank");
  n.all_reduce = lib.find<AllReduce>("ncclAllReduce");
  n.broadcast = lib.find<Broadcast>("ncclBroadcast");
  n.comm_destroy = lib.find<CommDestroy>("ncclCommDestroy");
  n.get_error_string = lib.find<GetErrorString>("ncclGetErrorString");
  if (!n.get_version || !n.get_unique_id || !n.comm_init_rank || !n.all_reduce || !n.broadcast || !n.comm_destroy) {
    n.problem = "NCCL library " + n.library + " lacks the entry points gradus needs";
    return n;
  }
  if (const int rc = n.get_version(&n.version); rc != 0) {
    n.problem = "NCCL library " + n.library + ": ncclGetVersion failed: " + n.error_string(rc);
    return n;
  }
  if (n.version < kMinVersion)
    n.problem = ::gradus::detail::str("NCCL library ", n.library, " is version ", n.version / 10000, ".",
                                      n.version / 100 % 100, "; gradus needs 2.10 or later (ncclAvg)");
  return n;
}

GRADUS_INLINE void Nccl::fail(int rc, const char* what) const {
  ::gradus::detail::throw_error<device_error>({"cuda: ", what, ": ", error_string(rc), " (NCCL error ", rc, ")"});
}

GRADUS_INLINE CollectiveHooks nccl_hooks() {
  CollectiveHooks h;
  h.library = "NCCL";
  h.problem = [] { return Nccl::get().problem; };
  h.new_id = [](Device device) {
    const Nccl& n = Nccl::get();
    GRADUS_CHECK(device_error, n.problem.empty(), "cuda: collectives on ", device, ": ", n.problem);
    make_current(device.index);
    Nccl::UniqueId id{};
    n.check(n.get_unique_id(&id), "ncclGetUniqueId");
    return std::string(id.bytes, sizeof id.bytes);
  };
  h.join = [](Device device, const std::string& id, int ranks, int rank) {
    const Nccl& n = Nccl::get();
    GRADUS_CHECK(device_error, n.problem.empty(), "cuda: collectives on ", device, ": ", n.problem);
    GRADUS_CHECK(value_error, id.size() == sizeof(Nccl::UniqueId), "cuda: ncclCommInitRank: the group id has ",
                 id.size(), " bytes, NCCL's have ", sizeof(Nccl::UniqueId));
    make_current(device.index);
    Nccl::UniqueId uid{};
    id.copy(uid.bytes, sizeof uid.bytes);
    void* comm = nullptr;
    n.check(n.comm_init_rank(&comm, ranks, uid, rank), "ncclCommInitRank");
    return comm;
  };
  h.all_reduce = [](void* group, void* data, int64_t count, Scalar type, Reduce op, Device device) {
    const Nccl& n = Nccl::get();
    make_current(device.index);
    const int t = type == Scalar::f32 ? Nccl::kFloat32 : type == Scalar::f64 ? Nccl::kFloat64 : Nccl::kInt64;
    n.check(n.all_reduce(data, data, size_t(count), t, op == Reduce::mean ? Nccl::kAvg : Nccl::kSum, group, nullptr),
            "ncclAllReduce");
  };
  h.broadcast = [](void* group, void* data, int64_t count, Scalar type, int root, Device device) {
    const Nccl& n = Nccl::get();
    make_current(device.index);
    const int t = type == Scalar::f32 ? Nccl::kFloat32 : type == Scalar::f64 ? Nccl::kFloat64 : Nccl::kInt64;
    n.check(n.broadcast(data, data, size_t(count), t, root, group, nullptr), "ncclBroadcast");
  };
  h.leave = [](void* group) { Nccl::get().check(Nccl::get().comm_destroy(group), "ncclCommDestroy"); };
  return h;
}
#endif  // GRADUS_DEFINE_COMPILED

}  // namespace gradus::backend::cuda
