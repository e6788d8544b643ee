// gradus/backend/cuda/runtime.hpp — the CUDA driver and NVRTC, loaded at run time.
//
// Nothing here needs the CUDA headers or libraries at build time: the driver (libcuda.so.1) and
// NVRTC (libnvrtc.so.<major>) are opened with dlopen on first use and their entry points looked
// up by name, so user code is compiled by the host compiler and one binary runs with or without
// a GPU. Where a library is missing, the functions that need it throw gd::device_error saying
// which library was not found and where it was looked for.
#pragma once
#include <dlfcn.h>

#include <cstddef>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "gradus/core/compiled.hpp"
#include "gradus/core/error.hpp"

namespace gradus::backend::cuda {

/// A shared library opened by the first name in `names` that loads (absolute paths allowed).
class Library {
 public:
  explicit Library(std::vector<std::string> names) : names_(std::move(names)) {
    for (const std::string& n : names_) {
      handle_ = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle_) {
        loaded_ = n;
        break;
      }
    }
  }
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  // The handle stays open for the life of the process: kernels and contexts may outlive any
  // static destructor order.

  bool loaded() const { return handle_ != nullptr; }
  const std::string& name() const { return loaded_; }
  /// The names tried, for an error message: `libcuda.so.1, ...`.
  std::string tried() const {
    std::string s;
    for (const std::string& n : names_) s += (s.empty() ? "" : ", ") + n;
    return s;
  }
  /// The entry point `symbol` as a function pointer of type F, or nullptr.
  template <class F>
  F find(const char* symbol) const {
    return handle_ ? reinterpret_cast<F>(dlsym(handle_, symbol)) : nullptr;
  }

 private:
  std::vector<std::string> names_;
  std::string loaded_;
  void* handle_ = nullptr;
};

// ------------------------------------------------------------------------------------- driver

/// The part of the CUDA driver API gradus uses (signatures of cuda.h; CUresult is an int enum,
/// CUdevice an int).
struct Driver {
  using Init = int (*)(unsigned);
  using DeviceGetCount = int (*)(int*);
  using DeviceGet = int (*)(int*, int);
  using DeviceGetName = int (*)(char*, int, int);
  using DeviceGetAttribute = int (*)(int*, int, int);
  using GetErrorString = int (*)(int, const char**);

