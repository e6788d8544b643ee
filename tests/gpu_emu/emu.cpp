// tests/gpu_emu/emu.cpp — an emulated CUDA device, for running gradus' GPU code without a GPU.
//
// One shared library with the three faces gradus opens with dlopen (backend/cuda/runtime.hpp,
// blas.hpp), each named by its environment variable:
//   GRADUS_CUDA_DRIVER  the driver API: one device whose "device memory" is host memory that
//                       the host cannot touch (PROT_NONE between copies and launches, guard pages
//                       around every allocation, fresh memory filled with NaN bytes), and launches
//                       that run every block and thread of the grid on the host, blocks and
//                       threads in reverse order, a block's threads as fibers so that
//                       __syncthreads and warp shuffles work; asynchronous copies on a side
//                       stream that run only when something waits for them (an event);
//   GRADUS_NVRTC        NVRTC: compiles the exact kernel source for the host with the host
//                       compiler (shim.hpp supplies the CUDA built-ins) into a shared object, and
//                       hands it back as the "PTX" (hex text, so gradus' kernel cache keeps it);
//   GRADUS_CUBLAS       cuBLAS: a column-major reference GEMM with cuBLAS's argument checks;
//   GRADUS_NCCL         NCCL: all-reduce and broadcast between the processes of a job (the ranks
//                       of an MPI test), through a POSIX shared-memory segment per group: each
//                       rank copies its device buffer in, and every rank sums the ranks' copies in
//                       rank order, so all ranks get the same bits.
// It catches host code that reads device memory, a buffer used before it is written, accesses
// past an allocation, wrong kernel arguments, leading dimensions and transposes, and gradients
// that depend on the order in which threads run. It does not see races between threads (they
// run one at a time), warp-synchronous assumptions, the device's rounding, NVRTC's own
// diagnostics, or speed. Test infrastructure: never installed.
#include <dlfcn.h>
#include <immintrin.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "context.hpp"

#ifndef GRADUS_EMU_CXX
#error "GRADUS_EMU_CXX: the host compiler that compiles the kernels"
#endif
#ifndef GRADUS_EMU_SHIM
#error "GRADUS_EMU_SHIM: the path of shim.hpp"
#endif

namespace fs = std::filesystem;
using Ptr = unsigned long long;

namespace {

// ------------------------------------------------------------------------------ device memory

constexpr int kSuccess = 0, kInvalidValue = 1, kOutOfMemory = 2, kInvalidDevice = 101,
              kInvalidImage = 200, kNotFound = 500, kLaunchFailed = 719;
constexpr size_t kDeviceMemory = size_t(8) << 30;  // what cuMemGetInfo reports as total

size_t page_size() {
  static const size_t p = size_t(sysconf(_SC_PAGESIZE));
  return p;
}

/// The transparent huge page's size, or 0 where the kernel has them off.
size_t huge_page_size() {
  static const size_t h = [] {
    std::ifstream enabled("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string modes;
    std::getline(enabled, modes);
    if (modes.find("[never]") != std::string::npos || modes.empty()) return size_t(0);
    std::ifstream pmd("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size");
    size_t bytes = 0;
    pmd >> bytes;
    return bytes > page_size() && bytes % page_size() == 0 ? bytes : size_t(0);
  }();
  return h;
}

/// One cuMemAlloc: `size` bytes at `ptr` (256-byte aligned), ending as close to the guard page
/// after it as the alignment allows, in a mapping with a guard page before and after.
struct Allocation {
  char* map = nullptr;  // the mapping: guard page, data pages, guard page
  size_t map_size = 0;
  char* data = nullptr;  // the data pages
  size_t data_size = 0;
  Ptr ptr = 0;
  size_t size = 0;
};

// The emulator's state is never destroyed: gradus frees its cached device memory from its own
// static destructors, which may run after ours would.
std::recursive_mutex& mu() {
  static auto* m = new std::recursive_mutex;
  return *m;
}
std::map<Ptr, Allocation>& allocations() {  // by ptr
  static auto* a = new std::map<Ptr, Allocation>;
  return *a;
}
size_t allocated_bytes = 0;
bool in_launch = false;           // the kernel, or a copy, may touch device memory
const char* running_kernel = "";  // for the fault message

/// The allocation holding [p, p + n), or null.
Allocation* find(Ptr p, size_t n) {
  auto& all = allocations();
  auto it = all.upper_bound(p);
  if (it == all.begin()) return nullptr;
  --it;
  Allocation& a = it->second;
  if (p < a.ptr || p + n > a.ptr + a.size || p + n < p) return nullptr;
  return &a;
}

/// Makes the allocations it is given (those a copy or a GEMM names, or those a launch's
/// parameters point into) readable while it lives, and unreadable after.
struct Open {
  Open(const char* what, std::vector<Allocation*> some) : some_(std::move(some)) {
    set(PROT_READ | PROT_WRITE);
    in_launch = true;
    running_kernel = what;
  }
  ~Open() {
    in_launch = false;
    set(PROT_NONE);
  }

 private:
  void set(int prot) {
    for (Allocation* a : some_) mprotect(a->data, a->data_size, prot);
  }
  std::vector<Allocation*> some_;
};

struct sigaction previous_segv {}, previous_bus {};

void fault_handler(int sig, siginfo_t* info, void*) {
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  char msg[512];
  int n = 0;
  for (auto& [p, a] : allocations()) {
    const auto lo = reinterpret_cast<uintptr_t>(a.map), hi = lo + a.map_size;
    if (addr < lo || addr >= hi) continue;
    if (!in_launch)
      n = std::snprintf(msg, sizeof msg,
                        "gradus GPU emulator: host code touched device memory at %#lx (an allocation of %zu bytes "
                        "at %#llx): device memory is read and written only by copies and kernels\n",
                        static_cast<unsigned long>(addr), a.size, a.ptr);
    else
      n = std::snprintf(msg, sizeof msg,
                        "gradus GPU emulator: %s accessed %#lx, outside the allocation of %zu bytes at %#llx "
                        "(%ld bytes from its start)\n",
                        running_kernel, static_cast<unsigned long>(addr), a.size, a.ptr,
                        static_cast<long>(addr - a.ptr));
    break;
  }
  if (n == 0)
    n = std::snprintf(msg, sizeof msg, "gradus GPU emulator: segmentation fault at %#lx%s%s\n",
                      static_cast<unsigned long>(addr), in_launch ? " in " : "", in_launch ? running_kernel : "");
  if (n > 0) (void)!write(2, msg, size_t(std::min<int>(n, int(sizeof msg) - 1)));
  // the handler that was there before (a test framework's report, or the default) takes over as
  // the faulting access runs again
  sigaction(sig, sig == SIGSEGV ? &previous_segv : &previous_bus, nullptr);
}

bool ours(int sig) {
  struct sigaction current {};
  sigaction(sig, nullptr, &current);
  return (current.sa_flags & SA_SIGINFO) && current.sa_sigaction == fault_handler;
}

/// Installs the fault handler unless it is the current one (a test framework may have put its
/// own in since): called by cuInit, cuMemAlloc and cuLaunchKernel.
void install_fault_handler() {
  static bool stack = false;
  if (!stack) {
    stack = true;
    static std::vector<char> alt(1 << 16);
    stack_t ss{};
    ss.ss_sp = alt.data();
    ss.ss_size = alt.size();
    sigaltstack(&ss, nullptr);
  }
  struct sigaction sa {};
  sa.sa_sigaction = fault_handler;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  if (!ours(SIGSEGV)) sigaction(SIGSEGV, &sa, &previous_segv);
  if (!ours(SIGBUS)) sigaction(SIGBUS, &sa, &previous_bus);
}

// --------------------------------------------------------------------------------------- fibers

/// A block's threads run as fibers on the host thread that launches: each has its own stack, and
/// __syncthreads switches back to the scheduler, which resumes the next thread. The switch saves
/// the callee-saved registers and the stack pointer (x86-64 System V).
///
/// A thread starts with gradus_emu_start: it saves the scheduler as the switch does, and calls
/// `body` on the thread's stack. A body that ends without waiting at a barrier returns there, and
/// the scheduler continues where it last switched away, so a kernel without barriers runs each
/// thread as a call and a return (the return address predicted) rather than two switches.
extern "C" void gradus_emu_switch(void** save_sp, void* load_sp);
extern "C" void gradus_emu_start(void** save_sp, void* stack_top, void (*body)());
asm(R"(
# save: the callee-saved registers onto the stack, then the stack pointer to (to);
# load: the stack pointer from `from`, its callee-saved registers, and return where it was saved
.macro gradus_emu_save to
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (\to)
.endm
.macro gradus_emu_load from
  movq \from, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
.endm
.text
.globl gradus_emu_switch
.type gradus_emu_switch,@function
gradus_emu_switch:
  gradus_emu_save %rdi
  gradus_emu_load %rsi
.size gradus_emu_switch, .-gradus_emu_switch
.globl gradus_emu_start
.type gradus_emu_start,@function
gradus_emu_start:
  gradus_emu_save %rdi
  movq %rdi, %rbx
  movq %rsi, %rsp
  callq *%rdx
  gradus_emu_load (%rbx)
.size gradus_emu_start, .-gradus_emu_start
.section .note.GNU-stack,"",@progbits
.text
)");

using Entry = void (*)(void**);
using Bind = void (*)(gradus_emu::Context*);

enum class FiberState { ready, waiting, done };

struct Fiber {
  char* stack = nullptr;  // kStack bytes above a guard page
  void* sp = nullptr;
  FiberState state = FiberState::ready;
};

constexpr size_t kStack = size_t(256) << 10;

struct Scheduler {
  gradus_emu::Context ctx;
  std::vector<Fiber> fibers;
  std::vector<char*> stacks;  // kept across launches
  void* scheduler_sp = nullptr;
  int current = -1;
  Entry entry = nullptr;
  void** args = nullptr;
};
Scheduler sched;

/// A thread, from its start on its own stack to its end (see gradus_emu_start).
void fiber_body() {
  sched.entry(sched.args);
  sched.fibers[size_t(sched.current)].state = FiberState::done;
}

void fiber_sync() {
  Fiber& f = sched.fibers[size_t(sched.current)];
  f.state = FiberState::waiting;
  gradus_emu_switch(&f.sp, sched.scheduler_sp);
}

char* stack_for(size_t k) {
  while (sched.stacks.size() <= k) {
    void* m = mmap(nullptr, kStack + page_size(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    mprotect(m, page_size(), PROT_NONE);  // overflow faults
    sched.stacks.push_back(static_cast<char*>(m) + page_size());
  }
  return sched.stacks[k];
}

/// Runs one block: its threads in reverse order up to the next barrier, round after round. A
/// thread gets a stack when it starts, and one that ends without waiting at a barrier leaves its
/// stack to the next: the threads of a kernel without barriers all run on one stack, warm in the
/// cache, instead of touching a cold one each.
void run_block(unsigned threads) {
  sched.fibers.assign(threads, Fiber{});
  size_t held = 0;  // stacks [0, held) hold threads waiting at a barrier
  for (;;) {
    bool waiting = false;
    for (unsigned i = threads; i-- > 0;) {
      Fiber& f = sched.fibers[i];
      if (f.state != FiberState::ready) continue;
      sched.current = int(i);
      sched.ctx.thread_idx = {i, 0, 0};
      if (!f.stack) {
        f.stack = stack_for(held);
        gradus_emu_start(&sched.scheduler_sp, f.stack + kStack, &fiber_body);
      } else {
        gradus_emu_switch(&sched.scheduler_sp, f.sp);
      }
      if (f.state == FiberState::waiting) {
        waiting = true;
        if (f.stack == sched.stacks[held]) ++held;
      }
    }
    if (!waiting) break;
    for (Fiber& f : sched.fibers)
      if (f.state == FiberState::waiting) f.state = FiberState::ready;
  }
}

// ------------------------------------------------------------------------------------- modules

struct Module {
  void* handle = nullptr;
  std::string file;
};
struct Function {
  Entry entry = nullptr;
  Bind bind = nullptr;
  const unsigned long* sizes = nullptr;  // the number of parameters, then each one's size
  std::string name;
};
std::vector<std::unique_ptr<Module>>& modules() {
  static auto* m = new std::vector<std::unique_ptr<Module>>;
  return *m;
}
std::vector<std::unique_ptr<Function>>& functions() {
  static auto* f = new std::vector<std::unique_ptr<Function>>;
  return *f;
}

/// The process's scratch directory (sources, objects, loaded modules), removed at exit.
std::string made_work_dir;  // empty until work_dir() makes it
const fs::path& work_dir() {
  static const fs::path dir = [] {
    std::string tmpl = (fs::temp_directory_path() / "gradus-gpu-emu-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) {
      std::perror("gradus GPU emulator: mkdtemp");
      std::abort();
    }
    made_work_dir = tmpl;
    return fs::path(tmpl);
  }();
  return dir;
}
struct WorkDirCleanup {
  ~WorkDirCleanup() {
    std::error_code ec;
    if (!made_work_dir.empty()) fs::remove_all(made_work_dir, ec);
  }
} cleanup;

constexpr const char* kImageMagic = "// gradus GPU emulator module, hex\n";

std::string to_hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2 + bytes.size() / 64 + 64);
  out += kImageMagic;
  for (size_t i = 0; i < bytes.size(); ++i) {
    const auto b = static_cast<unsigned char>(bytes[i]);
    out += digits[b >> 4];
    out += digits[b & 15];
    if (i % 64 == 63) out += '\n';
  }
  out += '\n';
  return out;
}

bool from_hex(const char* text, std::string& bytes) {
  const size_t magic = std::strlen(kImageMagic);
  if (std::strncmp(text, kImageMagic, magic) != 0) return false;
  int hi = -1;
  for (const char* p = text + magic; *p; ++p) {
    int v = -1;
    if (*p >= '0' && *p <= '9') v = *p - '0';
    else if (*p >= 'a' && *p <= 'f') v = *p - 'a' + 10;
    else if (*p == '\n') continue;
    else return false;
    if (hi < 0) {
      hi = v;
    } else {
      bytes += char(hi << 4 | v);
      hi = -1;
    }
  }
  return hi < 0 && !bytes.empty();
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// -------------------------------------------------------------------------------------- NVRTC

struct Program {
  std::string source, name, log, image;
};

/// Runs `command`; its output (stdout and stderr) goes to `out`. The exit status.
int run(const std::string& command, std::string& out) {
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  return pclose(p);
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

/// What NVRTC defines, and the language: the kernels take the branches of gradus' device headers
/// a GPU build takes.
constexpr const char* kFlags = " -std=c++20 -D__CUDACC_RTC__";

/// The header every kernel of this process is compiled with first, for the include flags
/// `includes`: the shim and the headers every generated kernel includes, precompiled once (a
/// kernel then compiles in a quarter of the time); the shim alone if that fails.
std::string prelude(const std::string& includes) {
  static std::map<std::string, std::string> made;  // by include flags
  auto [it, fresh] = made.try_emplace(includes);
  if (!fresh) return it->second;
  const fs::path header = work_dir() / ("prelude" + std::to_string(made.size()) + ".hpp");
  std::ofstream(header) << "#include \"" << GRADUS_EMU_SHIM << "\"\n"
                        << "#if __has_include(\"gradus/ops/elementwise_math.hpp\")\n"
                           "#include \"gradus/backend/cuda/nvrtc_prelude.hpp\"\n"
                           "#include \"gradus/backend/cuda/element.hpp\"\n"
                           "#include \"gradus/backend/cuda/kernel_args.hpp\"\n"
                           "#include \"gradus/ops/elementwise_math.hpp\"\n"
                           "#endif\n";
  std::string out;
  const bool pch = run(std::string(GRADUS_EMU_CXX) + kFlags + " -O1 -fPIC -w" + includes + " -x c++-header " +
                           quote(header.string()) + " -o " + quote(header.string() + ".gch"),
                       out) == 0;
  it->second = pch ? header.string() : std::string(GRADUS_EMU_SHIM);
  return it->second;
}

/// Compiles a program for the host: preprocesses it once to find its kernels (every
/// `extern "C" __global__ void name(`), then compiles it with one entry point per kernel,
/// gradus_emu_entry_<name>(void** params), which calls the kernel with its parameters as
/// cuLaunchKernel passes them.
int compile(Program& prog, const std::vector<std::string>& options) {
  static int counter = 0;
  const fs::path dir = work_dir() / ("program" + std::to_string(counter++));
  fs::create_directories(dir);
  const fs::path source = dir / "kernel.cu", wrapper = dir / "kernel_emu.cpp", object = dir / "kernel.so";
  std::ofstream(source) << prog.source;
  std::string includes;
  for (const std::string& o : options) {
    if (o.rfind("--include-path=", 0) == 0) includes += " -I" + quote(o.substr(15));
    else if (o.rfind("-I", 0) == 0) includes += " " + quote(o);
  }
  const std::string cxx = std::string(GRADUS_EMU_CXX) + kFlags + " -include " + quote(prelude(includes)) + includes;
  // A source that spells its kernels out (a generated kernel) is read as it is; one that may make
  // them with macros (the library's, which includes its .cuh files) is preprocessed first.
  std::vector<std::string> kernels;
  std::string text = prog.source;
  if (text.find(".cuh") != std::string::npos || text.find("##") != std::string::npos) {
    text.clear();
    if (run(cxx + " -E -P -D__global__=__global__GRADUS_EMU -x c++ " + quote(source.string()), text) != 0) {
      prog.log = text;
      return 6;  // NVRTC_ERROR_COMPILATION
    }
  }
  static const std::regex kernel(R"(__global__(?:GRADUS_EMU)?\s+void\s+([A-Za-z_][A-Za-z0-9_]*)\s*\()");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kernel); it != std::sregex_iterator(); ++it)
    kernels.push_back((*it)[1]);
  std::ostringstream w;
  // the entry points, written without the standard library (NVRTC's world has none)
  w << "#include \"" << source.string() << "\"\n"
    << "extern \"C\" { gradus_emu::Context* gradus_emu_context = nullptr;\n"
    << "void gradus_emu_bind(gradus_emu::Context* c) { gradus_emu_context = c; } }\n"
    << "namespace {\n"
    << "template <class T> struct gradus_emu_bare { using type = T; };\n"
    << "template <class T> struct gradus_emu_bare<const T> { using type = T; };\n"
    << "template <class T> struct gradus_emu_bare<T&> { using type = T; };\n"
    << "template <class T> struct gradus_emu_bare<const T&> { using type = T; };\n"
    << "template <unsigned long... I> struct gradus_emu_seq {};\n"
    << "template <unsigned long N, unsigned long... I> struct gradus_emu_make_seq : gradus_emu_make_seq<N - 1, N - 1, I...> {};\n"
    << "template <unsigned long... I> struct gradus_emu_make_seq<0, I...> { using type = gradus_emu_seq<I...>; };\n"
    << "template <class... A, unsigned long... I>\n"
    << "void gradus_emu_call(void (*f)(A...), void** params, gradus_emu_seq<I...>) {\n"
    << "  f(*static_cast<typename gradus_emu_bare<A>::type*>(params[I])...);\n}\n"
    << "template <unsigned long N> struct gradus_emu_sizes_of { unsigned long v[N]; };\n"
    << "template <class... A>\nconstexpr auto gradus_emu_sizes(void (*)(A...)) {\n"
    << "  return gradus_emu_sizes_of<sizeof...(A) + 1>{{sizeof...(A), sizeof(typename gradus_emu_bare<A>::type)...}};\n}\n"
    << "}  // namespace\n";
  for (const std::string& k : kernels)
    w << "extern \"C\" void gradus_emu_entry_" << k << "(void** params) {\n"
      << "  gradus_emu_call(" << k << ", params, typename gradus_emu_make_seq<gradus_emu_sizes(" << k
      << ").v[0]>::type{});\n}\n"
      << "extern \"C\" const auto gradus_emu_sizes_" << k << " = gradus_emu_sizes(" << k << ");\n";
  std::ofstream(wrapper) << w.str();
  std::string out;
  // linked without the default libraries: the process that loads the module has them loaded (the
  // C, math and C++ libraries its symbols come from), and the link takes a quarter of the time
  const int rc =
      run(cxx + " -O1 -fPIC -shared -nodefaultlibs -w -o " + quote(object.string()) + " " + quote(wrapper.string()) + " -lgcc", out);
  prog.log = out;
  if (rc != 0) return 6;
  prog.image = to_hex(read_file(object));
  return 0;
}

// ------------------------------------------------------------------------------------- cuBLAS

constexpr int kBlasSuccess = 0, kBlasNotInitialized = 1, kBlasInvalidValue = 7, kBlasExecutionFailed = 13,
              kBlasNotSupported = 15;
constexpr int kOpN = 0, kOpT = 1;
int blas_handles = 0;

constexpr long kRowBlock = 256;

/// acc (m x n) = a (m x k) b (k x n), all column-major and packed: each element summed from zero
/// in order of p with fused multiply-adds, as a GPU's GEMM does. Every form below gives the same
/// bits (fma rounds once, with or without FMA instructions); they differ only in speed.
template <class T>
void product(long m, long n, long k, const T* a, const T* b, T* acc) {
  for (long i0 = 0; i0 < m; i0 += kRowBlock) {  // a block of a's rows stays in the cache
    const long rows = std::min(kRowBlock, m - i0);
    for (long j = 0; j < n; ++j) {
      T* c = acc + j * m + i0;
      std::fill(c, c + rows, T(0));
      for (long p = 0; p < k; ++p) {
        const T y = b[p + j * k];
        const T* x = a + p * m + i0;
        for (long i = 0; i < rows; ++i) c[i] = std::fma(x[i], y, c[i]);
      }
    }
  }
}

// With AVX2 + FMA (picked at run time): a tile of two vectors of rows by up to four columns stays
// in registers for the whole sum over p, so each step loads two vectors of `a` and four scalars of
// `b` for eight fused multiply-adds. The examples' GEMMs on the emulated device spend a third of
// their time here.
struct AvxFloat {
  using T = float;
  using V = __m256;
  static constexpr long width = 8;
  [[gnu::target("avx2,fma"), gnu::always_inline]] static V zero() { return _mm256_setzero_ps(); }
  [[gnu::target("avx2,fma"), gnu::always_inline]] static V load(const T* p) { return _mm256_loadu_ps(p); }
  [[gnu::target("avx2,fma"), gnu::always_inline]] static V broadcast(T x) { return _mm256_set1_ps(x); }
  [[gnu::target("avx2,fma"), gnu::always_inline]] static V fma(V x, V y, V c) { return _mm256_fmadd_ps(x, y, c); }
  [[gnu::target("avx2,fma"), gnu::always_inline]] static void store(T* p, V v) { _mm256_storeu_ps(p, v); }
};
struct AvxDouble {
  using T = double;
  using V = __m256d;
  static constexpr long width = 4;
  [[gnu::target("avx2,fma"), gnu::always_inline]] static V zero() { return _mm256_setzero_pd(); }
  [[gnu::target("avx2,fma"), gnu::always_inline]] static V load(const T* p) { return _mm256_loadu_pd(p); }
  [[gnu::target("avx2,fma"), gnu::always_inline]] static V broadcast(T x) { return _mm256_set1_pd(x); }
  [[gnu::target("avx2,fma"), gnu::always_inline]] static V fma(V x, V y, V c) { return _mm256_fmadd_pd(x, y, c); }
  [[gnu::target("avx2,fma"), gnu::always_inline]] static void store(T* p, V v) { _mm256_storeu_pd(p, v); }
};

/// Rows [i0, i0 + 2 * S::width) of columns [j0, j0 + Cols) of acc.
template <class S, int Cols>
[[gnu::target("avx2,fma"), gnu::always_inline]] inline void product_tile(long m, long k, const typename S::T* a,
                                                                        const typename S::T* b, typename S::T* acc,
                                                                        long i0, long j0) {
  using V = typename S::V;
  V c[Cols][2];
  for (auto& column : c) column[0] = column[1] = S::zero();
  for (long p = 0; p < k; ++p) {
    const V x0 = S::load(a + p * m + i0), x1 = S::load(a + p * m + i0 + S::width);
    for (int j = 0; j < Cols; ++j) {
      const V y = S::broadcast(b[p + (j0 + j) * k]);
      c[j][0] = S::fma(x0, y, c[j][0]);
      c[j][1] = S::fma(x1, y, c[j][1]);
    }
  }
  for (int j = 0; j < Cols; ++j) {
    S::store(acc + (j0 + j) * m + i0, c[j][0]);
    S::store(acc + (j0 + j) * m + i0 + S::width, c[j][1]);
  }
}

template <class S>
[[gnu::target("avx2,fma")]] void product_fma(long m, long n, long k, const typename S::T* a, const typename S::T* b,
                                             typename S::T* acc) {
  using T = typename S::T;
  constexpr long rows = 2 * S::width;
  const long tiled = m - m % rows;
  for (long j0 = 0; j0 < n; j0 += 4) {
    const long cols = std::min(4L, n - j0);
    for (long i0 = 0; i0 < tiled; i0 += rows) {
      if (cols == 4) product_tile<S, 4>(m, k, a, b, acc, i0, j0);
      else if (cols == 3) product_tile<S, 3>(m, k, a, b, acc, i0, j0);
      else if (cols == 2) product_tile<S, 2>(m, k, a, b, acc, i0, j0);
      else product_tile<S, 1>(m, k, a, b, acc, i0, j0);
    }
    for (long j = j0; j < j0 + cols; ++j)  // the last rows, one element at a time
      for (long i = tiled; i < m; ++i) {
        T s = 0;
        for (long p = 0; p < k; ++p) s = std::fma(a[i + p * m], b[p + j * k], s);
        acc[i + j * m] = s;
      }
  }
}
void product_fma(long m, long n, long k, const float* a, const float* b, float* acc) {
  product_fma<AvxFloat>(m, n, k, a, b, acc);
}
void product_fma(long m, long n, long k, const double* a, const double* b, double* acc) {
  product_fma<AvxDouble>(m, n, k, a, b, acc);
}

/// How a product reads its inputs: as they are, or rounded to nearest-even bfloat16 or half (what
/// cuBLAS's compute types CUBLAS_COMPUTE_32F_FAST_16BF and _FAST_16F allow it to do; the emulated
/// device always does it, the worst case a GPU may show).
enum class InputRounding { none, bf16, fp16 };
float round_input(float x, InputRounding r) {
  if (r == InputRounding::fp16) return float(static_cast<_Float16>(x));
  if (r == InputRounding::bf16 && x == x) {
    uint32_t bits;
    std::memcpy(&bits, &x, 4);
    bits += 0x7fffu + ((bits >> 16) & 1u);  // to nearest, ties to even (an overflow becomes inf)
    bits &= 0xffff0000u;
    std::memcpy(&x, &bits, 4);
  }
  return x;
}
double round_input(double x, InputRounding) { return x; }

/// C = alpha op(A) op(B) + beta C, column-major, as cublas<t>gemm; C is not read when beta = 0.
template <class T>
int gemm(void* handle, int ta, int tb, int m, int n, int k, const T* alpha, const T* A, int lda, const T* B, int ldb,
         const T* beta, T* C, int ldc, InputRounding rounding = InputRounding::none) {
  std::lock_guard lock(mu());
  if (!handle) return kBlasNotInitialized;
  if ((ta != kOpN && ta != kOpT) || (tb != kOpN && tb != kOpT) || m < 0 || n < 0 || k < 0) return kBlasInvalidValue;
  const int a_rows = ta == kOpN ? m : k, a_cols = ta == kOpN ? k : m;
  const int b_rows = tb == kOpN ? k : n, b_cols = tb == kOpN ? n : k;
  if (lda < std::max(1, a_rows) || ldb < std::max(1, b_rows) || ldc < std::max(1, m)) return kBlasInvalidValue;
  if (!alpha || !beta) return kBlasInvalidValue;
  if (m == 0 || n == 0) return kBlasSuccess;
  const auto in_device = [](const void* p, long elements) {
    return elements <= 0 || find(reinterpret_cast<Ptr>(p), size_t(elements) * sizeof(T)) != nullptr;
  };
  if ((k > 0 && (!in_device(A, long(lda) * (a_cols - 1) + a_rows) || !in_device(B, long(ldb) * (b_cols - 1) + b_rows))) ||
      !in_device(C, long(ldc) * (n - 1) + m))
    return kBlasInvalidValue;  // an operand outside device memory
  std::vector<Allocation*> operands{find(reinterpret_cast<Ptr>(C), 1)};
  for (const T* x : {A, B})
    if (Allocation* o = k > 0 ? find(reinterpret_cast<Ptr>(x), 1) : nullptr;
        o && std::find(operands.begin(), operands.end(), o) == operands.end())
      operands.push_back(o);
  Open open("cublasgemm", std::move(operands));
  std::vector<T> a(size_t(m) * size_t(k)), b(size_t(k) * size_t(n)), acc(size_t(m) * size_t(n));
  for (long p = 0; p < k; ++p)
    for (long i = 0; i < m; ++i) a[size_t(i + p * m)] = round_input(ta == kOpN ? A[i + p * lda] : A[p + i * lda], rounding);
  for (long j = 0; j < n; ++j)
    for (long p = 0; p < k; ++p) b[size_t(p + j * k)] = round_input(tb == kOpN ? B[p + j * ldb] : B[j + p * ldb], rounding);
  static const bool fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (fma) product_fma(m, n, k, a.data(), b.data(), acc.data());
  else product(m, n, k, a.data(), b.data(), acc.data());
  const T x = *alpha, y = *beta;
  for (long j = 0; j < n; ++j)
    for (long i = 0; i < m; ++i) {
      T& c = C[i + j * ldc];
      c = y == T(0) ? x * acc[size_t(i + j * m)] : x * acc[size_t(i + j * m)] + y * c;
    }
  return kBlasSuccess;
}


// ------------------------------------------------------------- streams, events and pinned memory

/// A stream other than the default one (gradus makes them non-blocking). Its copies stay queued
/// until something waits for them: an event on it synchronised, or waited on by the default
/// stream, or the stream or the context synchronised. So a kernel that reads a buffer without
/// waiting for the copy into it sees memory nobody wrote (NaN), and a host buffer rewritten before
/// its copy ran shows in the copied data, as on a GPU that has not run the copy yet.
struct PendingCopy {
  Ptr dst;
  const void* src;
  size_t n;
};
struct SideStream {
  std::vector<PendingCopy> queue;  // queue[k] is copy number `run + k`
  size_t issued = 0, run = 0;      // copies issued, copies done
};
struct Event {
  SideStream* stream = nullptr;  // null: recorded on the default stream (complete at once)
  size_t upto = 0;               // complete once the stream has run this many copies
};
std::vector<SideStream*>& side_streams() {
  static auto* s = new std::vector<SideStream*>;
  return *s;
}
std::vector<Event*>& events() {
  static auto* e = new std::vector<Event*>;
  return *e;
}

/// Runs the queued copies of `s` up to number `upto`. False when one targets freed memory.
bool run_until(SideStream* s, size_t upto) {
  bool ok = true;
  while (s->run < upto && !s->queue.empty()) {
    const PendingCopy c = s->queue.front();
    s->queue.erase(s->queue.begin());
    ++s->run;
    Allocation* a = find(c.dst, c.n);
    if (!a) {
      std::fprintf(stderr, "gradus GPU emulator: an asynchronous copy of %zu bytes to %#llx found its device memory "
                   "freed before it ran\n", c.n, c.dst);
      ok = false;
      continue;
    }
    Open open("cuMemcpyHtoDAsync", {a});
    std::memcpy(reinterpret_cast<void*>(c.dst), c.src, c.n);
  }
  return ok;
}
bool run_all() {
  bool ok = true;
  for (SideStream* s : side_streams()) ok = run_until(s, s->issued) && ok;
  return ok;
}

// --------------------------------------------------------------------------------------- NCCL

constexpr int kNcclSuccess = 0, kNcclSystemError = 2, kNcclInvalidArgument = 4, kNcclInvalidUsage = 5;
constexpr int kNcclInt64 = 4, kNcclFloat32 = 7, kNcclFloat64 = 8;
constexpr int kNcclSum = 0, kNcclAvg = 4;
constexpr size_t kSlotBytes = size_t(1) << 20;  // each rank's window per round: larger buffers go in rounds
constexpr auto kPeerTimeout = std::chrono::seconds(120);

struct NcclUniqueId {
  char bytes[128];
};

/// The segment every rank of a group maps: a barrier, then one slot per rank.
struct Shared {
  std::atomic<int> arrived;
  std::atomic<unsigned> generation;
  alignas(64) char slots[1];  // ranks * kSlotBytes
};

struct Comm {
  Shared* shared = nullptr;
  size_t map_size = 0;
  int ranks = 0, rank = 0;
  char* slot(int r) const { return shared->slots + size_t(r) * kSlotBytes; }
};

/// Waits until every rank of the group has arrived (a generation counter: the last one to arrive
/// opens the next generation). False when a peer has not come within kPeerTimeout.
bool barrier(const Comm& c) {
  const unsigned gen = c.shared->generation.load();
  if (c.shared->arrived.fetch_add(1) + 1 == c.ranks) {
    c.shared->arrived.store(0);
    c.shared->generation.fetch_add(1);
    return true;
  }
  const auto start = std::chrono::steady_clock::now();
  for (long spins = 0; c.shared->generation.load() == gen; ++spins) {
    if (spins < 1000) continue;
    sched_yield();
    if (spins % 4096 == 0 && std::chrono::steady_clock::now() - start > kPeerTimeout) {
      std::fprintf(stderr, "gradus GPU emulator: NCCL rank %d waited %lld s for its peers\n", c.rank,
                   static_cast<long long>(kPeerTimeout.count()));
      return false;
    }
  }
  return true;
}

size_t nccl_size(int type) {
  return type == kNcclInt64 || type == kNcclFloat64 ? 8 : type == kNcclFloat32 ? 4 : 0;
}

/// dst[i] = the sum over ranks of slot(r)[i] (rank order), times 1/ranks for a mean.
template <class T>
void sum_slots(const Comm& c, T* dst, size_t n, bool mean) {
  for (size_t i = 0; i < n; ++i) {
    T acc = reinterpret_cast<const T*>(c.slot(0))[i];
    for (int r = 1; r < c.ranks; ++r) acc += reinterpret_cast<const T*>(c.slot(r))[i];
    dst[i] = mean ? acc * (T(1) / T(c.ranks)) : acc;
  }
}

}  // namespace

// ------------------------------------------------------------------------------ the driver API

// Calls after which a real driver's host has waited for the GPU's earlier kernels: a context
// synchronize, a synchronize on the default stream or on an event recorded there, the blocking
// copies to and from pageable host memory, and the frees (which wait for the work that may still
// use the memory). Waits for a side stream's copies alone are not counted. gradus_emu_host_waits()
// reads the count, so a test can check that a training step leaves the host free.
// With $GRADUS_EMU_TRACE_WAITS set, each such call is also named on stderr.
std::atomic<unsigned long long> host_waits{0};
std::atomic<unsigned long long> launches{0};
void host_wait(const char* call) {
  ++host_waits;
  static const bool trace = std::getenv("GRADUS_EMU_TRACE_WAITS") != nullptr;
  if (trace) std::fprintf(stderr, "emulated device: the host waits in %s\n", call);
}

extern "C" {

unsigned long long gradus_emu_host_waits() { return host_waits.load(); }
/// Kernels launched (cuLaunchKernel) and cuBLAS products called so far: launches per step. With
/// $GRADUS_EMU_TRACE_LAUNCHES set, each kernel launch is also named on stderr.
unsigned long long gradus_emu_launches() { return launches.load(); }

int cuInit(unsigned) {
  std::lock_guard lock(mu());
  install_fault_handler();
  return kSuccess;
}
int cuDeviceGetCount(int* count) {
  *count = 1;
  return kSuccess;
}
int cuDeviceGet(int* dev, int ordinal) {
  if (ordinal != 0) return kInvalidDevice;
  *dev = 0;
  return kSuccess;
}
int cuDeviceGetName(char* name, int len, int dev) {
  if (dev != 0 || len <= 0) return kInvalidValue;
  std::snprintf(name, size_t(len), "%s", "gradus emulated GPU (host)");
  return kSuccess;
}
int cuDeviceGetAttribute(int* value, int attribute, int dev) {
  if (dev != 0) return kInvalidDevice;
  switch (attribute) {
    case 75: *value = 9; break;   // compute capability major
    case 76: *value = 0; break;   // minor
    case 16: *value = 2; break;   // multiprocessors: small grids keep the emulation quick
    case 1: *value = 1024; break; // max threads per block
    default: *value = 0;
  }
  return kSuccess;
}
int cuGetErrorString(int code, const char** s) {
  switch (code) {
    case kSuccess: *s = "no error"; break;
    case kInvalidValue: *s = "invalid argument (emulated device)"; break;
    case kOutOfMemory: *s = "out of memory (emulated device)"; break;
    case kInvalidImage: *s = "device kernel image is invalid (emulated device)"; break;
    case kNotFound: *s = "named symbol not found (emulated device)"; break;
    case kLaunchFailed: *s = "unspecified launch failure (emulated device)"; break;
    default: *s = "unknown error (emulated device)";
  }
  return kSuccess;
}
int cuDevicePrimaryCtxRetain(void** ctx, int dev) {
  if (dev != 0) return kInvalidDevice;
  static int context;
  *ctx = &context;
  return kSuccess;
}
thread_local void* current_context = nullptr;
int cuCtxSetCurrent(void* ctx) {
  current_context = ctx;
  return kSuccess;
}
int cuCtxGetCurrent(void** ctx) {
  if (!ctx) return kInvalidValue;
  *ctx = current_context;
  return kSuccess;
}
int cuMemcpyHtoD_v2(Ptr dst, const void* src, size_t n);
int cuCtxSynchronize() {
  host_wait("cuCtxSynchronize");
  std::lock_guard lock(mu());
  return run_all() ? kSuccess : kLaunchFailed;
}
int cuStreamSynchronize(void* stream) {
  if (!stream) host_wait("cuStreamSynchronize");
  std::lock_guard lock(mu());
  auto* s = static_cast<SideStream*>(stream);
  return !s || run_until(s, s->issued) ? kSuccess : kLaunchFailed;
}
int cuStreamCreate(void** stream, unsigned flags) {
  std::lock_guard lock(mu());
  if (!stream || flags != 1) return kInvalidValue;  // CU_STREAM_NON_BLOCKING: what the emulator models
  side_streams().push_back(new SideStream);
  *stream = side_streams().back();
  return kSuccess;
}
int cuStreamDestroy_v2(void* stream) {
  std::lock_guard lock(mu());
  auto& all = side_streams();
  auto it = std::find(all.begin(), all.end(), static_cast<SideStream*>(stream));
  if (it == all.end()) return kInvalidValue;
  run_until(*it, (*it)->issued);  // the work queued on a destroyed stream still completes
  delete *it;
  all.erase(it);
  return kSuccess;
}
int cuEventCreate(void** event, unsigned) {
  std::lock_guard lock(mu());
  if (!event) return kInvalidValue;
  events().push_back(new Event);
  *event = events().back();
  return kSuccess;
}
int cuEventDestroy_v2(void* event) {
  std::lock_guard lock(mu());
  auto& all = events();
  auto it = std::find(all.begin(), all.end(), static_cast<Event*>(event));
  if (it == all.end()) return kInvalidValue;
  delete *it;
  all.erase(it);
  return kSuccess;
}
int cuEventRecord(void* event, void* stream) {
  std::lock_guard lock(mu());
  auto* e = static_cast<Event*>(event);
  if (!e) return kInvalidValue;
  e->stream = static_cast<SideStream*>(stream);
  e->upto = e->stream ? e->stream->issued : 0;
  return kSuccess;
}
int cuEventSynchronize(void* event) {
  std::lock_guard lock(mu());
  auto* e = static_cast<Event*>(event);
  if (!e) return kInvalidValue;
  if (!e->stream) host_wait("cuEventSynchronize");
  return !e->stream || run_until(e->stream, e->upto) ? kSuccess : kLaunchFailed;
}
int cuStreamWaitEvent(void* /*stream*/, void* event, unsigned) {
  std::lock_guard lock(mu());
  auto* e = static_cast<Event*>(event);
  if (!e) return kInvalidValue;
  // the waiting stream's later work runs after the event's copies: run them now (the default
  // stream runs its work as it is issued; a side stream's later copies are queued behind these)
  return !e->stream || run_until(e->stream, e->upto) ? kSuccess : kLaunchFailed;
}
int cuMemcpyHtoDAsync_v2(Ptr dst, const void* src, size_t n, void* stream) {
  if (!stream) return cuMemcpyHtoD_v2(dst, src, n);
  std::lock_guard lock(mu());
  if (n == 0) return kSuccess;
  if (!find(dst, n) || !src) return kInvalidValue;
  auto* s = static_cast<SideStream*>(stream);
  s->queue.push_back({dst, src, n});
  ++s->issued;
  return kSuccess;
}
int cuMemHostAlloc(void** p, size_t n, unsigned) {
  if (!p || n == 0) return kInvalidValue;
  *p = std::aligned_alloc(4096, (n + 4095) / 4096 * 4096);
  return *p ? kSuccess : kOutOfMemory;
}
int cuMemFreeHost(void* p) {
  host_wait("cuMemFreeHost");
  std::lock_guard lock(mu());
  run_all();  // as the driver, which waits for the copies that may read it
  std::free(p);
  return kSuccess;
}

int cuMemAlloc_v2(Ptr* dptr, size_t size) {
  std::lock_guard lock(mu());
  install_fault_handler();
  if (size == 0) return kInvalidValue;
  if (allocated_bytes + size > kDeviceMemory) return kOutOfMemory;
  // An allocation of a quarter of a huge page or more is made of huge pages (where the kernel
  // gives them): each launch that names it opens and closes it with mprotect, whose cost grows
  // with the number of page-table entries, 512 times fewer with them. The allocation still ends
  // at the guard after it; an access before it, in the rest of its first huge page, is not caught.
  const size_t huge = huge_page_size();
  const bool huge_pages = huge != 0 && size >= huge / 4;
  const size_t page = huge_pages ? huge : page_size();
  Allocation a;
  a.data_size = (size + 255 + page - 1) / page * page;
  a.map_size = a.data_size + 2 * page;
  // with huge pages, one page more, to align the data to one
  void* m = mmap(nullptr, a.map_size + (huge_pages ? page : 0), PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return kOutOfMemory;
  a.map = static_cast<char*>(m);
  if (huge_pages) {  // the data aligned to a huge page: give back the parts before and after
    const auto base = reinterpret_cast<uintptr_t>(m);
    const size_t lead = ((base + page - 1) / page * page) - base;
    if (lead) munmap(m, lead);
    munmap(a.map + lead + a.map_size, page - lead);
    a.map += lead;
  }
  a.data = a.map + page;
  // The data is a mapping of its own, which the guard pages (MAP_NORESERVE) around it cannot
  // merge with: opening and closing it then changes one mapping's protection, instead of
  // splitting the merged mapping of every allocation beside it and merging it back each time.
  if (mmap(a.data, a.data_size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED) {
    munmap(a.map, a.map_size);
    return kOutOfMemory;
  }
  if (huge_pages) madvise(a.data, a.data_size, MADV_HUGEPAGE);
  // the end of the data as close to the guard page after it as 256-byte alignment allows
  const auto end = reinterpret_cast<uintptr_t>(a.data + a.data_size);
  a.ptr = Ptr((end - size) & ~uintptr_t(255));
  a.size = size;
  mprotect(a.data, a.data_size, PROT_READ | PROT_WRITE);
  std::memset(a.data, 0xff, a.data_size);  // NaN in float and double: unwritten memory shows
  if (!in_launch) mprotect(a.data, a.data_size, PROT_NONE);
  allocations()[a.ptr] = a;
  allocated_bytes += size;
  *dptr = a.ptr;
  return kSuccess;
}
int cuMemFree_v2(Ptr p) {
  host_wait("cuMemFree");
  std::lock_guard lock(mu());
  run_all();  // as the driver: copies queued into it finish first
  auto it = allocations().find(p);
  if (it == allocations().end()) return kInvalidValue;
  munmap(it->second.map, it->second.map_size);
  allocated_bytes -= it->second.size;
  allocations().erase(it);
  return kSuccess;
}
int cuMemGetInfo_v2(size_t* free, size_t* total) {
  std::lock_guard lock(mu());
  *free = kDeviceMemory - allocated_bytes;
  *total = kDeviceMemory;
  return kSuccess;
}
int cuMemcpyHtoD_v2(Ptr dst, const void* src, size_t n) {
  host_wait("cuMemcpyHtoD");
  std::lock_guard lock(mu());
  if (n == 0) return kSuccess;
  Allocation* a = find(dst, n);
  if (!a) return kInvalidValue;
  Open open("cuMemcpyHtoD", {a});
  std::memcpy(reinterpret_cast<void*>(dst), src, n);
  return kSuccess;
}
int cuMemcpyDtoH_v2(void* dst, Ptr src, size_t n) {
  host_wait("cuMemcpyDtoH");
  std::lock_guard lock(mu());
  if (n == 0) return kSuccess;
  Allocation* a = find(src, n);
  if (!a) return kInvalidValue;
  Open open("cuMemcpyDtoH", {a});
  std::memcpy(dst, reinterpret_cast<const void*>(src), n);
  return kSuccess;
}
int cuMemcpyDtoD_v2(Ptr dst, Ptr src, size_t n) {
  std::lock_guard lock(mu());
  if (n == 0) return kSuccess;
  Allocation *a = find(dst, n), *b = find(src, n);
  if (!a || !b) return kInvalidValue;
  Open open("cuMemcpyDtoD", a == b ? std::vector<Allocation*>{a} : std::vector<Allocation*>{a, b});
  std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n);
  return kSuccess;
}
int cuMemsetD8_v2(Ptr dst, unsigned char v, size_t n) {
  std::lock_guard lock(mu());
  if (n == 0) return kSuccess;
  Allocation* a = find(dst, n);
  if (!a) return kInvalidValue;
  Open open("cuMemsetD8", {a});
  std::memset(reinterpret_cast<void*>(dst), v, n);
  return kSuccess;
}

int cuModuleLoadData(void** module, const void* image) {
  std::lock_guard lock(mu());
  std::string bytes;
  if (!image || !from_hex(static_cast<const char*>(image), bytes)) return kInvalidImage;
  static int counter = 0;
  auto m = std::make_unique<Module>();
  m->file = (work_dir() / ("module" + std::to_string(counter++) + ".so")).string();
  std::ofstream(m->file, std::ios::binary) << bytes;
  m->handle = dlopen(m->file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!m->handle) {
    std::fprintf(stderr, "gradus GPU emulator: cannot load a module: %s\n", dlerror());
    return kInvalidImage;
  }
  *module = m.get();
  modules().push_back(std::move(m));
  return kSuccess;
}
int cuModuleGetFunction(void** function, void* module, const char* name) {
  std::lock_guard lock(mu());
  auto* m = static_cast<Module*>(module);
  auto f = std::make_unique<Function>();
  f->entry = reinterpret_cast<Entry>(dlsym(m->handle, ("gradus_emu_entry_" + std::string(name)).c_str()));
  f->bind = reinterpret_cast<Bind>(dlsym(m->handle, "gradus_emu_bind"));
  f->sizes = static_cast<const unsigned long*>(dlsym(m->handle, ("gradus_emu_sizes_" + std::string(name)).c_str()));
  f->name = std::string("kernel ") + name;
  if (!f->entry || !f->bind || !f->sizes) return kNotFound;
  *function = f.get();
  functions().push_back(std::move(f));
  return kSuccess;
}
int cuOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, void* function, int block_size, size_t) {
  if (!blocks || !function || block_size <= 0 || block_size > 1024) return kInvalidValue;
  *blocks = std::max(1, 2048 / block_size);  // 2,048 resident threads per multiprocessor, as on sm_90
  return kSuccess;
}
int cuLaunchKernel(void* function, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void* /*stream*/, void** params, void** extra) {
  ++launches;
  std::lock_guard lock(mu());
  install_fault_handler();
  auto* f = static_cast<Function*>(function);
  // gradus launches one-dimensional grids of one-dimensional blocks, with no dynamic shared memory
  if (!f || gx == 0 || bx == 0 || bx > 1024 || gy != 1 || gz != 1 || by != 1 || bz != 1 || shared != 0 || extra)
    return kInvalidValue;
  static const bool trace = std::getenv("GRADUS_EMU_TRACE_LAUNCHES") != nullptr;
  if (trace) std::fprintf(stderr, "emulated device: launch %s, %u blocks of %u\n", f->name.c_str(), gx, bx);
  sched.ctx.grid_dim = {gx, 1, 1};
  sched.ctx.block_dim = {bx, 1, 1};
  sched.ctx.sync = &fiber_sync;
  sched.entry = f->entry;
  sched.args = params;
  f->bind(&sched.ctx);
  // only the allocations the parameters point into (every 8-byte word of each is looked up) are
  // opened: the kernel can reach no other (a pointer computed from another is out of bounds)
  std::vector<Allocation*> reached;
  for (unsigned long i = 0; i < f->sizes[0]; ++i)
    for (unsigned long at = 0; at + sizeof(Ptr) <= f->sizes[i + 1]; at += sizeof(Ptr)) {
      Ptr word = 0;
      std::memcpy(&word, static_cast<const char*>(params[i]) + at, sizeof word);
      if (Allocation* a = find(word, 1); a && std::find(reached.begin(), reached.end(), a) == reached.end())
        reached.push_back(a);
    }
  Open open(f->name.c_str(), std::move(reached));
  for (unsigned b = gx; b-- > 0;) {  // in reverse: no kernel may rely on the order of blocks
    sched.ctx.block_idx = {b, 0, 0};
    run_block(bx);
  }
  return kSuccess;
}

// ------------------------------------------------------------------------------------ NVRTC API

int nvrtcVersion(int* major, int* minor) {
  *major = 13;
  *minor = 0;
  return 0;
}
int nvrtcCreateProgram(void** prog, const char* src, const char* name, int num_headers, const char* const*,
                       const char* const*) {
  if (!prog || !src || num_headers != 0) return 1;  // NVRTC_ERROR_INVALID_INPUT (gradus passes no headers)
  auto* p = new Program;
  p->source = src;
  p->name = name ? name : "default_program";
  *prog = p;
  return 0;
}
int nvrtcCompileProgram(void* prog, int n, const char* const* options) {
  std::lock_guard lock(mu());
  std::vector<std::string> opts(options, options + n);
  return compile(*static_cast<Program*>(prog), opts);
}
int nvrtcGetProgramLogSize(void* prog, size_t* size) {
  *size = static_cast<Program*>(prog)->log.size() + 1;
  return 0;
}
int nvrtcGetProgramLog(void* prog, char* log) {
  const std::string& l = static_cast<Program*>(prog)->log;
  std::memcpy(log, l.c_str(), l.size() + 1);
  return 0;
}
int nvrtcGetPTXSize(void* prog, size_t* size) {
  *size = static_cast<Program*>(prog)->image.size() + 1;
  return 0;
}
int nvrtcGetPTX(void* prog, char* ptx) {
  const std::string& i = static_cast<Program*>(prog)->image;
  std::memcpy(ptx, i.c_str(), i.size() + 1);
  return 0;
}
int nvrtcDestroyProgram(void** prog) {
  delete static_cast<Program*>(*prog);
  *prog = nullptr;
  return 0;
}
const char* nvrtcGetErrorString(int code) {
  return code == 0 ? "NVRTC_SUCCESS" : code == 6 ? "NVRTC_ERROR_COMPILATION (emulated)" : "NVRTC_ERROR (emulated)";
}

// ----------------------------------------------------------------------------------- cuBLAS API

int cublasCreate_v2(void** handle) {
  std::lock_guard lock(mu());
  *handle = &blas_handles;
  return kBlasSuccess;
}
int cublasDestroy_v2(void*) { return kBlasSuccess; }
int cublasSetMathMode(void* handle, int) { return handle ? kBlasSuccess : kBlasNotInitialized; }
int cublasSetStream_v2(void* handle, void*) { return handle ? kBlasSuccess : kBlasNotInitialized; }
const char* cublasGetStatusString(int status) {
  switch (status) {
    case kBlasSuccess: return "CUBLAS_STATUS_SUCCESS";
    case kBlasNotInitialized: return "CUBLAS_STATUS_NOT_INITIALIZED (emulated)";
    case kBlasInvalidValue: return "CUBLAS_STATUS_INVALID_VALUE (emulated)";
    case kBlasExecutionFailed: return "CUBLAS_STATUS_EXECUTION_FAILED (emulated)";
    default: return "CUBLAS_STATUS_UNKNOWN (emulated)";
  }
}
int cublasSgemm_v2(void* handle, int ta, int tb, int m, int n, int k, const float* alpha, const float* A, int lda,
                   const float* B, int ldb, const float* beta, float* C, int ldc) {
  ++launches;
  return gemm(handle, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}
int cublasDgemm_v2(void* handle, int ta, int tb, int m, int n, int k, const double* alpha, const double* A, int lda,
                   const double* B, int ldb, const double* beta, double* C, int ldc) {
  ++launches;
  return gemm(handle, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}
/// The float forms of cublasGemmEx: A, B and C CUDA_R_32F (0), computeType CUBLAS_COMPUTE_32F (68),
/// its _PEDANTIC (69) and _FAST_TF32 (77) forms as a float product, _FAST_16F (74) and _FAST_16BF
/// (75) with the inputs rounded; any other type CUBLAS_STATUS_NOT_SUPPORTED, as cuBLAS answers.
int cublasGemmEx(void* handle, int ta, int tb, int m, int n, int k, const void* alpha, const void* A, int atype,
                 int lda, const void* B, int btype, int ldb, const void* beta, void* C, int ctype, int ldc,
                 int compute, int /*algo*/) {
  ++launches;
  if (atype != 0 || btype != 0 || ctype != 0) return kBlasNotSupported;
  InputRounding r;
  switch (compute) {
    case 68: case 69: case 77: r = InputRounding::none; break;
    case 74: r = InputRounding::fp16; break;
    case 75: r = InputRounding::bf16; break;
    default: return kBlasNotSupported;
  }
  return gemm(handle, ta, tb, m, n, k, static_cast<const float*>(alpha), static_cast<const float*>(A), lda,
              static_cast<const float*>(B), ldb, static_cast<const float*>(beta), static_cast<float*>(C), ldc, r);
}

// ------------------------------------------------------------------------------------- NCCL API

int ncclGetVersion(int* version) {
  if (!version) return kNcclInvalidArgument;
  *version = 22800;  // 2.28.0
  return kNcclSuccess;
}
const char* ncclGetErrorString(int code) {
  switch (code) {
    case kNcclSuccess: return "no error";
    case kNcclSystemError: return "unhandled system error (emulated: a peer did not arrive)";
    case kNcclInvalidArgument: return "invalid argument (emulated)";
    case kNcclInvalidUsage: return "invalid usage (emulated)";
    default: return "unknown result code (emulated)";
  }
}
int ncclGetUniqueId(NcclUniqueId* id) {
  if (!id) return kNcclInvalidArgument;
  static std::atomic<int> counter{0};
  std::memset(id->bytes, 0, sizeof id->bytes);
  std::snprintf(id->bytes, sizeof id->bytes, "/gradus-emu-nccl-%d-%d-%lld", int(getpid()), counter++,
                static_cast<long long>(std::chrono::steady_clock::now().time_since_epoch().count()));
  return kNcclSuccess;
}
int ncclCommInitRank(void** comm, int ranks, NcclUniqueId id, int rank) {
  if (!comm || ranks < 1 || rank < 0 || rank >= ranks || id.bytes[0] != '/') return kNcclInvalidArgument;
  char name[sizeof id.bytes + 1] = {};
  std::memcpy(name, id.bytes, sizeof id.bytes);
  const int fd = shm_open(name, O_CREAT | O_RDWR, 0600);
  if (fd < 0) return kNcclSystemError;
  auto c = std::make_unique<Comm>();
  c->ranks = ranks;
  c->rank = rank;
  c->map_size = offsetof(Shared, slots) + size_t(ranks) * kSlotBytes;
  if (ftruncate(fd, off_t(c->map_size)) != 0) {
    close(fd);
    return kNcclSystemError;
  }
  void* m = mmap(nullptr, c->map_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (m == MAP_FAILED) return kNcclSystemError;
  c->shared = static_cast<Shared*>(m);  // zero-filled by ftruncate: no one has arrived
  if (!barrier(*c)) return kNcclSystemError;
  if (rank == 0) shm_unlink(name);  // every rank has it mapped now
  *comm = c.release();
  return kNcclSuccess;
}
int ncclCommDestroy(void* comm) {
  auto* c = static_cast<Comm*>(comm);
  if (!c) return kNcclInvalidArgument;
  munmap(c->shared, c->map_size);
  delete c;
  return kNcclSuccess;
}
int ncclAllReduce(const void* send, void* recv, size_t count, int type, int op, void* comm, void*) {
  std::lock_guard lock(mu());
  const auto* c = static_cast<const Comm*>(comm);
  const size_t size = nccl_size(type);
  if (!c || size == 0 || (op != kNcclSum && op != kNcclAvg)) return kNcclInvalidArgument;
  if (count == 0) return kNcclSuccess;
  Allocation *in = find(reinterpret_cast<Ptr>(send), count * size), *out = find(reinterpret_cast<Ptr>(recv), count * size);
  if (!in || !out) return kNcclInvalidArgument;  // a buffer outside device memory
  Open open("ncclAllReduce", in == out ? std::vector<Allocation*>{in} : std::vector<Allocation*>{in, out});
  const size_t per_round = kSlotBytes / size;
  for (size_t first = 0; first < count; first += per_round) {
    const size_t n = std::min(per_round, count - first);
    std::memcpy(c->slot(c->rank), static_cast<const char*>(send) + first * size, n * size);
    if (!barrier(*c)) return kNcclSystemError;
    char* dst = static_cast<char*>(recv) + first * size;
    if (type == kNcclFloat32) sum_slots(*c, reinterpret_cast<float*>(dst), n, op == kNcclAvg);
    else if (type == kNcclFloat64) sum_slots(*c, reinterpret_cast<double*>(dst), n, op == kNcclAvg);
    else sum_slots(*c, reinterpret_cast<long long*>(dst), n, op == kNcclAvg);
    if (!barrier(*c)) return kNcclSystemError;  // no rank refills its slot before all have read
  }
  return kNcclSuccess;
}
int ncclBroadcast(const void* send, void* recv, size_t count, int type, int root, void* comm, void*) {
  std::lock_guard lock(mu());
  const auto* c = static_cast<const Comm*>(comm);
  const size_t size = nccl_size(type);
  if (!c || size == 0 || root < 0 || root >= c->ranks) return kNcclInvalidArgument;
  if (count == 0) return kNcclSuccess;
  Allocation* out = find(reinterpret_cast<Ptr>(recv), count * size);
  Allocation* in = c->rank == root ? find(reinterpret_cast<Ptr>(send), count * size) : out;
  if (!in || !out) return kNcclInvalidArgument;
  Open open("ncclBroadcast", in == out ? std::vector<Allocation*>{in} : std::vector<Allocation*>{in, out});
  for (size_t first = 0; first < count * size; first += kSlotBytes) {
    const size_t n = std::min(kSlotBytes, count * size - first);
    if (c->rank == root) std::memcpy(c->slot(0), static_cast<const char*>(send) + first, n);
    if (!barrier(*c)) return kNcclSystemError;
    if (c->rank != root || send != recv) std::memcpy(static_cast<char*>(recv) + first, c->slot(0), n);
    if (!barrier(*c)) return kNcclSystemError;
  }
  return kNcclSuccess;
}

}  // extern "C"
