// gradus/io/tfrecord.hpp — TFRecord files: TensorFlow's container of records (tf.io.TFRecordWriter,
// tf.data.TFRecordDataset), plain or compressed with GZIP or ZLIB.
//
// A TFRecord stream is a sequence of records, each
//   uint64  length            (little-endian)
//   uint32  masked_crc32c(the 8 length bytes)
//   byte    data[length]
//   uint32  masked_crc32c(data)
// with the masked CRC-32C of gradus/detail/crc32c.hpp. A compressed file is that stream deflated
// as a whole: Compression::gzip is a gzip file (RFC 1952; members written one after another are
// read as one stream, as gunzip does), Compression::zlib a zlib stream (RFC 1950), as
// TFRecordOptions(compression_type="GZIP" / "ZLIB") write them. Needs zlib: link gradus::io.
//
//   gd::io::TFRecordWriter w("train.tfrecord.gz", {.compression = gd::io::Compression::gzip});
//   w.write(gd::io::encode_example(example));       // any bytes; an Example is the usual record
//   w.close();                                       // io_error if anything could not be written
//   for (const std::string& record : gd::io::TFRecordReader("train.tfrecord.gz", gd::io::Compression::gzip))
//     use(gd::io::decode_example(record));
//
// Reading checks both checksums of every record and every length against the data that is
// really there: a corrupt or truncated record, or a corrupt or truncated compressed stream, is
// an io_error naming the file, the record's index and its byte offset (in the decompressed
// stream when the file is compressed). The reader reads 256 KiB at a time (inflating as it
// goes), so a file never has to fit in memory, and a record's claimed length is trusted only as
// far as its bytes really go (memory grows with the data read, not with the length field).
//
// Writing goes straight to the file at `path` (created or truncated), through a 256 KiB buffer:
// flush() hands everything written so far to the operating system (a compressed stream is
// sync-flushed, so a reader can decode it up to there), close() finishes the stream, fsyncs and
// closes the file. A process that dies while writing leaves the records before its last flush()
// whole, and at most one partial record (or an unfinished compressed stream) after them, which
// the reader rejects as truncated at that record's offset. A file that must appear complete or
// not at all is written under a temporary name and renamed when closed (or, when small, built
// in memory with encode_tfrecord and saved with write_file_atomic).
#pragma once
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gradus/core/compiled.hpp"
#include "gradus/core/error.hpp"
#include "gradus/detail/crc32c.hpp"
#include "gradus/detail/endian.hpp"
#include "gradus/io/file.hpp"

namespace gradus::io {

namespace detail {
using ::gradus::detail::str;
}  // namespace detail

/// How a TFRecord file is compressed as a whole (TensorFlow's compression_type "", "GZIP", "ZLIB").
enum class Compression { none, gzip, zlib };

/// The options of a TFRecordWriter: `{.compression = gd::io::Compression::gzip, .level = 9}`.
struct TFRecordOptions {
  Compression compression = Compression::none;
  int level = Z_DEFAULT_COMPRESSION;  ///< zlib's level, 0 (store) to 9 (smallest); -1 is zlib's default (6)
};

/// The framed bytes of one record: length, masked CRC of the length, `data`, masked CRC of `data`.
/// Concatenated, such records are an uncompressed TFRecord file.
std::string encode_tfrecord(std::string_view data);

/// Reads the records of a TFRecord file (or of bytes in memory) one at a time, checking both
/// checksums of each; io_error names the file, the record and its byte offset.
///   gd::io::TFRecordReader r("data.tfrecord");
///   std::string record;
///   while (r.next(record)) ...;            // or: for (const std::string& record : r) ...
class TFRecordReader {
  struct State;

 public:
  /// Opens the file at `path`, compressed as `compression` says (TensorFlow does not guess it,
  /// nor does this reader; a plain read of a compressed file fails at record 0 with a hint).
  /// An empty file has no records, whatever the compression.
  explicit TFRecordReader(const std::filesystem::path& path, Compression compression = Compression::none);

  /// Reads the records of `bytes` (which must outlive the reader); `source` names them in errors.
  static TFRecordReader from_bytes(std::string_view bytes, Compression compression = Compression::none,
                                   std::string_view source = "<memory>");

  /// Reads the next record into `record`; false at the clean end of the file. After an io_error
  /// every later call throws it again.
  bool next(std::string& record);