  // contexts, memory, modules, launches and streams (CUcontext, CUmodule, CUfunction and
  // CUstream are opaque pointers; CUdeviceptr is an unsigned 64-bit integer)
  using Ptr = unsigned long long;
  using PrimaryCtxRetain = int (*)(void**, int);
  using CtxSetCurrent = int (*)(void*);
  using CtxSynchronize = int (*)();
  using MemAlloc = int (*)(Ptr*, size_t);
  using MemFree = int (*)(Ptr);
  using MemGetInfo = int (*)(size_t*, size_t*);
  using MemcpyHtoD = int (*)(Ptr, const void*, size_t);
  using MemcpyDtoH = int (*)(void*, Ptr, size_t);
  using MemcpyDtoD = int (*)(Ptr, Ptr, size_t);
  using MemsetD8 = int (*)(Ptr, unsigned char, size_t);
  using ModuleLoadData = int (*)(void**, const void*);
  using ModuleGetFunction = int (*)(void**, void*, const char*);
  using LaunchKernel = int (*)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*,
                               void**, void**);
  using StreamSynchronize = int (*)(void*);
  // streams, events and page-locked host memory (CUevent is an opaque pointer)
  using StreamCreate = int (*)(void**, unsigned);
  using StreamDestroy = int (*)(void*);
  using StreamWaitEvent = int (*)(void*, void*, unsigned);
  using EventCreate = int (*)(void**, unsigned);
  using EventDestroy = int (*)(void*);
  using EventRecord = int (*)(void*, void*);
  using EventSynchronize = int (*)(void*);
  using MemcpyHtoDAsync = int (*)(Ptr, const void*, size_t, void*);
  using MemHostAlloc = int (*)(void**, size_t, unsigned);
  using MemFreeHost = int (*)(void*);
  using OccupancyMaxActiveBlocks = int (*)(int*, void*, int, size_t);
  using CtxGetCurrent = int (*)(void**);

  Init init = nullptr;
  DeviceGetCount device_get_count = nullptr;
  DeviceGet device_get = nullptr;
  DeviceGetName device_get_name = nullptr;
  DeviceGetAttribute device_get_attribute = nullptr;
  GetErrorString get_error_string = nullptr;
  PrimaryCtxRetain primary_ctx_retain = nullptr;
  CtxSetCurrent ctx_set_current = nullptr;
  CtxSynchronize ctx_synchronize = nullptr;
  MemAlloc mem_alloc = nullptr;
  MemFree mem_free = nullptr;
  MemGetInfo mem_get_info = nullptr;
  MemcpyHtoD memcpy_htod = nullptr;
  MemcpyDtoH memcpy_dtoh = nullptr;
  MemcpyDtoD memcpy_dtod = nullptr;
  MemsetD8 memset_d8 = nullptr;
  ModuleLoadData module_load_data = nullptr;
  ModuleGetFunction module_get_function = nullptr;
  LaunchKernel launch_kernel = nullptr;
  StreamSynchronize stream_synchronize = nullptr;
  StreamCreate stream_create = nullptr;
  StreamDestroy stream_destroy = nullptr;
  StreamWaitEvent stream_wait_event = nullptr;
  EventCreate event_create = nullptr;
  EventDestroy event_destroy = nullptr;
  EventRecord event_record = nullptr;
  EventSynchronize event_synchronize = nullptr;
  MemcpyHtoDAsync memcpy_htod_async = nullptr;
  MemHostAlloc mem_host_alloc = nullptr;
  MemFreeHost mem_free_host = nullptr;
  /// Optional: resident blocks of a kernel per multiprocessor (null: 8 of 256 threads assumed).
  OccupancyMaxActiveBlocks occupancy_max_active_blocks = nullptr;
  /// Optional: the calling thread's current context (null: gradus trusts its own record).
  CtxGetCurrent ctx_get_current = nullptr;
  std::string problem;  ///< why the driver cannot be used; empty when it can
  int devices = 0;

  static constexpr int kComputeCapabilityMajor = 75, kComputeCapabilityMinor = 76;  // CUdevice_attribute

  /// The process's driver, loaded and initialised on first use.
  static const Driver& get() {
    static const Driver d = load();
    return d;
  }

  std::string error_string(int code) const {
    const char* s = nullptr;
    if (get_error_string && get_error_string(code, &s) == 0 && s) return s;
    return "CUDA driver error " + std::to_string(code);
  }

  /// Throws gd::device_error `what: <driver's message>` when `rc` is not CUDA_SUCCESS.
  void check(int rc, const char* what) const {
    if (rc != 0) [[unlikely]]
      fail(rc, what);
  }

  /// Launches `fn` on the default stream (`blocks` × `threads`) and checks the launch. With
  /// GRADUS_CUDA_SYNC=1 in the environment it also waits for the kernel, so a fault is reported
  /// by the launch that caused it — `what` and the kernel `name()` (called only then) — rather
  /// than by a later, unrelated copy.
  template <class Name>
  void launch(void* fn, unsigned blocks, unsigned threads, void** params, const char* what, Name&& name) const {
    check(launch_kernel(fn, blocks, 1, 1, threads, 1, 1, 0, nullptr, params, nullptr), what);
    if (sync_each_launch) [[unlikely]]
      if (const int rc = ctx_synchronize(); rc != 0) fail_after_launch(rc, what, std::string(name()));
  }
  bool sync_each_launch = false;  ///< GRADUS_CUDA_SYNC=1: wait for every kernel at its launch

 private:
  static Driver load();
  [[noreturn]] void fail(int rc, const char* what) const;
  [[noreturn]] void fail_after_launch(int rc, const char* what, const std::string& kernel) const;
};

/// Where a CUDA toolkit library `stem` (libnvrtc, libcublas) is looked for, in order: the path in
/// environment variable `env`, then the CUDA 13 and 12 sonames and the plain name on the loader's
/// path, under $CUDA_HOME/lib64 and under /usr/local/cuda/lib64.
std::vector<std::string> toolkit_library_names(const char* env, const std::string& stem);

