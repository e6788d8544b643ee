// event(...): a hand-made gd::profile::Event for the tests of reports and traces.
#pragma once
#include <cstdint>
#include <string>
#include <utility>

#include "gradus/profile/event.hpp"

namespace gradus_test {

/// An event of `kind` on `thread` at `depth`, from `start` to `end` ns with `child` ns in nested
/// events; `flops` (bytes = flops / 2), `peak` and `alloc` bytes; dtype "float32" ("" for a scope).
inline gradus::profile::Event event(std::string name, std::string scope, gradus::profile::EventKind kind, int thread,
                                    int depth, int64_t start, int64_t end, int64_t child, double flops = 0,
                                    int64_t peak = 0, int64_t alloc = 0) {
  gradus::profile::Event e;
  e.name = std::move(name);
  e.scope = std::move(scope);
  e.kind = kind;
  e.thread = thread;
  e.depth = depth;
  e.start_ns = start;
  e.end_ns = end;
  e.child_ns = child;
  e.flops = flops;
  e.bytes = flops / 2;
  e.peak_bytes = peak;
  e.alloc_bytes = alloc;
  e.dtype = kind == gradus::profile::EventKind::scope ? "" : "float32";
  return e;
}

}  // namespace gradus_test
