// tests/support/counting_new.cpp replaces operator new in the executables that link it.
#pragma once

namespace gradus_test {
/// operator new calls so far in this executable.
long allocations();
}  // namespace gradus_test
