// gradus/io/file.hpp — whole-file reads and atomic whole-file writes (POSIX).
//
// write_file_atomic never leaves a half-written file under the target name: it writes a
// temporary file in the same directory (".<name>.tmp-<pid>-<n>-<nonce>", created exclusively,
// <name> cut to 200 bytes), fsyncs it, renames it over the target and fsyncs the directory. A crash or an error before the
// rename leaves the previous file as it was (a crash may leave the temporary file behind; readers
// never look at it, and the next successful write of the same target removes it). Both
// functions throw io_error naming the path and the system's reason.
#pragma once
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "gradus/core/compiled.hpp"
#include "gradus/core/error.hpp"

namespace gradus::io {

namespace detail {

/// The file descriptor of an open file, closed on destruction.
struct Fd {
  int fd = -1;
  Fd() = default;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  /// Closes now; returns close()'s result (errno is set on failure).
  int close() { return ::close(std::exchange(fd, -1)); }
};

inline std::string errno_text(int e) { return std::strerror(e); }

/// Reads the whole file; io_error (prefixed `who`) when it is missing, a directory, unreadable or
/// larger than `max_bytes`.
std::string read_file_limited(const std::filesystem::path& path, uint64_t max_bytes, const char* who);

}  // namespace detail

/// The whole content of the file at `path`; io_error naming the path (and `who`, the call the user
/// made) when it cannot be read.
std::string read_file(const std::filesystem::path& path, const char* who = "read_file");

namespace detail {

/// What the name of one of write_file_atomic's temporary files tells.
struct TempFileName {
  std::string target;  ///< the file name it was to replace (cut to 200 bytes)
  long pid = 0;        ///< the writing process
};

/// Parses ".<name>.tmp-<pid>-<n>-<nonce>" (a temporary file of write_file_atomic); std::nullopt for
/// any other file name.
std::optional<TempFileName> parse_temp_file_name(std::string_view file);

/// True when the process that wrote a temporary file no longer exists (it was killed mid-write):
/// such a file is debris. A temporary file of this process or of a live one is still being written.
bool temp_writer_gone(long pid);

/// Removes the temporary files in `dir` that write_file_atomic left for `target` (a file name)
/// in processes that no longer exist; errors are ignored. Every successful write of `target` calls
/// it, so a writer killed mid-write leaves its debris only until the next write of the same file.
void remove_stale_temp_files(const std::filesystem::path& dir, const std::string& target);

}  // namespace detail

/// Replaces the file at `path` with `bytes` atomically and durably: the target holds either its
/// previous content or all of `bytes`, also after a crash. io_error naming the path on failure,
/// in which case the previous file is untouched and no temporary file is left. A write that
/// succeeds also removes the temporary files of `path` left by killed writers.
void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);

}  // namespace gradus::io

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::io::detail {
GRADUS_INLINE std::string read_file_limited(const std::filesystem::path& path, uint64_t max_bytes, const char* who) {
  Fd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  GRADUS_CHECK(io_error, f.fd >= 0, who, ": cannot open '", path.string(), "': ", errno_text(errno));
  struct stat st {};
  GRADUS_CHECK(io_error, ::fstat(f.fd, &st) == 0, who, ": cannot stat '", path.string(), "': ", errno_text(errno));
  GRADUS_CHECK(io_error, !S_ISDIR(st.st_mode), who, ": cannot read '", path.string(), "': it is a directory");
  const bool regular = S_ISREG(st.st_mode);
  GRADUS_CHECK(io_error, !regular || uint64_t(st.st_size) <= max_bytes, who, ": '", path.string(), "' is ",
               st.st_size, " bytes, more than the ", max_bytes, " this reader accepts");
  auto read_some = [&](char* dst, size_t len) {
    for (;;) {
      const ssize_t n = ::read(f.fd, dst, std::min<size_t>(len, size_t(1) << 30));
      if (n < 0 && errno == EINTR) continue;
      GRADUS_CHECK(io_error, n >= 0, who, ": error reading '", path.string(), "': ", errno_text(errno));
      return size_t(n);
    }
  };
  std::string out(regular ? size_t(st.st_size) : 0, '\0');
  size_t have = 0;
  for (;;) {
    if (have < out.size()) {
      const size_t n = read_some(out.data() + have, out.size() - have);
      if (n == 0) break;
      have += n;
      continue;
    }
    // The buffer is full: the file may have grown, or is not a regular file. Probe for more
    // before growing, so that a file of the expected size is never over-allocated.
    char probe[4096];
    const size_t n = read_some(probe, sizeof probe);
    if (n == 0) break;
    GRADUS_CHECK(io_error, max_bytes - have >= n, who, ": '", path.string(), "' holds more than ", max_bytes,
                 " bytes, more than this reader accepts");
    out.resize(std::max<size_t>(have + n, std::min<uint64_t>(max_bytes, std::max<size_t>(2 * out.size(), 1 << 16))));
    std::memcpy(out.data() + have, probe, n);
    have += n;
  }
  out.resize(have);
  return out;
}
}  // namespace gradus::io::detail
namespace gradus::io {
GRADUS_INLINE std::string read_file(const std::filesystem::path& path, const char* who) {
  return detail::read_file_limited(path, UINT64_MAX, who);
}
}  // namespace gradus::io
namespace gradus::io::detail {
GRADUS_INLINE std::optional<TempFileName> parse_temp_file_name(std::string_view file) {
  const size_t at = file.rfind(".tmp-");
  if (file.size() < 2 || file[0] != '.' || at == std::string_view::npos || at < 2) return std::nullopt;
  std::string_view rest = file.substr(at + 5);
  long numbers[3] = {0, 0, 0};
  for (int k = 0; k < 3; ++k) {
    const size_t end = k < 2 ? rest.find('-') : rest.size();
    if (end == 0 || end == std::string_view::npos || end > 18) return std::nullopt;
    for (char c : rest.substr(0, end)) {
      if (c < '0' || c > '9') return std::nullopt;
      numbers[k] = numbers[k] * 10 + (c - '0');
    }
    rest = rest.substr(std::min(end + 1, rest.size()));
  }
  return TempFileName{std::string(file.substr(1, at - 1)), numbers[0]};
}

GRADUS_INLINE bool temp_writer_gone(long pid) {
  if (pid <= 0 || pid == long(::getpid())) return false;
  return ::kill(pid_t(pid), 0) != 0 && errno == ESRCH;
}

GRADUS_INLINE void remove_stale_temp_files(const std::filesystem::path& dir, const std::string& target) {
  std::error_code ec;
  const std::string prefix = "." + target + ".tmp-";
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(prefix)) continue;
    if (const auto t = parse_temp_file_name(name); t && t->target == target && temp_writer_gone(t->pid))
      ::unlink(it->path().c_str());  // best effort: a file another cleaner removed first is fine
  }
}
}  // namespace gradus::io::detail
namespace gradus::io {
GRADUS_INLINE void write_file_atomic(const std::filesystem::path& path, std::string_view bytes) {
  namespace fs = std::filesystem;
  const std::string target = path.string();
  GRADUS_CHECK(io_error, path.has_filename(), "write_file_atomic: '", target, "' does not name a file");
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");

  // A name no other writer (thread, process, or earlier crashed run) uses: pid, a counter, a clock
  // nonce; O_EXCL makes a collision an error we retry instead of a shared file.
  static std::atomic<uint64_t> counter{0};
  fs::path temp;
  detail::Fd f;
  for (int attempt = 0; attempt < 100 && f.fd < 0; ++attempt) {
    const auto nonce = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
    // appended piece by piece: GCC 12 at -O3 warns (-Wrestrict, a false positive) on "." + a
    // temporary string
    std::string name(1, '.');
    name.append(path.filename().string().substr(0, 200)).append(".tmp-").append(std::to_string(::getpid()));
    name.append(1, '-').append(std::to_string(counter++)).append(1, '-').append(std::to_string(nonce % 1000000007));
    temp = dir / name;
    f.fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (f.fd < 0 && errno != EEXIST) break;
  }
  GRADUS_CHECK(io_error, f.fd >= 0, "write_file_atomic: cannot create a temporary file in '", dir.string(),
               "' to write '", target, "': ", detail::errno_text(errno));

  // Until the rename succeeds, any failure removes the temporary file.
  struct Cleanup {
    const fs::path& temp;
    bool armed = true;
    ~Cleanup() {
      if (armed) ::unlink(temp.c_str());
    }
  } cleanup{temp};
  auto fail = [&](const char* what) {
    const int e = errno;
    ::gradus::detail::throw_error<io_error>({"write_file_atomic: ", what, " '", target,
                                             "' failed: ", detail::errno_text(e), "; the previous file is unchanged"});
  };

  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(f.fd, p, std::min<size_t>(left, size_t(1) << 30));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      fail("writing");
    }
    p += n;
    left -= size_t(n);
  }
  if (::fsync(f.fd) != 0) fail("syncing");
  if (f.close() != 0) fail("closing");
  if (::rename(temp.c_str(), path.c_str()) != 0) fail("renaming the temporary file onto");
  cleanup.armed = false;
  detail::remove_stale_temp_files(dir, path.filename().string().substr(0, 200));

  // Make the rename itself durable. Some file systems cannot sync a directory (EINVAL): the
  // rename is then as durable as that file system makes it.
  detail::Fd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  GRADUS_CHECK(io_error, d.fd >= 0, "write_file_atomic: wrote '", target, "' but cannot open its directory to sync it: ",
               detail::errno_text(errno));
  if (::fsync(d.fd) != 0 && errno != EINVAL && errno != ENOTSUP)
    ::gradus::detail::throw_error<io_error>({"write_file_atomic: wrote '", target,
                                             "' but syncing its directory failed: ", detail::errno_text(errno)});
}
}  // namespace gradus::io
#endif  // GRADUS_DEFINE_COMPILED
