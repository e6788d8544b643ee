// .npy / .npz: round trips of every dtype (rank 0 and empty included), numpy's exact header
// layout, STORED and DEFLATE members, clear errors for malformed files, a corruption loop, and the
// round trip through Python: numpy reads what gradus writes (tests/fixtures/io/read_check.py, which
// also parses the safetensors file with json + struct alone) and gradus reads what numpy writes.
#include <catch2/catch.hpp>
#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <gradus/gradus.hpp>
#include <gradus/io.hpp>

#include "io_samples.hpp"

namespace gd = gradus;
namespace io = gradus::io;
using Catch::Contains;
using gd::io::testing::same;
using gd::io::testing::sample;
using gd::io::testing::seq;

namespace {

/// `payload` as a raw deflate stream (no zlib or gzip framing), at the best compression.
std::string raw_deflate(const std::string& payload) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, 9, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string packed(deflateBound(&z, uLong(payload.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(payload.data()));
  z.avail_in = uInt(payload.size());
  z.next_out = reinterpret_cast<Bytef*>(packed.data());
  z.avail_out = uInt(packed.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  packed.resize(z.total_out);
  deflateEnd(&z);
  return packed;
}

/// The fields a DEFLATE member's local header and central directory entry share, from "version
/// needed" to the extra field's length.
void member_fields(std::string& out, const std::string& payload, size_t packed_size, uint64_t usize,
                   size_t name_size, size_t extra_size) {
  using io::detail::store_le;
  store_le<2>(out, 20);
  store_le<2>(out, 0);
  store_le<2>(out, 8);  // DEFLATE
  store_le<4>(out, 0x00210000);
  store_le<4>(out, io::detail::crc32_of(payload));
  store_le<4>(out, packed_size);
  store_le<4>(out, usize);
  store_le<2>(out, name_size);
  store_le<2>(out, extra_size);
}
/// A central directory entry: the shared fields, then those of its own, then the name.
void central_entry(std::string& out, const std::string& shared, size_t local_offset, const std::string& name) {
  using io::detail::store_le;
  store_le<4>(out, 0x02014b50);
  store_le<2>(out, 20);
  out += shared;
  for (int i = 0; i < 3; ++i) store_le<2>(out, 0);  // comment length, disk, internal attributes
  store_le<4>(out, 0);                               // external attributes
  store_le<4>(out, local_offset);
  out += name;
}
/// The end-of-central-directory record of `n` members whose directory starts at `cd`.
void end_record(std::string& out, int n, size_t cd) {
  using io::detail::store_le;
  const size_t cd_size = out.size() - cd;
  store_le<4>(out, 0x06054b50);
  store_le<4>(out, 0);
  store_le<2>(out, n);
  store_le<2>(out, n);
  store_le<4>(out, cd_size);
  store_le<4>(out, cd);
  store_le<2>(out, 0);
}

/// A one-member zip archive whose member is `payload` deflated (raw, as zip does); `claimed`
/// overrides the uncompressed size in the headers.
std::string deflated_zip(const std::string& name, const std::string& payload, uint64_t claimed = UINT64_MAX) {
  const std::string packed = raw_deflate(payload);
  std::string common;
  member_fields(common, payload, packed.size(), claimed == UINT64_MAX ? payload.size() : claimed, name.size(), 0);
  std::string out;
  io::detail::store_le<4>(out, 0x04034b50);
  out += common + name + packed;
  const size_t cd = out.size();
  central_entry(out, common, 0, name);
  end_record(out, 1, cd);
  return out;
}

/// An archive of `n` (< 1000) deflated members "m<iii>.npy" whose data is one shared deflate stream of
/// `payload`: each local header's extra field covers the local headers after it, so every
/// member's data starts at the same byte (the overlapping-members amplification).
std::string overlapping_zip(int n, const std::string& payload) {
  const std::string packed = raw_deflate(payload);
  const size_t header = 30 + 8, data_at = size_t(n) * header;  // names "m<iii>.npy" are 8 bytes
  const auto name = [](int i) {
    std::string digits = std::to_string(i);
    return "m" + std::string(3 - digits.size(), '0') + digits + ".npy";
  };
  std::string out;
  for (int i = 0; i < n; ++i) {
    io::detail::store_le<4>(out, 0x04034b50);
    // the extra field runs to the shared data
    member_fields(out, payload, packed.size(), payload.size(), 8, data_at - (size_t(i) + 1) * header);
    out += name(i);
  }
  REQUIRE(out.size() == data_at);
  out += packed;
  const size_t cd = out.size();
  std::string shared;
  member_fields(shared, payload, packed.size(), payload.size(), 8, 0);
  for (int i = 0; i < n; ++i) central_entry(out, shared, size_t(i) * header, name(i));
  end_record(out, n, cd);
  return out;
}

bool decodes_or_rejects(bool npz, const std::string& bytes, std::string& what) {
  try {
    if (npz) (void)io::decode_npz(bytes, "fuzz");
    else (void)io::decode_npy(bytes, "fuzz");
    return true;
  } catch (const gd::io_error&) {
    return true;
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "an exception not derived from std::exception";
  }
  return false;
}

}  // namespace

TEST_CASE("io: npy round trip and numpy's header layout", "[io][npy]") {
  for (const auto& [name, t] : sample()) {
    const std::string bytes = io::encode_npy(t);
    CHECK(same(io::decode_npy(bytes), t));
    const size_t hlen = size_t(io::detail::load_le<2>(bytes.data() + 8));
    CHECK((10 + hlen) % 64 == 0);  // the data starts at a multiple of 64
    CHECK(bytes[10 + hlen - 1] == '\n');
  }
  // np.save(np.zeros((2, 3), np.float32)): the dict, 20 spare spaces for the first axis, padding.
  const std::string bytes = io::encode_npy(gd::Tensor<float>::zeros({2, 3}));
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  CHECK(bytes.substr(0, 10) == std::string("\x93NUMPY\x01\x00\x76\x00", 10));
  CHECK(bytes.substr(10, 118) == dict + std::string(118 - 1 - dict.size(), ' ') + "\n");
  CHECK(bytes.size() == 128 + 24);
  CHECK_THAT(io::encode_npy(gd::Tensor<int64_t>::scalar(1)), Contains("'<i8', 'fortran_order': False, 'shape': (), }"));
  CHECK_THAT(io::encode_npy(gd::Tensor<double>::zeros({7})), Contains("'shape': (7,), }"));

  io::save_npy("x.npy", seq<double>({3, 1, 2}, 1.5, 2.0));
  CHECK(same(io::load_npy("x.npy"), seq<double>({3, 1, 2}, 1.5, 2.0)));

  // Versions 2.0 and 3.0 (u32 header length), and a hand-written header numpy also accepts.
  const std::string dict2 = "{\"shape\":(2,),\"descr\":\"<i8\",\"fortran_order\":False}\n";
  for (char major : {'\x02', '\x03'}) {
    std::string v = std::string("\x93NUMPY", 6) + major + '\0';
    io::detail::store_le<4>(v, dict2.size());
    v += dict2 + std::string(16, '\x01');
    CHECK(std::get<gd::Tensor<int64_t>>(io::decode_npy(v)).data()[1] == 0x0101010101010101);
  }
}

TEST_CASE("io: malformed npy files are rejected with a clear message", "[io][npy]") {
  auto npy = [](const std::string& dict, const std::string& data, char major = 1) {
    std::string out = std::string("\x93NUMPY", 6) + major + '\0';
    io::detail::store_le<2>(out, dict.size());
    return out + dict + data;
  };
  auto rejects = [](const std::string& bytes, const std::string& message) {
    INFO("expecting: " << message);
    CHECK_THROWS_WITH(io::decode_npy(bytes, "bad.npy"), Contains("'bad.npy'") && Contains(message));
  };
  const std::string f4 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  REQUIRE(io::decode_npy(npy(f4, std::string(8, '\0'))).index() == 0);
  rejects("", "too short");
  rejects("\x93NUMPX\x01\x00\x00\x00", "bad magic");
  rejects(npy(f4, std::string(8, '\0'), 4), "format version 4.0 is not supported");
  rejects(npy(f4, "").substr(0, 20), "more than the 10 bytes after it");
  rejects(npy(f4, std::string(7, '\0')), "need 8 bytes of data but the file has 7 (truncated file?)");
  rejects(npy(f4, std::string(9, '\0')), "(trailing bytes)");
  rejects(npy("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", ""), "dtype '>f4' is not supported");
  rejects(npy("{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }", ""), "(supported: '<f4', '<f8', '<i8')");
  rejects(npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", ""), "structured dtypes");
  rejects(npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", ""), "fortran_order is True");
  rejects(npy("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }", ""), "must be True or False");
  rejects(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2), }", ""), "needs a comma");
  rejects(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", ""), "tuple of non-negative integers");
  rejects(npy("{'descr': '<f4', 'fortran_order': False, 'shape': [2], }", ""), "tuple of non-negative integers");
  rejects(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", ""), "more than 8 dimensions");
  rejects(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", ""), "overflow");
  rejects(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", ""), "too large");
  // A zero dimension does not excuse the others: [0, 2^62, 2^62] would wrap after a reduction.
  rejects(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4611686018427387904, 4611686018427387904), }", ""),
          "overflow");
  rejects(npy("{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904, 0, 2), }", ""), "overflow");
  rejects(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2305843009213693952, 0), }", ""), "overflow");
  CHECK(io::detail::shape_of(io::decode_npy(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 1099511627776), }",
                                                 ""))) == gd::Shape{0, int64_t(1) << 40});
  rejects(npy("{'descr': '<f4', 'fortran_order': False}", ""), "lacks 'shape'");
  rejects(npy("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", ""), "'descr' appears twice");
  rejects(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", ""), "unexpected key 'x'");
  rejects(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x", ""), "unexpected text after the header");
  rejects(npy("['descr']", ""), "must be a Python dict");
  rejects(npy("{'descr: '<f4'}", ""), "expected ':'");
  rejects(npy("{'descr': '<f4\xc3\xa9', 'fortran_order': False, 'shape': (2,)}", ""), "non-ASCII");
  CHECK_THROWS_WITH(io::load_npy("no_such.npy"), Contains("no_such.npy"));
}

TEST_CASE("io: npz round trip, STORED and DEFLATE members, bad archives", "[io][npz]") {
  const io::TensorList in = sample();
  io::save_npz("x.npz", in);
  const io::TensorList out = io::load_npz("x.npz");
  REQUIRE(out.size() == in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    CHECK(out[i].first == in[i].first);
    CHECK(same(out[i].second, in[i].second));
  }
  CHECK(io::decode_npz(io::encode_npz({})).empty());
  const gd::Tensor<float> t = gd::Tensor<float>::scalar(1.f);
  CHECK_THROWS_WITH(io::encode_npz({{"a", t}, {"a", t}}), Contains("two arrays are named 'a'"));
  CHECK_THROWS_WITH(io::encode_npz({{"", t}}), Contains("empty name"));

  const std::string payload = io::encode_npy(seq<double>({50, 4}, 0.125, 0.0));
  const std::string zip = deflated_zip("w.npy", payload);
  REQUIRE(zip.size() < payload.size());
  const io::TensorList w = io::decode_npz(zip);
  REQUIRE(w.size() == 1);
  CHECK(w[0].first == "w");
  CHECK(same(w[0].second, seq<double>({50, 4}, 0.125, 0.0)));

  auto rejects = [](const std::string& bytes, const std::string& message) {
    INFO("expecting: " << message);
    CHECK_THROWS_WITH(io::decode_npz(bytes, "bad.npz"), Contains("'bad.npz'") && Contains(message));
  };
  const std::string good = io::encode_npz({{"a", t}});
  const size_t data_at = 30 + 5;
  rejects("PK", "too short for a zip archive");
  rejects(std::string(100, 'x'), "no end-of-central-directory record");
  std::string b = good;
  b[data_at + 80] ^= 1;  // a byte of the array: the CRC catches it
  rejects(b, "CRC-32 mismatch");
  b = good;
  b[8] = 12;  // method 12 (bzip2) in both headers
  b[good.size() - 22 - 46 - 5 + 10] = 12;
  rejects(b, "compression method 12");
  b = good;
  b[good.size() - 22 - 46 - 5 + 8] = 1;  // encrypted flag in the central directory
  rejects(b, "is encrypted");
  b = good;
  b[good.size() - 22 - 46 - 5 + 42] = 9;  // local header offset
  rejects(b, "bad local header offset 9");
  rejects(deflated_zip("a.txt", payload), "is not an .npy file");
  rejects(deflated_zip("w.npy", payload, payload.size() - 1), "it inflates to more than its size");
  rejects(deflated_zip("w.npy", payload, payload.size() + 1), "inflates to 1728 bytes, not 1729");
  rejects(deflated_zip("w.npy", payload, 4000000000u), "claims 4000000000 bytes from");
  std::string z = zip;
  z[30 + 5 + 20] ^= 0x55;  // inside the deflate stream
  std::string what;
  CHECK(decodes_or_rejects(true, z, what));
  rejects(deflated_zip("w.npy", payload).substr(0, zip.size() - 22) + good.substr(good.size() - 22), "central directory");
  CHECK_THROWS_WITH(io::load_npz("no_such.npz"), Contains("no_such.npz"));
}

TEST_CASE("io: npz members that share their bytes are rejected before they are inflated", "[io][npz]") {
  const std::string payload = io::encode_npy(gd::Tensor<float>::zeros({250000}));  // 1 MB, deflates to ~1 KB
  // one member built the same way is a valid archive
  const gd::io::TensorList one = io::decode_npz(overlapping_zip(1, payload), "one");
  REQUIRE(one.size() == 1);
  CHECK(one[0].first == "m000");
  // 100 members over the one stream would be 100 MB of arrays from a few kilobytes
  const std::string bomb = overlapping_zip(100, payload);
  CHECK(bomb.size() < 16000);
  CHECK_THROWS_WITH(io::decode_npz(bomb, "bomb.npz"),
                    Contains("bomb.npz") && Contains("members 'm000.npy' and 'm001.npy' overlap") &&
                        Contains("may not share bytes"));
  // np.savez's own archives, and gradus', have members side by side
  const gd::io::TensorList many = {{"a", gd::Tensor<float>::zeros({3})}, {"b", gd::Tensor<double>::zeros({2, 2})},
                                   {"c", gd::Tensor<int64_t>::zeros({1})}};
  CHECK(io::decode_npz(io::encode_npz(many)).size() == 3);
}

TEST_CASE("io: corrupted npy and npz files decode or throw io_error, never anything else", "[io][npz]") {
  const std::string npy = io::encode_npy(seq<double>({3, 2}, 1.0, 0.0));
  const std::string npz = io::encode_npz({{"a", seq<float>({2, 2}, 1.f, 0.f)}, {"bb", gd::Tensor<int64_t>::scalar(5)}});
  const std::string zip = deflated_zip("w.npy", io::encode_npy(seq<double>({20}, 0.5, 0.0)));
  std::string what, first_failure;
  int cases = 0, failures = 0;
  auto run = [&](bool is_npz, const std::string& bytes, const char* kind, size_t at) {
    ++cases;
    if (decodes_or_rejects(is_npz, bytes, what)) return;
    if (failures++ == 0) first_failure = std::string(kind) + " at " + std::to_string(at) + ": " + what;
  };
  for (const auto& [file, is_npz] : {std::pair{npy, false}, std::pair{npz, true}, std::pair{zip, true}}) {
    for (size_t pos = 0; pos < file.size(); ++pos) {
      std::string b = file;
      for (int bit = 0; bit < 8; ++bit) {
        b[pos] = char(file[pos] ^ (1 << bit));
        run(is_npz, b, "bit flip", pos);
      }
      for (char c : {'\0', '\xff', '\x7f', '(', ')', ',', '\''}) {
        b[pos] = c;
        run(is_npz, b, "overwrite", pos);
      }
      run(is_npz, file.substr(0, pos), "truncation", pos);
    }
  }
  INFO(cases << " corrupt files; first failure: " << first_failure);
  CHECK(failures == 0);
}

TEST_CASE("io: numpy and json+struct read what gradus writes, gradus reads what numpy writes", "[io][python]") {
  const char* python = "/usr/bin/python3";
  if (!std::filesystem::exists(python) || std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0) {
    WARN("/usr/bin/python3 with numpy is not available: skipping the Python interop check");
    return;
  }
  const io::TensorList tensors = sample();
  io::save_safetensors("interop.safetensors", tensors, {{"global_step", "7"}, {"note", "h\xc3\xa9llo \"quoted\""}});
  io::save_npy("interop.npy", tensors[2].second);
  io::save_npz("interop.npz", tensors);
  for (const char* f : {"numpy_compressed.npz", "numpy_stored.npz", "numpy.npy"}) std::filesystem::remove(f);

  const std::string cmd = std::string(python) + " '" GRADUS_TEST_DATA_DIR "/io/read_check.py' interop.safetensors "
                                                "interop.npy interop.npz numpy_compressed.npz numpy_stored.npz numpy.npy";
  INFO(cmd);
  REQUIRE(std::system(cmd.c_str()) == 0);

  const io::TensorList expected = {{"x", seq<double>({7}, 0.125, -0.5)},
                                   {"y", seq<float>({3, 4}, 1.f / 8.f, 0.f)},
                                   {"z", seq<int64_t>({5}, 1, -2)},
                                   {"r0", gd::Tensor<float>::scalar(2.5f)}};
  for (const char* file : {"numpy_compressed.npz", "numpy_stored.npz"}) {
    INFO(file);
    const io::TensorList got = io::load_npz(file);
    REQUIRE(got.size() == expected.size());
    for (size_t i = 0; i < got.size(); ++i) {
      CHECK(got[i].first == expected[i].first);
      CHECK(same(got[i].second, expected[i].second));
    }
  }
  gd::Tensor<double> tenths({2, 3});
  for (int i = 0; i < 6; ++i) tenths.data()[i] = double(i) * 0.1;
  CHECK(same(io::load_npy("numpy.npy"), tenths));
}
