// GRADUS_TEST_ASAN: 1 in a build with AddressSanitizer (g++'s __SANITIZE_ADDRESS__, clang++'s
// __has_feature), else 0. Tests that limit the address space (RLIMIT_AS) need it off: the
// sanitizer reserves terabytes of address space for its shadow memory.
#pragma once
#if defined(__SANITIZE_ADDRESS__)
#define GRADUS_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GRADUS_TEST_ASAN 1
#endif
#endif
#ifndef GRADUS_TEST_ASAN
#define GRADUS_TEST_ASAN 0
#endif
