// Counts every operator new of the test_ops executable, so the registry test can check that a
// warm call of an op allocates nothing (tensor buffers come from operator new too, through the
// caching allocator, and so do tape nodes' pools and any std::vector an op builds). The same
// mechanism as tests/alloc; it only counts, so the other tests of this folder are unaffected.
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

namespace opreg {
namespace {
std::atomic<long> g_news{0};
void* counted(std::size_t n, std::size_t align) {
  g_news.fetch_add(1, std::memory_order_relaxed);
  if (n == 0) n = 1;
  void* p = align > alignof(std::max_align_t) ? std::aligned_alloc(align, (n + align - 1) / align * align) : std::malloc(n);
  if (!p) throw std::bad_alloc();
  return p;
}
}  // namespace
long allocations() { return g_news.load(std::memory_order_relaxed); }
}  // namespace opreg

void* operator new(std::size_t n) { return opreg::counted(n, 0); }
void* operator new[](std::size_t n) { return opreg::counted(n, 0); }
void* operator new(std::size_t n, std::align_val_t a) { return opreg::counted(n, std::size_t(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return opreg::counted(n, std::size_t(a)); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
