// Counts every operator new of the test executable it is linked into (tests/alloc, tests/ops),
// so a test can check that a warm step or op allocates nothing: tensor buffers come from
// operator new too (through the caching allocator), and so do tape nodes' pools and any
// std::vector an op builds. Every replaceable form is replaced — plain, array, aligned, nothrow,
// sized — so that no allocation reaches the library's operator new while its release comes here,
// or the reverse (a mismatch AddressSanitizer reports).
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

#include "counting_new.hpp"

namespace {
std::atomic<long> g_news{0};
void* counted(std::size_t n, std::size_t align) {
  g_news.fetch_add(1, std::memory_order_relaxed);
  if (n == 0) n = 1;  // malloc(0) may return null
  void* p = align > alignof(std::max_align_t) ? std::aligned_alloc(align, (n + align - 1) / align * align) : std::malloc(n);
  if (!p) throw std::bad_alloc();
  return p;
}
void* counted_nothrow(std::size_t n, std::size_t align) noexcept {
  try {
    return counted(n, align);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
}  // namespace

long gradus_test::allocations() { return g_news.load(std::memory_order_relaxed); }

void* operator new(std::size_t n) { return counted(n, 0); }
void* operator new[](std::size_t n) { return counted(n, 0); }
void* operator new(std::size_t n, std::align_val_t a) { return counted(n, std::size_t(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return counted(n, std::size_t(a)); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted_nothrow(n, 0); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted_nothrow(n, 0); }
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted_nothrow(n, std::size_t(a));
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted_nothrow(n, std::size_t(a));
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }

