// Tensor files (.safetensors, .npy), the f16/bf16 conversions and round_to_dtype.
#include "coil/io.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <tuple>

#include "coil/error.h"
#include "support/half.h"

namespace coil {
namespace {

namespace fs = std::filesystem;
using namespace std::string_literals;

class IoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("coil_io_test_{}_{}", ::getpid(),
                                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  int files_in_dir() const {
    return static_cast<int>(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()));
  }
  fs::path dir_;
};

Tensor make(DType dtype, Shape shape, const std::vector<double>& values) {
  Tensor t = Tensor::zeros(dtype, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) t.store(static_cast<int64_t>(i), values[i]);
  return t;
}

Tensor make_int(DType dtype, Shape shape, const std::vector<int64_t>& values) {
  Tensor t = Tensor::zeros(dtype, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) t.store_int(static_cast<int64_t>(i), values[i]);
  return t;
}

// Byte-exact comparison element by element, so views, -0.0 and NaN bits all count.
void expect_same(const Tensor& actual, const Tensor& expected) {
  ASSERT_EQ(actual.dtype(), expected.dtype());
  ASSERT_EQ(actual.sizes(), expected.sizes());
  EXPECT_TRUE(actual.is_contiguous());
  const size_t size = static_cast<size_t>(dtype_size(actual.dtype()));
  expected.for_each_index([&](std::span<const int64_t> idx) {
    const char* a = static_cast<const char*>(actual.storage()->data()) + actual.element_index(idx) * size;
    const char* e = static_cast<const char*>(expected.storage()->data()) + expected.element_index(idx) * size;
    EXPECT_EQ(std::memcmp(a, e, size), 0) << "at element " << shape_to_string(Shape(idx.begin(), idx.end()));
  });
}

// One [2, 3] tensor per dtype with negatives, fractions, extremes and -0.0.
NamedTensors samples() {
  using L = std::numeric_limits<int64_t>;
  return {
      {"f64", make(DType::f64, {2, 3}, {-1.5, 0.1, 1e300, -0.0, 3.141592653589793, -2.5e-310})},
      {"f32", make(DType::f32, {2, 3}, {-1.5, 0.1, 3.4028234663852886e38, -0.0, 1.401298464324817e-45, 1.0 / 3})},
      {"f16", make(DType::f16, {2, 3}, {-1.5, 0.0999755859375, 65504, -0.0, 5.960464477539063e-08, -0.333251953125})},
      {"bf16",
       make(DType::bf16, {2, 3}, {-1.5, 0.10009765625, 3.3895313892515355e38, -0.0, 9.183549615799121e-41, 3.140625})},
      {"i64", make_int(DType::i64, {2, 3}, {L::min(), L::max(), -1, 0, 42, -123456789012345})},
      {"i32", make_int(DType::i32, {2, 3}, {-2147483648, 2147483647, -1, 0, 7, -100000})},
      {"i16", make_int(DType::i16, {2, 3}, {-32768, 32767, -1, 0, 300, -300})},
      {"i8", make_int(DType::i8, {2, 3}, {-128, 127, -1, 0, 5, -5})},
      {"u8", make_int(DType::u8, {2, 3}, {0, 255, 1, 128, 7, 200})},
      {"b8", make_int(DType::b8, {2, 3}, {1, 0, 1, 1, 0, 0})},
  };
}

std::string u64_le(uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }

std::string safetensors_bytes(const std::string& header, const std::string& data) {
  return u64_le(header.size()) + header + data;
}

std::string f32_bytes(std::initializer_list<float> values) {
  std::string out;
  for (float v : values) out.append(reinterpret_cast<const char*>(&v), 4);
  return out;
}

std::string npy_bytes(int major, const std::string& dict, const std::string& data) {
  std::string header = dict + "\n";
  uint32_t size = static_cast<uint32_t>(header.size());
  std::string out = std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0';
  out.append(reinterpret_cast<const char*>(&size), major == 1 ? 2 : 4);
  return out + header + data;
}

// Runs `fn` and returns the coil::Error message it throws ("" when it does not throw).
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_ERROR(expr, phrase) EXPECT_THAT_ERROR(error_of([&] { (void)(expr); }), phrase)
#define EXPECT_THAT_ERROR(message, phrase) \
  EXPECT_NE((message).find(phrase), std::string::npos) << "error was: \"" << (message) << "\""

// --- safetensors ------------------------------------------------------------------------------

TEST_F(IoTest, SafetensorsRoundTripsEveryDTypeInOrder) {
  NamedTensors in = samples();
  std::swap(in[0], in[9]);  // not sorted by name, so order must come from the file
  write_safetensors(path("all.safetensors"), in);
  NamedTensors out = read_safetensors(path("all.safetensors"));
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out[i].first, in[i].first);
    expect_same(out[i].second, in[i].second);
  }
  EXPECT_EQ(files_in_dir(), 1) << "a temporary file was left behind";
}

TEST_F(IoTest, SafetensorsEmptyAndZeroDim) {
  NamedTensors in = {{"scalar", make(DType::f32, {}, {3.5})},
                     {"empty", Tensor::zeros(DType::f16, {0})},
                     {"empty3", Tensor::zeros(DType::i64, {2, 0, 3})},
                     {"after", make_int(DType::i8, {1}, {-7})}};
  write_safetensors(path("e.safetensors"), in);
  NamedTensors out = read_safetensors(path("e.safetensors"));
  ASSERT_EQ(out.size(), 4u);
  for (size_t i = 0; i < in.size(); ++i) expect_same(out[i].second, in[i].second);
  EXPECT_EQ(out[0].second.dim(), 0);
  write_safetensors(path("none.safetensors"), {});
  EXPECT_TRUE(read_safetensors(path("none.safetensors")).empty());
}

TEST_F(IoTest, SafetensorsWritesNonContiguousViews) {
  Tensor base = make(DType::f32, {2, 3}, {0, 1, 2, 3, 4, 5});
  write_safetensors(path("v.safetensors"), {{"t", base.view({3, 2}, {1, 3}, 0)}, {"s", base.view({2}, {3}, 1)}});
  NamedTensors out = read_safetensors(path("v.safetensors"));
  expect_same(out[0].second, make(DType::f32, {3, 2}, {0, 3, 1, 4, 2, 5}));
  expect_same(out[1].second, make(DType::f32, {2}, {1, 4}));
}

TEST_F(IoTest, SafetensorsBytesMatchHandBuiltFileAndMetadata) {
  write_safetensors(path("a.safetensors"), {{"a", make(DType::f32, {2}, {1.0, -2.0})}});
  std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  EXPECT_EQ(read_file(path("a.safetensors")), safetensors_bytes(header, "\x00\x00\x80\x3f\x00\x00\x00\xc0"s));

  std::map<std::string, std::string> metadata = {{"format", "pt"}, {"note", "caf\xc3\xa9 \"quoted\""}};
  write_safetensors(path("m.safetensors"), {{"x", make(DType::u8, {3}, {1, 2, 3})}}, metadata);
  std::string bytes = read_file(path("m.safetensors"));
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ((8 + n) % 8, 0u);
  auto json = nlohmann::ordered_json::parse(bytes.substr(8, n));
  EXPECT_EQ(json.begin().key(), "__metadata__");
  EXPECT_EQ((json["__metadata__"].get<std::map<std::string, std::string>>()), metadata);
  NamedTensors out = read_safetensors(path("m.safetensors"));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].first, "x");
  EXPECT_FALSE(nlohmann::json::parse(read_file(path("a.safetensors")).substr(8)).contains("__metadata__"));
}

TEST_F(IoTest, SafetensorsReadsHandBuiltFileInHeaderOrder) {
  // "b" is listed first but stored second; the reader keeps the header order.
  std::string header = R"(  {"b" : {"shape": [1], "dtype": "F32", "data_offsets": [8, 12]},
       "__metadata__": {"k": "v"}, "a": {"dtype":"F32","shape":[2],"data_offsets":[0,8]}}   )";
  NamedTensors out = parse_safetensors(safetensors_bytes(header, f32_bytes({1.5f, -2.25f, 7.0f})), "hand");
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].first, "b");
  EXPECT_EQ(out[1].first, "a");
  expect_same(out[0].second, make(DType::f32, {1}, {7.0}));
  expect_same(out[1].second, make(DType::f32, {2}, {1.5, -2.25}));
}

std::string parse_error(const std::string& header, const std::string& data) {
  return error_of([&] { parse_safetensors(safetensors_bytes(header, data), "bad.safetensors"); });
}

TEST(SafetensorsErrors, HeaderProblems) {
  EXPECT_ERROR(parse_safetensors("abc", "x.st"), "x.st: file is too short");
  EXPECT_ERROR(parse_safetensors(u64_le(1000) + "{}", "x.st"), "header length 1000 is larger");
  EXPECT_THAT_ERROR(parse_error("{not json}", ""), "bad.safetensors: the safetensors header is not valid JSON");
  EXPECT_THAT_ERROR(parse_error("[1, 2]", ""), "not a JSON object");
  // A megabyte of nesting overflowed the stack when the error message printed the value.
  EXPECT_THAT_ERROR(parse_error(R"({"a": )" + std::string(1 << 20, '[') + std::string(1 << 20, ']') + "}", ""),
                    "bad.safetensors: the safetensors header: its JSON nests deeper than 512 levels");
  EXPECT_THAT_ERROR(parse_error(R"({"a": {"shape": "[[[[[[", "dtype": "F32", "data_offsets": [0, 0]}})", ""),
                    "shape");  // brackets inside strings are not nesting
  EXPECT_THAT_ERROR(parse_error(R"({"a": 5})", ""), "tensor 'a': expected an object");
  EXPECT_THAT_ERROR(parse_error(R"({"a": {"shape": [], "data_offsets": [0, 4]}})", ""), "missing \"dtype\"");
  std::string twice = R"({"a": {"dtype":"U8","shape":[1],"data_offsets":[0,1]},
                          "a": {"dtype":"U8","shape":[1],"data_offsets":[1,2]}})";
  EXPECT_THAT_ERROR(parse_error(twice, "ab"), "duplicate tensor name 'a'");
  EXPECT_THAT_ERROR(parse_error(R"({"__metadata__": {"k": 1}})", ""), "__metadata__ must be an object of strings");
  EXPECT_THAT_ERROR(parse_error(R"({"__metadata__": [1]})", ""), "__metadata__ must be an object of strings");
}

TEST(SafetensorsErrors, EntryProblems) {
  auto entry = [](const std::string& dtype, const std::string& shape, const std::string& offsets) {
    return fmt::format(R"({{"w": {{"dtype": {}, "shape": {}, "data_offsets": {}}}}})", dtype, shape, offsets);
  };
  std::string data(8, '\0');
  EXPECT_THAT_ERROR(parse_error(entry("\"F8_E4M3\"", "[2]", "[0, 2]"), data),
                    "tensor 'w': unsupported dtype 'F8_E4M3'");
  EXPECT_THAT_ERROR(parse_error(entry("\"C64\"", "[1]", "[0, 8]"), data), "unsupported dtype 'C64'");
  EXPECT_THAT_ERROR(parse_error(entry("7", "[1]", "[0, 8]"), data), "dtype must be a string");
  for (const char* shape : {"[-1]", "[2.0]", "\"2\"", "[[2]]", "[18446744073709551615]"})
    EXPECT_THAT_ERROR(parse_error(entry("\"F32\"", shape, "[0, 8]"), data),
                      "shape must be a list of non-negative integers");
  EXPECT_THAT_ERROR(parse_error(entry("\"F64\"", "[4294967296, 4294967296]", "[0, 8]"), data), "too large to address");
  for (const char* offsets : {"[0]", "[0, 4, 8]", "[-1, 7]", "\"0-8\"", "[0.0, 8]"})
    EXPECT_THAT_ERROR(parse_error(entry("\"F32\"", "[2]", offsets), data), "data_offsets must be a list of two");
  EXPECT_THAT_ERROR(parse_error(entry("\"F32\"", "[4]", "[0, 16]"), data), "data_offsets [0, 16] are out of range");
  EXPECT_THAT_ERROR(parse_error(entry("\"F32\"", "[1]", "[8, 4]"), data), "out of range");
  EXPECT_THAT_ERROR(parse_error(entry("\"F32\"", "[3]", "[0, 8]"), data),
                    "size mismatch: data_offsets [0, 8] span 8 bytes but F32 [3] needs 12");
}

TEST(SafetensorsErrors, OverlapsAndHoles) {
  auto two = [](int a_begin, int a_end, int b_begin, int b_end) {
    return fmt::format(R"({{"a": {{"dtype":"F32","shape":[1],"data_offsets":[{},{}]}},
                           "b": {{"dtype":"F32","shape":[1],"data_offsets":[{},{}]}}}})",
                       a_begin, a_end, b_begin, b_end);
  };
  EXPECT_THAT_ERROR(parse_error(two(0, 4, 2, 6), std::string(8, '\0')), "overlaps tensor 'a'");
  EXPECT_THAT_ERROR(parse_error(two(0, 4, 8, 12), std::string(12, '\0')),
                    "bytes [4, 8] of the data buffer belong to no tensor");
  EXPECT_THAT_ERROR(parse_error(two(0, 4, 4, 8), std::string(10, '\0')),
                    "bytes [8, 10] at the end of the data buffer belong to no tensor");
  EXPECT_THAT_ERROR(parse_error(two(0, 4, 0, 4), std::string(4, '\0')), "overlaps");
}

TEST_F(IoTest, SafetensorsFileAndWriterErrors) {
  EXPECT_ERROR(read_safetensors(path("missing.safetensors")),
               "cannot open '" + path("missing.safetensors") + "': No such file");
  write_file_atomic(path("short.safetensors"), "1234");
  EXPECT_ERROR(read_safetensors(path("short.safetensors")), path("short.safetensors") + ": file is too short");
  Tensor t = make(DType::f32, {1}, {1});
  EXPECT_ERROR(write_safetensors(path("d.safetensors"), {{"a", t}, {"a", t}}), "duplicate tensor name 'a'");
  EXPECT_ERROR(write_safetensors(path("r.safetensors"), {{"__metadata__", t}}), "is reserved");
  EXPECT_ERROR(write_safetensors(path("u.safetensors"), {{"a", Tensor()}}), "tensor 'a' is undefined");
  EXPECT_ERROR(write_safetensors(path("bad.safetensors"), {{"\xff", t}}), "must be valid UTF-8");
  EXPECT_ERROR(write_safetensors(path("no/such/dir/x.safetensors"), {{"a", t}}), "No such file or directory");
  EXPECT_EQ(files_in_dir(), 1);  // only short.safetensors: failed writes leave nothing behind
}

TEST_F(IoTest, AtomicWriteReplacesWholeFileOrNothing) {
  write_file_atomic(path("f"), "first version");
  write_file_atomic(path("f"), "2nd");
  EXPECT_EQ(read_file(path("f")), "2nd");
  fs::create_directories(dir_ / "sub" / "keep");
  // Only regular files are replaced: a folder (a device, a FIFO) is refused before anything is written.
  EXPECT_ERROR(write_file_atomic(path("sub"), "x"),
               "cannot write '" + path("sub") + "': it is a directory, and coil replaces only regular files");
  EXPECT_EQ(files_in_dir(), 2) << "a temporary file was left behind";
  EXPECT_ERROR(read_file(path("sub")), "cannot read '" + path("sub") + "': Is a directory");
}

// --- npy --------------------------------------------------------------------------------------

TEST_F(IoTest, NpyRoundTripsEveryDTypeButBf16) {
  for (const auto& [name, tensor] : samples()) {
    if (tensor.dtype() == DType::bf16) {
      EXPECT_ERROR(write_npy(path("bf16.npy"), tensor), ".npy has no bfloat16 dtype");
      continue;
    }
    write_npy(path(name + ".npy"), tensor);
    expect_same(read_npy(path(name + ".npy")), tensor);
  }
  EXPECT_EQ(files_in_dir(), 9);
}

TEST_F(IoTest, NpyHeaderMatchesHandBuiltBytes) {
  write_npy(path("a.npy"), make(DType::f32, {2}, {1.0, -2.0}));
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  std::string expected = npy_bytes(1, dict + std::string(128 - 10 - dict.size() - 1, ' '), f32_bytes({1.0f, -2.0f}));
  EXPECT_EQ(read_file(path("a.npy")), expected);

  write_npy(path("s.npy"), make_int(DType::b8, {}, {1}));
  std::string bytes = read_file(path("s.npy"));
  EXPECT_NE(bytes.find("{'descr': '|b1', 'fortran_order': False, 'shape': (), }"), std::string::npos);
  write_npy(path("m.npy"), Tensor::zeros(DType::i16, {2, 0, 3}));
  bytes = read_file(path("m.npy"));
  EXPECT_NE(bytes.find("'descr': '<i2', 'fortran_order': False, 'shape': (2, 0, 3), }"), std::string::npos);
  EXPECT_EQ(bytes.size(), 128u);  // no data, and the header padded to 64-byte alignment
  expect_same(read_npy(path("m.npy")), Tensor::zeros(DType::i16, {2, 0, 3}));
  expect_same(read_npy(path("s.npy")), make_int(DType::b8, {}, {1}));
}

TEST_F(IoTest, NpyWritesNonContiguousViews) {
  Tensor base = make_int(DType::i32, {2, 3}, {0, 1, 2, 3, 4, 5});
  write_npy(path("t.npy"), base.view({3, 2}, {1, 3}, 0));
  expect_same(read_npy(path("t.npy")), make_int(DType::i32, {3, 2}, {0, 3, 1, 4, 2, 5}));
}

TEST_F(IoTest, NpyReadsVersionsFortranOrderAndOddSpelling) {
  std::string data = f32_bytes({1, 4, 2, 5, 3, 6});  // [[1, 2, 3], [4, 5, 6]] column by column
  write_file_atomic(path("f.npy"), npy_bytes(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", data));
  expect_same(read_npy(path("f.npy")), make(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6}));

  // A [2, 3, 4] array in Fortran order: element (i, j, k) sits at i + 2j + 6k.
  std::vector<int64_t> fortran(24), row_major(24);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) fortran[i + 2 * j + 6 * k] = row_major[12 * i + 4 * j + k] = 100 * i + 10 * j + k;
  Tensor raw = make_int(DType::i16, {24}, fortran);
  std::string raw_bytes(static_cast<const char*>(raw.data()), 48);
  write_file_atomic(path("f3.npy"),
                    npy_bytes(2, "{\"descr\": \"<i2\", \"shape\": (2L, 3L, 4L), \"fortran_order\": True}", raw_bytes));
  expect_same(read_npy(path("f3.npy")), make_int(DType::i16, {2, 3, 4}, row_major));

  write_file_atomic(path("v3.npy"), npy_bytes(3, "{'descr':'=f2','fortran_order':False,'shape':(1,)}", "\x00\x3c"s));
  expect_same(read_npy(path("v3.npy")), make(DType::f16, {1}, {1.0}));
  write_file_atomic(path("u1.npy"),
                    npy_bytes(1, "{'descr': '>u1', 'fortran_order': False, 'shape': (2,), }", "\x01\xff"s));
  expect_same(read_npy(path("u1.npy")), make_int(DType::u8, {2}, {1, 255}));
}

TEST_F(IoTest, NpyErrors) {
  auto npy_error = [&](const std::string& bytes) {
    write_file_atomic(path("bad.npy"), bytes);
    return error_of([&] { read_npy(path("bad.npy")); });
  };
  auto header = [](const std::string& descr, const std::string& shape, const std::string& order = "False") {
    return fmt::format("{{'descr': {}, 'fortran_order': {}, 'shape': {}, }}", descr, order, shape);
  };
  const std::string four(4, '\0');
  EXPECT_THAT_ERROR(npy_error("PK\x03\x04 not npy"), path("bad.npy") + ": not a .npy file (bad magic");
  EXPECT_THAT_ERROR(npy_error("\x93NUMPY\x01"), "truncated inside its preamble");
  EXPECT_THAT_ERROR(npy_error(npy_bytes(4, header("'<f4'", "(1,)"), four)), "unsupported .npy format version 4.0");
  EXPECT_THAT_ERROR(npy_error(npy_bytes(1, header("'<f4'", "(1,)"), four).substr(0, 20)),
                    "runs past the end of the file");
  EXPECT_THAT_ERROR(npy_error(npy_bytes(1, header("'>f4'", "(1,)"), four)), "dtype '>f4' is big-endian");
  EXPECT_THAT_ERROR(npy_error(npy_bytes(1, header("'<c8'", "(1,)"), four)), "unsupported .npy dtype '<c8'");
  EXPECT_THAT_ERROR(npy_error(npy_bytes(1, header("'<u4'", "(1,)"), four)), "unsupported .npy dtype '<u4'");
  EXPECT_THAT_ERROR(npy_error(npy_bytes(1, header("'|O'", "(1,)"), four)), "unsupported .npy dtype '|O'");
  EXPECT_THAT_ERROR(npy_error(npy_bytes(1, header("[('a', '<f4')]", "(1,)"), four)),
                    "structured dtypes are not supported");
  EXPECT_THAT_ERROR(npy_error(npy_bytes(1, header("'<f4'", "(2,)"), four)),
                    "the .npy data is truncated: '<f4' [2] needs 8 bytes but the file holds 4");
  EXPECT_THAT_ERROR(npy_error(npy_bytes(1, header("'<f4'", "(1,)"), four + "xx")),
                    "2 unexpected bytes after the .npy data");
  EXPECT_THAT_ERROR(npy_error(npy_bytes(1, header("'<f4'", "(-1,)"), four)),
                    "shape must be a tuple of non-negative integers");
  EXPECT_THAT_ERROR(npy_error(npy_bytes(1, header("'<f4'", "(1,)", "Maybe"), four)), "expected True or False");
  EXPECT_THAT_ERROR(npy_error(npy_bytes(1, "{'descr': '<f4', 'shape': (1,)}", four)), "must have the keys");
  EXPECT_THAT_ERROR(npy_error(npy_bytes(1, header("'<f4'", "(1,)") + "x", four)), "unexpected text after");
  EXPECT_THAT_ERROR(npy_error(npy_bytes(1, "{'descr': '<f4', 'extra': 1}", four)), "unexpected key 'extra'");
  EXPECT_THAT_ERROR(npy_error(npy_bytes(1, "{'descr: '<f4'}", four)), "bad .npy header");
  EXPECT_THAT_ERROR(npy_error(npy_bytes(1, header("'<f8'", "(4294967296, 4294967296)"), four)), "too large to address");
  EXPECT_ERROR(read_npy(path("missing.npy")), "cannot open");
}

// Optional: NumPy reads what coil writes and the other way round. Needs python3 with numpy
// (COIL_PYTHON names another interpreter); everything it checks is also covered above.
TEST_F(IoTest, OptionalNumpyCrossCheck) {
  const char* env = std::getenv("COIL_PYTHON");
  const std::string python = env ? env : "python3";
  if (std::system((python + " -c 'import numpy' >/dev/null 2>&1").c_str()) != 0) GTEST_SKIP() << "no numpy";
  for (const auto& [name, tensor] : samples())
    if (tensor.dtype() != DType::bf16) write_npy(path(name + ".npy"), tensor);
  write_safetensors(path("all.safetensors"), samples());
  const std::string script = R"(
import json, struct, sys, numpy as np
d = sys.argv[1]
i64 = np.iinfo(np.int64)
expect = {
    'f64': ('<f8', [-1.5, 0.1, 1e300, -0.0, np.pi, -2.5e-310]),
    'f16': ('<f2', [-1.5, 0.0999755859375, 65504, -0.0, 2**-24, -0.333251953125]),
    'i64': ('<i8', [i64.min, i64.max, -1, 0, 42, -123456789012345]),
    'u8': ('|u1', [0, 255, 1, 128, 7, 200]),
    'b8': ('|b1', [True, False, True, True, False, False]),
}
for name, (kind, values) in expect.items():
    a = np.load(f'{d}/{name}.npy')
    want = np.array(values, dtype=kind).reshape(2, 3)
    assert a.dtype.str == kind and a.shape == (2, 3), (name, a.dtype, a.shape)
    assert np.array_equal(a, want), (name, a)
    assert a.dtype.kind != 'f' or (np.signbit(a) == np.signbit(want)).all(), (name, a)
raw = open(f'{d}/all.safetensors', 'rb').read()
n = struct.unpack('<Q', raw[:8])[0]
h = json.loads(raw[8:8 + n])
b, e = h['i32']['data_offsets']
assert list(np.frombuffer(raw[8 + n + b:8 + n + e], '<i4')) == [-2**31, 2**31 - 1, -1, 0, 7, -100000]
x = np.arange(24, dtype='<f4').reshape(2, 3, 4) - 7.25
np.save(f'{d}/fortran.npy', np.asfortranarray(x))
with open(f'{d}/v3.npy', 'wb') as f:
    np.lib.format.write_array(f, x.astype('<i8'), version=(3, 0))
np.save(f'{d}/big.npy', x.astype('>f8'))
)";
  write_file_atomic(path("check.py"), script);
  ASSERT_EQ(std::system((python + " " + path("check.py") + " " + dir_.string()).c_str()), 0);
  std::vector<double> x(24);
  for (int i = 0; i < 24; ++i) x[i] = i - 7.25;
  expect_same(read_npy(path("fortran.npy")), make(DType::f32, {2, 3, 4}, x));
  std::vector<int64_t> xi(24);
  for (int i = 0; i < 24; ++i) xi[i] = static_cast<int64_t>(std::trunc(x[i]));
  expect_same(read_npy(path("v3.npy")), make_int(DType::i64, {2, 3, 4}, xi));
  EXPECT_ERROR(read_npy(path("big.npy")), "big-endian");
}