  /// True once next() has failed because the input ends inside a record (a write that was cut
  /// short: a full disk, a killed writer), rather than because a record is corrupt.
  bool truncated() const { return s_->truncated; }
  /// The byte offset of the next record (in the decompressed stream of a compressed file).
  uint64_t offset() const { return s_->offset; }
  /// How many records next() has returned.
  uint64_t records_read() const { return s_->index; }
  /// The file's path, or the source name given to from_bytes.
  const std::string& source() const { return s_->source; }

  /// A single-pass input iterator over the remaining records (range-for).
  class iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = std::string;
    using difference_type = std::ptrdiff_t;
    using pointer = const std::string*;
    using reference = const std::string&;
    iterator() = default;
    explicit iterator(TFRecordReader* r) : r_(r) { ++*this; }
    const std::string& operator*() const { return record_; }
    const std::string* operator->() const { return &record_; }
    iterator& operator++() {
      if (!r_->next(record_)) r_ = nullptr;
      return *this;
    }
    void operator++(int) { ++*this; }
    bool operator==(std::default_sentinel_t) const { return r_ == nullptr; }

   private:
    TFRecordReader* r_ = nullptr;
    std::string record_;
  };
  iterator begin() { return iterator(this); }
  std::default_sentinel_t end() const { return {}; }

 private:
  static constexpr size_t kChunk = size_t(1) << 18;

  struct State {
    std::string source;
    Compression compression;
    detail::Fd file;
    std::string_view memory;  // from_bytes: the whole input, handed out at the first refill
    bool in_memory = false;
    std::vector<char> buffer;  // the file's bytes, kChunk at a time
    const char* in = nullptr;  // raw bytes not yet consumed
    size_t in_left = 0;
    bool raw_end = false;
    uint64_t raw_read = 0;  // raw bytes consumed so far
    z_stream z{};
    bool z_ready = false, stream_end = false, started = false;
    uint64_t offset = 0, index = 0;
    bool done = false;
    bool truncated = false;  // the error is the input ending inside a record
    std::string error;  // the io_error that stopped the reader, thrown again by next()

    State(std::string src, Compression c);
    State(const State&) = delete;
    State& operator=(const State&) = delete;
    ~State();
  };

  explicit TFRecordReader(std::unique_ptr<State> s) : s_(std::move(s)) {}

  const char* stream_name() const { return s_->compression == Compression::gzip ? "gzip" : "zlib"; }

  /// Stops the reader with an io_error; kTruncated marks it as the input ending inside a record.
  static constexpr bool kTruncated = true;
  [[noreturn]] void fail(const std::string& what, bool truncated = false);

  /// A hint when record 0 of a file read as uncompressed starts like a compressed stream.
  std::string compression_hint(const char* header) const;

  /// More raw bytes into in/in_left; false at the end of the input.
  bool refill();

  /// Reads up to `n` bytes of the (decompressed) stream; fewer only at its end.
  size_t read(char* dst, size_t n);

  std::unique_ptr<State> s_;
};

/// The records of TFRecord `bytes` (plain or compressed), both CRCs of each verified; io_error
/// on a corrupt or truncated record naming `source`, the record and its offset.
std::vector<std::string> decode_tfrecords(std::string_view bytes, Compression compression = Compression::none,
                                                 std::string_view source = "<memory>");

/// Every record of the TFRecord file at `path`, read in chunks (see TFRecordReader).
///   std::vector<std::string> records = gd::io::read_tfrecords("data.tfrecord.gz", gd::io::Compression::gzip);
std::vector<std::string> read_tfrecords(const std::filesystem::path& path,
                                               Compression compression = Compression::none);

/// Writes records to a TFRecord file, plain or compressed (see the top of this header for what
/// is on disk when). Not thread-safe: one writer per file, used from one thread at a time.
///   gd::io::TFRecordWriter w("out.tfrecord", {.compression = gd::io::Compression::zlib});
///   w.write("record 1"); w.write(bytes); w.close();
class TFRecordWriter {
  struct State;

 public:
  /// Creates (or truncates) the file at `path`; io_error naming it when that fails, value_error
  /// for a level outside -1..9.
  explicit TFRecordWriter(const std::filesystem::path& path, TFRecordOptions options = {});
  TFRecordWriter(TFRecordWriter&&) noexcept = default;
  TFRecordWriter& operator=(TFRecordWriter&& other) noexcept;
  /// Closes the file; errors are dropped here (call close() to see them).
  ~TFRecordWriter();

