// gradus/data/idx.hpp — reader for IDX files (the MNIST format), raw or gzipped.
//
// An IDX file is a 4-byte magic (two zero bytes, the element-type code, the number of
// dimensions), one big-endian u32 per dimension, then the row-major elements. Only
// unsigned-byte files (type 0x08) are read. Every malformed file is rejected with an
// io_error that names it; nothing is allocated beyond what the file really holds (raw
// files are measured first, gzipped ones are inflated chunk by chunk).
// Needs zlib: link gradus::data.
#pragma once
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "gradus/core/compiled.hpp"
#include "gradus/core/error.hpp"
#include "gradus/core/shape.hpp"
#include "gradus/core/tensor.hpp"

namespace gradus::detail {

/// A file read through zlib: gzip streams are inflated, other files are read as they are.
class IdxStream {
 public:
  explicit IdxStream(const std::string& path);

  /// True when the file is not gzip-compressed.
  bool direct() const { return direct_; }
  /// The file's size in bytes (compressed, for a gzip file).
  uint64_t raw_size() const { return raw_size_; }

  /// Reads up to `n` bytes; fewer only at the end of the data. Throws on corrupt gzip data.
  size_t read(void* dst, size_t n);

 private:
  void check_gz(const char* when);

  /// zlib's message without the "path: " prefix it adds.
  std::string zlib_message(const char* msg) const;

  struct Close {
    void operator()(gzFile f) const { gzclose(f); }
  };
  std::string path_;
  std::unique_ptr<gzFile_s, Close> file_;
  bool direct_ = false;
  uint64_t raw_size_ = 0;
};

std::string hex_bytes(const unsigned char* p, int n);

bool ends_with_gz(const std::string& path);

}  // namespace gradus::detail