// --------------------------------------------------------------------------------------- NVRTC

/// NVRTC, the runtime compiler of CUDA C++ (signatures of nvrtc.h; nvrtcResult is an int enum,
/// nvrtcProgram an opaque pointer).
struct Nvrtc {
  using Program = void*;
  using Version = int (*)(int*, int*);
  using CreateProgram = int (*)(Program*, const char*, const char*, int, const char* const*, const char* const*);
  using CompileProgram = int (*)(Program, int, const char* const*);
  using GetSize = int (*)(Program, size_t*);
  using GetText = int (*)(Program, char*);
  using DestroyProgram = int (*)(Program*);
  using GetErrorString = const char* (*)(int);

  Version version = nullptr;
  CreateProgram create_program = nullptr;
  CompileProgram compile_program = nullptr;
  GetSize get_log_size = nullptr, get_ptx_size = nullptr;
  GetText get_log = nullptr, get_ptx = nullptr;
  DestroyProgram destroy_program = nullptr;
  GetErrorString get_error_string = nullptr;
  std::string library;  ///< the file that was loaded
  std::string problem;  ///< why NVRTC cannot be used; empty when it can
  int major = 0, minor = 0;

  /// The process's NVRTC, loaded on first use. GRADUS_NVRTC names the library to load first;
  /// then the CUDA 13 and 12 sonames on the loader's path and under $CUDA_HOME/lib64 and
  /// /usr/local/cuda/lib64.
  static const Nvrtc& get() {
    static const Nvrtc n = load();
    return n;
  }

  std::string error_string(int code) const {
    const char* s = get_error_string ? get_error_string(code) : nullptr;
    return s ? s : "NVRTC error " + std::to_string(code);
  }

 private:
  static Nvrtc load();
};

/// True when NVRTC can be loaded (kernels can be compiled, with or without a GPU).
inline bool nvrtc_available() { return Nvrtc::get().problem.empty(); }