  /// Appends one record (any bytes). io_error when the file cannot be written; after one, every
  /// later call but close() throws it again.
  void write(std::string_view record);

  /// Hands every record written so far to the operating system (a compressed stream is
  /// sync-flushed, so it decodes up to here). No fsync: close() does that.
  void flush();

  /// Finishes the compressed stream, writes everything, fsyncs and closes the file. io_error
  /// naming the file when any of it fails; closing twice is harmless, and a writer whose error
  /// was already thrown closes without throwing it again.
  void close();

  const std::filesystem::path& path() const { return s_->path; }
  /// How many records write() has taken.
  uint64_t records_written() const { return s_->records; }

 private:
  static constexpr size_t kBuffer = size_t(1) << 18;

  struct State {
    std::filesystem::path path;
    TFRecordOptions options;
    detail::Fd file;
    z_stream z{};
    bool z_ready = false;
    std::string buffer;  // bytes for the file, written out when kBuffer is reached
    uint64_t records = 0;
    bool closed = false;
    std::string error;  // the io_error that broke the writer

    State(const std::filesystem::path& p, TFRecordOptions o);
    State(const State&) = delete;
    State& operator=(const State&) = delete;
    ~State();
  };

  State& usable(const char* who);

  [[noreturn]] static void fail(State& s, const char* what);

  /// Writes the buffer to the file.
  static void drain(State& s);

  static void write_all(State& s, std::string_view bytes);

  /// Appends bytes for the file, written out whenever the buffer fills.
  static void emit(State& s, std::string_view bytes);

  /// Deflates `bytes` with zlib's `flush` mode, emitting what comes out.
  static void deflate_some(State& s, std::string_view bytes, int flush);

  static void put(State& s, std::string_view bytes);

  void close_quietly() noexcept;

  std::unique_ptr<State> s_;
};