namespace gradus::data {

/// The contents of an unsigned-byte IDX file: its dimensions and its row-major bytes.
struct IdxArray {
  Shape shape;
  std::vector<uint8_t> bytes;
};

/// Largest element count accepted from an IDX header (2^31).
inline constexpr uint64_t kIdxMaxElements = uint64_t(1) << 31;

/// Reads an unsigned-byte IDX file of any rank 1..8, gzipped or raw (gzip is detected by its
/// magic bytes; a `.gz` name that is not gzip is rejected). Throws io_error naming the file
/// when it is missing, not IDX, of another element type, claims more than 2^31 elements (or,
/// gzipped, more than its compressed size can inflate to: deflate's ratio is at most 1032:1),
/// is truncated, has bytes after its data, or is corrupt gzip; and when the memory for what it
/// declares cannot be allocated (an io_error naming the file and the size, not std::bad_alloc).
///   auto a = gd::data::read_idx("train-labels-idx1-ubyte.gz");  // a.shape == [60000]
IdxArray read_idx(const std::string& path);

/// Reads an IDX images file (magic 0x00000803: unsigned bytes, [N, rows, cols]) as floats
/// scaled into [0, 1] (byte / 255).
///   gd::Tensor<float> x = gd::data::read_idx_images("t10k-images-idx3-ubyte.gz");  // [10000,28,28]
Tensor<float> read_idx_images(const std::string& path);

/// Reads an IDX labels file (magic 0x00000801: unsigned bytes, [N]) as int64 labels.
///   gd::Tensor<int64_t> y = gd::data::read_idx_labels("t10k-labels-idx1-ubyte.gz");  // [10000]
Tensor<int64_t> read_idx_labels(const std::string& path);

}  // namespace gradus::data

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::data {
namespace detail {
/// The tensor an IDX file's elements go into; io_error naming the file when it cannot be allocated.
template <class T>
Tensor<T> idx_tensor(const Shape& shape, const std::string& path, const char* who) {
  try {
    return Tensor<T>(shape);
  } catch (const value_error&) {  // out of memory (Tensor's allocation names only the shape)
    ::gradus::detail::throw_error<io_error>({who, ": '", path, "' declares shape ", shape, ": cannot allocate ",
                                             shape.numel(), " elements of ", sizeof(T), " bytes"});
  }
}
}  // namespace detail
GRADUS_INLINE IdxArray read_idx(const std::string& path) {
  gradus::detail::IdxStream in(path);
  GRADUS_CHECK(io_error, !in.direct() || !gradus::detail::ends_with_gz(path), "read_idx: '", path,
               "' is named .gz but is not a gzip file (no gzip magic bytes 1f 8b)");

  unsigned char magic[4];
  const size_t got_magic = in.read(magic, 4);
  GRADUS_CHECK(io_error, got_magic == 4, "read_idx: truncated header in '", path, "': the file holds ", got_magic,
               " bytes, an IDX header needs at least 4");
  GRADUS_CHECK(io_error, magic[0] == 0 && magic[1] == 0, "read_idx: '", path,
               "' is not an IDX file: bad magic number 0x", gradus::detail::hex_bytes(magic, 4),
               " (an IDX magic starts with two zero bytes: 0x000008nn)");
  GRADUS_CHECK(io_error, magic[2] == 0x08, "read_idx: '", path, "' has element type code 0x",
               gradus::detail::hex_bytes(magic + 2, 1), " (magic 0x", gradus::detail::hex_bytes(magic, 4),
               "); only unsigned bytes (0x08) are supported");
  const int ndims = magic[3];
  GRADUS_CHECK(io_error, ndims >= 1 && ndims <= kMaxRank, "read_idx: '", path, "' declares ", ndims,
               " dimensions; expected 1 to ", kMaxRank);

  unsigned char dimbytes[4 * kMaxRank];
  const size_t dimlen = size_t(4 * ndims);
  const size_t got_dims = in.read(dimbytes, dimlen);
  GRADUS_CHECK(io_error, got_dims == dimlen, "read_idx: truncated header in '", path, "': it ends after ",
               4 + got_dims, " bytes, the header of a ", ndims, "-dimensional IDX file has ", 4 + dimlen);

  // Each dimension is below 2^32; the product of the nonzero ones is bounded by 2^31 whatever
  // zeros there are, so no shape made from this one (a reduction over a zero axis) can wrap.
  int64_t dims[kMaxRank];
  std::string dims_text;
  uint64_t nonzero = 1;
  bool zero = false;
  for (int d = 0; d < ndims; ++d) {
    const unsigned char* b = dimbytes + 4 * d;
    dims[d] = int64_t((uint64_t(b[0]) << 24) | (uint64_t(b[1]) << 16) | (uint64_t(b[2]) << 8) | b[3]);
    if (d) dims_text += ',';
    dims_text += std::to_string(dims[d]);
    if (dims[d] == 0) zero = true;
    else if (nonzero <= kIdxMaxElements) nonzero *= uint64_t(dims[d]);  // < 2^63
  }
  GRADUS_CHECK(io_error, nonzero <= kIdxMaxElements, "read_idx: '", path, "' claims absurd dimensions [", dims_text,
               "]: more than 2^31 elements", zero ? " (not counting its zero dimensions)" : "");
  IdxArray out;
  out.shape = Shape(std::span<const int64_t>(dims, size_t(ndims)));
  const uint64_t numel = zero ? 0 : nonzero;

  const uint64_t header = 4 + dimlen;
  // gzip: checked before inflating anything, so a small file cannot make us inflate gigabytes
  // only to find them missing
  GRADUS_CHECK(io_error, in.direct() || numel + header <= in.raw_size() * 1032 + 1024, "read_idx: '", path,
               "' declares shape ", out.shape, " (", numel, " bytes), more than its ", in.raw_size(),
               " compressed bytes can inflate to (deflate's ratio is at most 1032:1)");
  const auto allocate = [&](size_t bytes) {
    try {
      out.bytes.resize(bytes);
    } catch (const std::bad_alloc&) {
      ::gradus::detail::throw_error<io_error>({"read_idx: '", path, "' declares shape ", out.shape,
                                               ": cannot allocate ", bytes, " bytes"});
    }
  };
  if (in.direct()) {
    const uint64_t body = in.raw_size() > header ? in.raw_size() - header : 0;
    GRADUS_CHECK(io_error, body >= numel, "read_idx: truncated data in '", path, "': shape ", out.shape, " needs ",
                 numel, " bytes after the header, the file holds ", body);
    GRADUS_CHECK(io_error, body == numel, "read_idx: trailing data in '", path, "': ", body - numel,
                 " bytes after the ", numel, " bytes of shape ", out.shape);
    allocate(size_t(numel));
    const size_t got = in.read(out.bytes.data(), out.bytes.size());
    GRADUS_CHECK(io_error, got == numel, "read_idx: truncated data in '", path, "': read ", got, " of ", numel,
                 " bytes (the file changed while being read?)");
    return out;
  }

  // Gzip: the inflated size is unknown until the end, so grow chunk by chunk.
  constexpr size_t kChunk = size_t(1) << 22;
  out.bytes.reserve(size_t(std::min<uint64_t>(numel, kChunk)));
  while (out.bytes.size() < numel) {
    const size_t old = out.bytes.size();
    const size_t want = size_t(std::min<uint64_t>(numel - old, kChunk));
    allocate(old + want);
    const size_t got = in.read(out.bytes.data() + old, want);
    out.bytes.resize(old + got);
    GRADUS_CHECK(io_error, got == want, "read_idx: truncated data in '", path, "': shape ", out.shape, " needs ",
                 numel, " bytes after the header, the decompressed file holds ", out.bytes.size());
  }
  unsigned char extra[256];
  const size_t trailing = in.read(extra, sizeof extra);
  GRADUS_CHECK(io_error, trailing == 0, "read_idx: trailing data in '", path, "': ",
               trailing == sizeof extra ? "at least " : "", trailing, " bytes after the ", numel,
               " bytes of shape ", out.shape);
  return out;
}

GRADUS_INLINE Tensor<float> read_idx_images(const std::string& path) {
  IdxArray a = read_idx(path);
  GRADUS_CHECK(io_error, a.shape.rank() == 3, "read_idx_images: '", path, "' has ", a.shape.rank(),
               " dimensions ", a.shape, "; an images file (magic 0x00000803) has 3: [N, rows, cols]");
  Tensor<float> t = detail::idx_tensor<float>(a.shape, path, "read_idx_images");
  float* dst = t.data();
  const uint8_t* src = a.bytes.data();
  const int64_t n = t.size();
  for (int64_t i = 0; i < n; ++i) dst[i] = float(src[i]) / 255.f;
  return t;
}

GRADUS_INLINE Tensor<int64_t> read_idx_labels(const std::string& path) {
  IdxArray a = read_idx(path);
  GRADUS_CHECK(io_error, a.shape.rank() == 1, "read_idx_labels: '", path, "' has ", a.shape.rank(),
               " dimensions ", a.shape, "; a labels file (magic 0x00000801) has 1: [N]");
  Tensor<int64_t> t = detail::idx_tensor<int64_t>(a.shape, path, "read_idx_labels");
  std::copy(a.bytes.begin(), a.bytes.end(), t.data());
  return t;
}
}  // namespace gradus::data
#endif  // GRADUS_DEFINE_COMPILED

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::detail {
GRADUS_INLINE IdxStream::IdxStream(const std::string& path) : path_(path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto st = fs::status(path, ec);
  GRADUS_CHECK(io_error, fs::exists(st), "read_idx: cannot open '", path, "': no such file");
  GRADUS_CHECK(io_error, !fs::is_directory(st), "read_idx: cannot open '", path, "': it is a directory");
  errno = 0;
  file_.reset(gzopen(path.c_str(), "rb"));
  GRADUS_CHECK(io_error, file_ != nullptr, "read_idx: cannot open '", path, "': ",
               errno ? std::strerror(errno) : "out of memory");
  gzbuffer(file_.get(), 1 << 17);
  direct_ = gzdirect(file_.get()) != 0;
  const auto n = fs::file_size(path, ec);
  GRADUS_CHECK(io_error, !ec, "read_idx: cannot size '", path, "': ", ec.message());
  raw_size_ = uint64_t(n);
  check_gz("while opening");
}

GRADUS_INLINE size_t IdxStream::read(void* dst, size_t n) {
  auto* out = static_cast<unsigned char*>(dst);
  size_t got = 0;
  while (got < n) {
    const unsigned want = unsigned(std::min<size_t>(n - got, size_t(1) << 24));
    const int r = gzread(file_.get(), out + got, want);
    check_gz("while reading");
    if (r <= 0) break;
    got += size_t(r);
  }
  return got;
}

GRADUS_INLINE void IdxStream::check_gz(const char* when) {
  int err = Z_OK;
  const char* msg = gzerror(file_.get(), &err);
  if (err == Z_OK) return;
  GRADUS_CHECK(io_error, err != Z_ERRNO, "read_idx: I/O error ", when, " '", path_, "': ", std::strerror(errno));
  GRADUS_CHECK(io_error, err != Z_BUF_ERROR, "read_idx: corrupt gzip file '", path_,
               "': the compressed stream ends early (", zlib_message(msg), ")");
  throw_error<io_error>({"read_idx: corrupt gzip file '", path_, "': ", zlib_message(msg)});
}

GRADUS_INLINE std::string IdxStream::zlib_message(const char* msg) const {
  std::string m = msg ? msg : "";
  const std::string prefix = path_ + ": ";
  return m.compare(0, prefix.size(), prefix) == 0 ? m.substr(prefix.size()) : m;
}

GRADUS_INLINE std::string hex_bytes(const unsigned char* p, int n) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < n; ++i) {
    s += digits[p[i] >> 4];
    s += digits[p[i] & 15];
  }
  return s;
}

GRADUS_INLINE bool ends_with_gz(const std::string& path) {
  return path.size() >= 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
}
}  // namespace gradus::detail
#endif  // GRADUS_DEFINE_COMPILED