// --- f16 / bf16 and round_to_dtype ------------------------------------------------------------

TEST(Half, KnownBitPatterns) {
  EXPECT_EQ(f16_bits_from_double(1.0), 0x3C00);
  EXPECT_EQ(f16_bits_from_double(-2.0), 0xC000);
  EXPECT_EQ(f16_bits_from_double(0.1), 0x2E66);
  EXPECT_EQ(f16_bits_from_double(65504), 0x7BFF);
  EXPECT_EQ(f16_bits_from_double(65519.99), 0x7BFF);
  EXPECT_EQ(f16_bits_from_double(65520), 0x7C00);  // halfway to 2^16 rounds to even: infinity
  EXPECT_EQ(f16_bits_from_double(-1e10), 0xFC00);
  EXPECT_EQ(f16_bits_from_double(-0.0), 0x8000);
  EXPECT_EQ(f16_bits_from_double(std::ldexp(1.0, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(f16_bits_from_double(std::ldexp(1.0, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(f16_bits_from_double(std::ldexp(1023.0, -24)), 0x03FF);
  EXPECT_EQ(f16_bits_from_double(std::ldexp(1023.5, -24)), 0x0400);  // carries into the normals
  EXPECT_EQ(f16_bits_from_double(std::ldexp(1.0, -25)), 0x0000);     // halfway: even is zero
  EXPECT_EQ(f16_bits_from_double(std::ldexp(1.5, -24)), 0x0002);
  EXPECT_EQ(f16_bits_from_double(std::ldexp(2.5, -24)), 0x0002);
  EXPECT_EQ(f16_bits_from_double(1 + std::ldexp(1.0, -11)), 0x3C00);  // halfway, even is down
  EXPECT_EQ(f16_bits_from_double(1 + std::ldexp(3.0, -11)), 0x3C02);  // halfway, even is up
  EXPECT_EQ(f16_bits_from_double(1 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)), 0x3C01);
  EXPECT_EQ(f16_bits_from_double(INFINITY), 0x7C00);
  uint16_t nan = f16_bits_from_double(NAN);
  EXPECT_EQ(nan & 0x7C00, 0x7C00);
  EXPECT_NE(nan & 0x03FF, 0);
  EXPECT_TRUE(std::isnan(f16_bits_to_double(0x7E00)));
  EXPECT_EQ(f16_bits_to_double(0xFC00), -INFINITY);
  EXPECT_EQ(f16_bits_to_double(0x0001), std::ldexp(1.0, -24));
  EXPECT_EQ(f16_bits_to_double(0x7BFF), 65504);

  EXPECT_EQ(bf16_bits_from_double(1.0), 0x3F80);
  EXPECT_EQ(bf16_bits_from_double(-1.0), 0xBF80);
  EXPECT_EQ(bf16_bits_from_double(3.140625), 0x4049);
  EXPECT_EQ(bf16_bits_from_double(3.3895313892515355e38), 0x7F7F);  // largest finite
  EXPECT_EQ(bf16_bits_from_double(3.4028234663852886e38), 0x7F80);  // FLT_MAX rounds to infinity
  EXPECT_EQ(bf16_bits_from_double(1 + std::ldexp(1.0, -8)), 0x3F80);
  EXPECT_EQ(bf16_bits_from_double(1 + std::ldexp(3.0, -8)), 0x3F82);
  EXPECT_EQ(bf16_bits_from_double(std::ldexp(1.0, -126)), 0x0080);
  EXPECT_EQ(bf16_bits_from_double(std::ldexp(1.0, -133)), 0x0001);
  EXPECT_EQ(bf16_bits_from_double(-INFINITY), 0xFF80);
  EXPECT_TRUE(std::isnan(bf16_bits_to_double(bf16_bits_from_double(NAN))));
  EXPECT_EQ(bf16_bits_to_double(0x7F7F), 3.3895313892515355e38);
}

TEST(Half, EveryBitPatternRoundTrips) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    uint16_t bits = static_cast<uint16_t>(b);
    double f16 = f16_bits_to_double(bits), bf16 = bf16_bits_to_double(bits);
    if (!std::isnan(f16)) {
      EXPECT_EQ(f16_bits_from_double(f16), bits) << std::hex << b;
    }
    if (!std::isnan(bf16)) {
      EXPECT_EQ(bf16_bits_from_double(bf16), bits) << std::hex << b;
    }
  }
}

// The encoder picks the nearest representable value, and the even one on a tie.
TEST(Half, RandomValuesRoundToNearestEven) {
  std::mt19937_64 rng(7);
  using Codec = std::tuple<uint16_t (*)(double), double (*)(uint16_t), int>;
  for (auto [encode, decode, max_exp] :
       {Codec{f16_bits_from_double, f16_bits_to_double, 16}, Codec{bf16_bits_from_double, bf16_bits_to_double, 128}}) {
    for (int i = 0; i < 20000; ++i) {
      double x = std::ldexp(std::uniform_real_distribution<double>(1, 2)(rng),
                            std::uniform_int_distribution<int>(-max_exp - 12, max_exp - 2)(rng));
      uint16_t bits = encode(x);
      double error = std::fabs(decode(bits) - x);
      for (uint16_t n : {static_cast<uint16_t>(bits - 1), static_cast<uint16_t>(bits + 1)}) {
        double other = std::fabs(decode(n) - x);
        if (std::isnan(other) || bits == 0) continue;
        EXPECT_TRUE(error < other || (error == other && bits % 2 == 0)) << x << " -> " << bits;
      }
    }
  }
}

TEST(RoundToDType, MatchesPyTorchCasts) {
  EXPECT_EQ(round_to_dtype(0.1, DType::f64), 0.1);
  EXPECT_EQ(round_to_dtype(0.1, DType::f32), static_cast<double>(0.1f));
  EXPECT_EQ(round_to_dtype(0.1, DType::f16), 0.0999755859375);
  EXPECT_EQ(round_to_dtype(0.1, DType::bf16), 0.10009765625);
  EXPECT_EQ(round_to_dtype(1e5, DType::f16), INFINITY);
  EXPECT_TRUE(std::signbit(round_to_dtype(-0.0, DType::f16)));
  EXPECT_EQ(round_to_dtype(127.9, DType::i8), 127);
  EXPECT_EQ(round_to_dtype(-1.9, DType::i32), -1);
  EXPECT_EQ(round_to_dtype(200, DType::i8), -56);
  EXPECT_EQ(round_to_dtype(-1, DType::u8), 255);
  EXPECT_EQ(round_to_dtype(256, DType::u8), 0);
  EXPECT_EQ(round_to_dtype(40000, DType::i16), -25536);
  EXPECT_EQ(round_to_dtype(2147483648.0, DType::i32), -2147483648.0);
  EXPECT_EQ(round_to_dtype(-3e9, DType::i64), -3e9);
  EXPECT_EQ(round_to_dtype(0.5, DType::b8), 1);
  EXPECT_EQ(round_to_dtype(-0.0, DType::b8), 0);
  EXPECT_EQ(round_to_dtype(NAN, DType::b8), 1);
}

}  // namespace
}  // namespace coil