/// Writes `records` to a new TFRecord file at `path` and closes it (see TFRecordWriter).
template <class Records>
void write_tfrecords(const std::filesystem::path& path, const Records& records, TFRecordOptions options = {}) {
  TFRecordWriter w(path, options);
  for (const auto& r : records) w.write(std::string_view(r));
  w.close();
}

}  // namespace gradus::io

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::io {
GRADUS_INLINE std::string encode_tfrecord(std::string_view data) {
  using ::gradus::detail::masked_crc32c;
  using ::gradus::detail::store_le;
  std::string out;
  out.reserve(data.size() + 16);
  store_le<8>(out, data.size());
  store_le<4>(out, masked_crc32c(std::string_view(out.data(), 8)));
  out.append(data);
  store_le<4>(out, masked_crc32c(data));
  return out;
}

GRADUS_INLINE TFRecordReader::TFRecordReader(const std::filesystem::path& path, Compression compression)
    : s_(std::make_unique<State>(path.string(), compression)) {
  detail::Fd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  GRADUS_CHECK(io_error, f.fd >= 0, "TFRecordReader: cannot open '", path.string(), "': ", detail::errno_text(errno));
  struct stat st {};
  GRADUS_CHECK(io_error, ::fstat(f.fd, &st) == 0 && !S_ISDIR(st.st_mode), "TFRecordReader: cannot read '",
               path.string(), "': ", S_ISDIR(st.st_mode) ? "it is a directory" : detail::errno_text(errno));
  std::swap(s_->file.fd, f.fd);
  s_->buffer.resize(kChunk);
}

GRADUS_INLINE TFRecordReader TFRecordReader::from_bytes(std::string_view bytes, Compression compression,
                                                        std::string_view source) {
  TFRecordReader r(std::make_unique<State>(std::string(source), compression));
  r.s_->memory = bytes;
  r.s_->in_memory = true;
  return r;
}

GRADUS_INLINE bool TFRecordReader::next(std::string& record) {
  State& s = *s_;
  GRADUS_CHECK(io_error, s.error.empty(), s.error);
  if (s.done) return false;
  char header[12];
  const size_t got = read(header, sizeof header);
  if (got == 0) {
    s.done = true;
    return false;
  }
  if (got < sizeof header) fail(detail::str("is truncated (", got, " bytes, a header needs 12)"), kTruncated);
  const uint64_t length = ::gradus::detail::load_le<8>(header);
  if (uint32_t(::gradus::detail::load_le<4>(header + 8)) != ::gradus::detail::masked_crc32c({header, 8}))
    fail(detail::str("length checksum mismatch (corrupt file)", compression_hint(header)));
  // Grow with the data really read, so a corrupt or hostile length cannot claim memory.
  record.clear();
  while (record.size() < length) {
    const size_t have = record.size();
    const size_t want = size_t(std::min<uint64_t>(length - have, std::max<size_t>(have, size_t(1) << 16)));
    record.resize(have + want);
    const size_t n = read(record.data() + have, want);
    if (n < want) {
      record.resize(have + n);
      fail(detail::str("is truncated (length ", length, ", only ", have + n, " bytes of data follow)"), kTruncated);
    }
  }
  char footer[4];
  if (read(footer, sizeof footer) < sizeof footer)
    fail(detail::str("is truncated (length ", length, ", the data's checksum is missing)"), kTruncated);
  if (uint32_t(::gradus::detail::load_le<4>(footer)) != ::gradus::detail::masked_crc32c(record))
    fail("data checksum mismatch (corrupt file)");
  s.offset += 16 + length;
  ++s.index;
  return true;
}

GRADUS_INLINE TFRecordReader::State::State(std::string src, Compression c) : source(std::move(src)), compression(c) {
  if (c == Compression::none) return;
  GRADUS_CHECK(value_error, c == Compression::gzip || c == Compression::zlib,
               "TFRecordReader: unknown compression ", int(c));
  GRADUS_CHECK(io_error, inflateInit2(&z, c == Compression::gzip ? 15 + 16 : 15) == Z_OK,
               "TFRecordReader: zlib's inflateInit2 failed (out of memory?)");
  z_ready = true;
}

GRADUS_INLINE TFRecordReader::State::~State() {
  if (z_ready) inflateEnd(&z);
}

GRADUS_INLINE void TFRecordReader::fail(const std::string& what, bool truncated) {
  State& s = *s_;
  s.truncated = truncated;
  s.error = detail::str("TFRecordReader: '", s.source, "': record ", s.index, " at byte ", s.offset,
                s.compression == Compression::none ? "" : " of the decompressed stream", ": ", what);
  throw io_error(s.error);
}

GRADUS_INLINE std::string TFRecordReader::compression_hint(const char* header) const {
  if (s_->compression != Compression::none || s_->index != 0) return "";
  const auto b0 = uint8_t(header[0]), b1 = uint8_t(header[1]);
  if (b0 == 0x1F && b1 == 0x8B) return "; the file starts like gzip: read it with Compression::gzip";
  if (b0 == 0x78 && (b0 * 256 + b1) % 31 == 0) return "; the file starts like a zlib stream: read it with Compression::zlib";
  return "";
}

GRADUS_INLINE bool TFRecordReader::refill() {
  State& s = *s_;
  if (s.raw_end) return false;
  if (s.in_memory) {
    s.in = s.memory.data();
    s.in_left = s.memory.size();
    s.raw_end = true;
    return s.in_left > 0;
  }
  for (;;) {
    const ssize_t n = ::read(s.file.fd, s.buffer.data(), s.buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(detail::str("error reading the file: ", detail::errno_text(errno)));
    if (n == 0) {
      s.raw_end = true;
      return false;
    }
    s.in = s.buffer.data();
    s.in_left = size_t(n);
    return true;
  }
}

GRADUS_INLINE size_t TFRecordReader::read(char* dst, size_t n) {
  State& s = *s_;
  size_t got = 0;
  if (s.compression == Compression::none) {
    while (got < n) {
      if (s.in_left == 0 && !refill()) break;
      const size_t k = std::min(n - got, s.in_left);
      std::memcpy(dst + got, s.in, k);
      s.in += k;
      s.in_left -= k;
      s.raw_read += k;
      got += k;
    }
    return got;
  }
  while (got < n) {
    if (s.stream_end) {
      if (s.in_left == 0 && !refill()) return got;  // the clean end of the file
      if (s.compression == Compression::zlib)
        fail(detail::str("corrupt zlib file: ", s.in_left, s.raw_end ? "" : " or more",
                 " bytes follow the end of the zlib stream at byte ", s.raw_read));
      inflateReset(&s.z);  // gzip: another member follows
      s.stream_end = false;
    }
    if (s.in_left == 0 && !refill()) {
      if (!s.started) return got;  // an empty file: no records
      fail(detail::str("is truncated: the ", stream_name(), " stream ends early (", s.raw_read,
                       " compressed bytes, without the stream's end)"),
           kTruncated);
    }
    s.started = true;
    auto* next_in = reinterpret_cast<Bytef*>(const_cast<char*>(s.in));
    auto* next_out = reinterpret_cast<Bytef*>(dst + got);
    s.z.next_in = next_in;
    s.z.avail_in = uInt(std::min<size_t>(s.in_left, size_t(1) << 30));
    s.z.next_out = next_out;
    s.z.avail_out = uInt(std::min<size_t>(n - got, size_t(1) << 30));
    const int rc = ::inflate(&s.z, Z_NO_FLUSH);
    const auto used = size_t(s.z.next_in - next_in);
    s.in += used;
    s.in_left -= used;
    s.raw_read += used;
    const auto produced = size_t(s.z.next_out - next_out);
    got += produced;
    if (rc == Z_BUF_ERROR && used == 0 && produced == 0 && s.in_left > 0)
      fail(detail::str("zlib's inflate makes no progress at compressed byte ", s.raw_read));
    if (rc == Z_STREAM_END) {
      s.stream_end = true;
    } else if (rc == Z_MEM_ERROR) {
      fail("zlib ran out of memory");
    } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
      fail(detail::str("corrupt ", stream_name(), " data near compressed byte ", s.raw_read, ": ",
               s.z.msg ? s.z.msg : "zlib error", " (", rc, ")"));
    }
  }
  return got;
}

GRADUS_INLINE std::vector<std::string> decode_tfrecords(std::string_view bytes, Compression compression,
                                                        std::string_view source) {
  std::vector<std::string> out;
  TFRecordReader r = TFRecordReader::from_bytes(bytes, compression, source);
  for (std::string record; r.next(record);) out.push_back(std::move(record));
  return out;
}

GRADUS_INLINE std::vector<std::string> read_tfrecords(const std::filesystem::path& path, Compression compression) {
  std::vector<std::string> out;
  TFRecordReader r(path, compression);
  for (std::string record; r.next(record);) out.push_back(std::move(record));
  return out;
}

GRADUS_INLINE TFRecordWriter::TFRecordWriter(const std::filesystem::path& path, TFRecordOptions options)
    : s_(std::make_unique<State>(path, options)) {}

GRADUS_INLINE TFRecordWriter& TFRecordWriter::operator=(TFRecordWriter&& other) noexcept {
  if (this != &other) {
    close_quietly();
    s_ = std::move(other.s_);
  }
  return *this;
}

GRADUS_INLINE TFRecordWriter::~TFRecordWriter() { close_quietly(); }

GRADUS_INLINE void TFRecordWriter::write(std::string_view record) {
  State& s = usable("write");
  std::string header;
  header.reserve(12);
  ::gradus::detail::store_le<8>(header, record.size());
  ::gradus::detail::store_le<4>(header, ::gradus::detail::masked_crc32c(header));
  std::string footer;
  ::gradus::detail::store_le<4>(footer, ::gradus::detail::masked_crc32c(record));
  put(s, header);
  put(s, record);
  put(s, footer);
  ++s.records;
}

GRADUS_INLINE void TFRecordWriter::flush() {
  State& s = usable("flush");
  if (s.options.compression != Compression::none) deflate_some(s, {}, Z_SYNC_FLUSH);
  drain(s);
}

GRADUS_INLINE void TFRecordWriter::close() {
  if (!s_ || s_->closed) return;
  State& s = *s_;
  if (s.error.empty()) {
    try {
      if (s.options.compression != Compression::none) deflate_some(s, {}, Z_FINISH);
      drain(s);
      if (::fsync(s.file.fd) != 0 && errno != EINVAL && errno != ENOTSUP) fail(s, "cannot sync");
      if (s.file.close() != 0) fail(s, "cannot close");
    } catch (...) {
      s.closed = true;
      s.file.close();
      throw;
    }
  }
  s.closed = true;
  if (s.file.fd >= 0) s.file.close();
}

GRADUS_INLINE TFRecordWriter::State::State(const std::filesystem::path& p, TFRecordOptions o) : path(p), options(o) {
  const Compression c = o.compression;
  GRADUS_CHECK(value_error, c == Compression::none || c == Compression::gzip || c == Compression::zlib,
               "TFRecordWriter: unknown compression ", int(c));
  GRADUS_CHECK(value_error, o.level >= -1 && o.level <= 9, "TFRecordWriter: compression level ", o.level,
               " is not in -1..9");
  file.fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  GRADUS_CHECK(io_error, file.fd >= 0, "TFRecordWriter: cannot create '", p.string(), "': ",
               detail::errno_text(errno));
  buffer.reserve(kBuffer);
  if (c == Compression::none) return;
  GRADUS_CHECK(io_error,
               deflateInit2(&z, o.level, Z_DEFLATED, c == Compression::gzip ? 15 + 16 : 15, 8,
                            Z_DEFAULT_STRATEGY) == Z_OK,
               "TFRecordWriter: zlib's deflateInit2 failed for '", p.string(), "'");
  z_ready = true;
}

GRADUS_INLINE TFRecordWriter::State::~State() {
  if (z_ready) deflateEnd(&z);
}

GRADUS_INLINE TFRecordWriter::State& TFRecordWriter::usable(const char* who) {
  GRADUS_CHECK(value_error, s_ && !s_->closed, "TFRecordWriter::", who, ": the writer is closed");
  GRADUS_CHECK(io_error, s_->error.empty(), s_->error);
  return *s_;
}

GRADUS_INLINE void TFRecordWriter::fail(State& s, const char* what) {
  s.error = detail::str("TFRecordWriter: ", what, " '", s.path.string(), "': ", detail::errno_text(errno));
  throw io_error(s.error);
}

GRADUS_INLINE void TFRecordWriter::drain(State& s) {
  write_all(s, s.buffer);
  s.buffer.clear();
}

GRADUS_INLINE void TFRecordWriter::write_all(State& s, std::string_view bytes) {
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(s.file.fd, p, std::min<size_t>(left, size_t(1) << 30));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      fail(s, "cannot write");
    }
    p += n;
    left -= size_t(n);
  }
}