/// Compiles CUDA C++ `source` (translation unit `name`) for virtual architecture `arch`
/// (`compute_80`, `compute_90`, ...) and returns the PTX. A compile error throws
/// gd::device_error with NVRTC's log; so does a missing NVRTC.
///   std::string ptx = compile_ptx(src, "gradus_kernel.cu", "compute_90");
std::string compile_ptx(const std::string& source, const std::string& name, const std::string& arch,
                        const std::vector<std::string>& extra_options = {});

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
GRADUS_INLINE Driver Driver::load() {
  // GRADUS_CUDA_DRIVER names a driver library to load first (the test suite's emulated device)
  static Library lib([] {
    std::vector<std::string> names;
    if (const char* e = std::getenv("GRADUS_CUDA_DRIVER"); e && *e) names.emplace_back(e);
    names.emplace_back("libcuda.so.1");
    names.emplace_back("libcuda.so");
    return names;
  }());
  Driver d;
  if (const char* e = std::getenv("GRADUS_CUDA_SYNC"); e && std::string_view(e) == "1") d.sync_each_launch = true;
  if (!lib.loaded()) {
    d.problem = "no CUDA driver (" + lib.tried() + " not found)";
    return d;
  }
  d.init = lib.find<Init>("cuInit");
  d.device_get_count = lib.find<DeviceGetCount>("cuDeviceGetCount");
  d.device_get = lib.find<DeviceGet>("cuDeviceGet");
  d.device_get_name = lib.find<DeviceGetName>("cuDeviceGetName");
  d.device_get_attribute = lib.find<DeviceGetAttribute>("cuDeviceGetAttribute");
  d.get_error_string = lib.find<GetErrorString>("cuGetErrorString");
  // the _v2 names are those cuda.h maps the plain names to (64-bit sizes and pointers)
  d.primary_ctx_retain = lib.find<PrimaryCtxRetain>("cuDevicePrimaryCtxRetain");
  d.ctx_set_current = lib.find<CtxSetCurrent>("cuCtxSetCurrent");
  d.ctx_synchronize = lib.find<CtxSynchronize>("cuCtxSynchronize");
  d.mem_alloc = lib.find<MemAlloc>("cuMemAlloc_v2");
  d.mem_free = lib.find<MemFree>("cuMemFree_v2");
  d.mem_get_info = lib.find<MemGetInfo>("cuMemGetInfo_v2");
  d.memcpy_htod = lib.find<MemcpyHtoD>("cuMemcpyHtoD_v2");
  d.memcpy_dtoh = lib.find<MemcpyDtoH>("cuMemcpyDtoH_v2");
  d.memcpy_dtod = lib.find<MemcpyDtoD>("cuMemcpyDtoD_v2");
  d.memset_d8 = lib.find<MemsetD8>("cuMemsetD8_v2");
  d.module_load_data = lib.find<ModuleLoadData>("cuModuleLoadData");
  d.module_get_function = lib.find<ModuleGetFunction>("cuModuleGetFunction");
  d.launch_kernel = lib.find<LaunchKernel>("cuLaunchKernel");
  d.stream_synchronize = lib.find<StreamSynchronize>("cuStreamSynchronize");
  d.stream_create = lib.find<StreamCreate>("cuStreamCreate");
  d.stream_destroy = lib.find<StreamDestroy>("cuStreamDestroy_v2");
  d.stream_wait_event = lib.find<StreamWaitEvent>("cuStreamWaitEvent");
  d.event_create = lib.find<EventCreate>("cuEventCreate");
  d.event_destroy = lib.find<EventDestroy>("cuEventDestroy_v2");
  d.event_record = lib.find<EventRecord>("cuEventRecord");
  d.event_synchronize = lib.find<EventSynchronize>("cuEventSynchronize");
  d.memcpy_htod_async = lib.find<MemcpyHtoDAsync>("cuMemcpyHtoDAsync_v2");
  d.mem_host_alloc = lib.find<MemHostAlloc>("cuMemHostAlloc");
  d.mem_free_host = lib.find<MemFreeHost>("cuMemFreeHost");
  d.occupancy_max_active_blocks = lib.find<OccupancyMaxActiveBlocks>("cuOccupancyMaxActiveBlocksPerMultiprocessor");
  d.ctx_get_current = lib.find<CtxGetCurrent>("cuCtxGetCurrent");
  if (!d.init || !d.device_get_count || !d.device_get || !d.device_get_name || !d.device_get_attribute ||
      !d.primary_ctx_retain || !d.ctx_set_current || !d.ctx_synchronize || !d.mem_alloc || !d.mem_free ||
      !d.mem_get_info || !d.memcpy_htod || !d.memcpy_dtoh || !d.memcpy_dtod || !d.memset_d8 ||
      !d.module_load_data || !d.module_get_function || !d.launch_kernel || !d.stream_synchronize ||
      !d.stream_create || !d.stream_destroy || !d.stream_wait_event || !d.event_create || !d.event_destroy ||
      !d.event_record || !d.event_synchronize || !d.memcpy_htod_async || !d.mem_host_alloc || !d.mem_free_host) {
    d.problem = "the CUDA driver " + lib.name() + " lacks the entry points gradus needs";
    return d;
  }
  if (const int rc = d.init(0); rc != 0) {
    d.problem = "the CUDA driver failed to initialise: " + d.error_string(rc);
    return d;
  }
  if (const int rc = d.device_get_count(&d.devices); rc != 0) {
    d.problem = "the CUDA driver cannot count devices: " + d.error_string(rc);
    d.devices = 0;
    return d;
  }
  if (d.devices == 0) d.problem = "the CUDA driver reports no GPU";
  return d;
}

GRADUS_INLINE std::vector<std::string> toolkit_library_names(const char* env, const std::string& stem) {
  std::vector<std::string> names;
  if (const char* e = std::getenv(env); e && *e) names.emplace_back(e);
  std::vector<std::string> dirs{""};
  if (const char* home = std::getenv("CUDA_HOME"); home && *home) dirs.push_back(std::string(home) + "/lib64/");
  dirs.emplace_back("/usr/local/cuda/lib64/");
  for (const std::string& d : dirs)
    for (const char* suffix : {".so.13", ".so.12", ".so"}) names.push_back(d + stem + suffix);
  return names;
}