GRADUS_INLINE void TFRecordWriter::emit(State& s, std::string_view bytes) {
  if (s.buffer.size() + bytes.size() > kBuffer) drain(s);
  if (bytes.size() >= kBuffer) {  // large: straight to the file, no copy
    write_all(s, bytes);
    return;
  }
  s.buffer.append(bytes);
}

GRADUS_INLINE void TFRecordWriter::deflate_some(State& s, std::string_view bytes, int flush) {
  char out[1 << 16];
  auto* next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  size_t left = bytes.size();
  for (;;) {
    const auto chunk = uInt(std::min<size_t>(left, size_t(1) << 30));
    s.z.next_in = next_in;
    s.z.avail_in = chunk;
    s.z.next_out = reinterpret_cast<Bytef*>(out);
    s.z.avail_out = sizeof out;
    const bool last = left == chunk;
    const int rc = ::deflate(&s.z, last ? flush : Z_NO_FLUSH);
    GRADUS_CHECK(io_error, rc == Z_OK || rc == Z_STREAM_END || rc == Z_BUF_ERROR,
                 "TFRecordWriter: zlib's deflate failed for '", s.path.string(), "' (", rc, ")");
    const auto used = size_t(s.z.next_in - next_in);
    next_in += used;
    left -= used;
    emit(s, {out, sizeof out - s.z.avail_out});
    if (!last || left > 0) continue;
    // All input taken: done once zlib has room to spare (and, finishing, has ended the stream).
    if (flush == Z_FINISH ? rc == Z_STREAM_END : s.z.avail_out != 0) return;
  }
}

GRADUS_INLINE void TFRecordWriter::put(State& s, std::string_view bytes) {
  if (s.options.compression == Compression::none)
    emit(s, bytes);
  else
    deflate_some(s, bytes, Z_NO_FLUSH);
}

GRADUS_INLINE void TFRecordWriter::close_quietly() noexcept {
  try {
    close();
  } catch (...) {
  }
}
}  // namespace gradus::io
#endif  // GRADUS_DEFINE_COMPILED