GRADUS_INLINE Nvrtc Nvrtc::load() {
  static Library lib(toolkit_library_names("GRADUS_NVRTC", "libnvrtc"));
  Nvrtc n;
  if (!lib.loaded()) {
    n.problem = "NVRTC not found (tried " + lib.tried() + "; set GRADUS_NVRTC to its path)";
    return n;
  }
  n.library = lib.name();
  n.version = lib.find<Version>("nvrtcVersion");
  n.create_program = lib.find<CreateProgram>("nvrtcCreateProgram");
  n.compile_program = lib.find<CompileProgram>("nvrtcCompileProgram");
  n.get_log_size = lib.find<GetSize>("nvrtcGetProgramLogSize");
  n.get_log = lib.find<GetText>("nvrtcGetProgramLog");
  n.get_ptx_size = lib.find<GetSize>("nvrtcGetPTXSize");
  n.get_ptx = lib.find<GetText>("nvrtcGetPTX");
  n.destroy_program = lib.find<DestroyProgram>("nvrtcDestroyProgram");
  n.get_error_string = lib.find<GetErrorString>("nvrtcGetErrorString");
  if (!n.version || !n.create_program || !n.compile_program || !n.get_log_size || !n.get_log ||
      !n.get_ptx_size || !n.get_ptx || !n.destroy_program) {
    n.problem = "NVRTC library " + n.library + " lacks the entry points gradus needs";
    return n;
  }
  n.version(&n.major, &n.minor);
  return n;
}

GRADUS_INLINE std::string compile_ptx(const std::string& source, const std::string& name, const std::string& arch,
                                      const std::vector<std::string>& extra_options) {
  const Nvrtc& n = Nvrtc::get();
  GRADUS_CHECK(device_error, n.problem.empty(), "cuda: cannot compile ", name, ": ", n.problem);
  Nvrtc::Program prog = nullptr;
  if (const int rc = n.create_program(&prog, source.c_str(), name.c_str(), 0, nullptr, nullptr); rc != 0)
    ::gradus::detail::throw_error<device_error>({"cuda: nvrtcCreateProgram(", name, "): ", n.error_string(rc)});
  struct Destroy {
    const Nvrtc& n;
    Nvrtc::Program& p;
    ~Destroy() { n.destroy_program(&p); }
  } destroy{n, prog};
  std::vector<std::string> opts{"--gpu-architecture=" + arch, "--std=c++20"};
  opts.insert(opts.end(), extra_options.begin(), extra_options.end());
  std::vector<const char*> argv;
  for (const std::string& o : opts) argv.push_back(o.c_str());
  const int rc = n.compile_program(prog, int(argv.size()), argv.data());
  size_t log_size = 0;
  n.get_log_size(prog, &log_size);
  std::string log(log_size, '\0');
  if (log_size > 1) n.get_log(prog, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  if (rc != 0)
    ::gradus::detail::throw_error<device_error>({"cuda: NVRTC could not compile ", name, " for ", arch, " (",
                                                 n.error_string(rc), "):\n", log});
  size_t ptx_size = 0;
  n.get_ptx_size(prog, &ptx_size);
  std::string ptx(ptx_size, '\0');
  n.get_ptx(prog, ptx.data());
  while (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
  return ptx;
}
#endif  // GRADUS_DEFINE_COMPILED
}  // namespace gradus::backend::cuda

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::backend::cuda {
GRADUS_INLINE void Driver::fail(int rc, const char* what) const {
  ::gradus::detail::throw_error<device_error>({"cuda: ", what, ": ", error_string(rc), " (CUDA error ", rc, ")"});
}
GRADUS_INLINE void Driver::fail_after_launch(int rc, const char* what, const std::string& kernel) const {
  ::gradus::detail::throw_error<device_error>({"cuda: ", what, ": kernel ", kernel, " failed: ", error_string(rc),
                                               " (CUDA error ", rc,
                                               "; found by GRADUS_CUDA_SYNC=1 right after its launch)"});
}
}  // namespace gradus::backend::cuda
#endif  // GRADUS_DEFINE_COMPILED
