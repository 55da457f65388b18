// The archive-aware mutation of the zip-based targets (pt2, package). The archives' entries are
// stored with a CRC-32 that the readers check, so a byte changed inside an entry is refused
// before the entry is read. These mutators therefore mutate the entries rather than the archive:
// they unpack the input, mutate one entry (usually a .json one), and pack it again with fresh
// CRCs. A JSON entry is mutated half the time as a tree (one value replaced by a hostile number,
// a float, another value of the document, or dropped), which keeps it valid JSON and reaches the
// checks behind the parser; otherwise as bytes, by libFuzzer's own mutations.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "coil/error.h"
#include "frontend/zip_reader.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace coil::fuzz {

using json = nlohmann::json;

inline void collect(json& j, std::vector<json*>& out) {
  out.push_back(&j);
  if (j.is_structured())
    for (auto& child : j) collect(child, out);
}

// `text` with one value of its JSON changed, or nothing when it is not JSON.
inline std::optional<std::string> mutate_json(const std::string& text, std::minstd_rand& rng) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  static const int64_t hostile[] = {0, 1, -1, 2, 3, 7, 64, 255, 256, 65536, int64_t{1} << 31, int64_t{1} << 32,
                                    int64_t{1} << 62, kMax, kMax - 1, -kMax - 1};
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded()) return std::nullopt;
  std::vector<json*> values;
  collect(doc, values);
  json& v = *values[rng() % values.size()];
  switch (rng() % 6) {
    case 0: v = hostile[rng() % std::size(hostile)]; break;
    case 1:  // a number moved by -2..2 (wrapping at the int64 limits), anything else made null
      v = v.is_number_integer() ? json(static_cast<int64_t>(v.get<uint64_t>() + rng() % 5 - 2)) : json(nullptr);
      break;
    case 2: {  // another value of the document here: a name, a tensor meta, a node
      json copy = *values[rng() % values.size()];
      v = std::move(copy);
      break;
    }
    case 3:  // one element or key fewer
      if (v.is_structured() && !v.empty()) v.erase(std::next(v.begin(), static_cast<std::ptrdiff_t>(rng() % v.size())));
      break;
    case 4: v = rng() % 2 ? json::array() : json::object(); break;
    case 5: v = rng() % 2 ? 2.5 : 1e300; break;  // a float where an integer belongs
  }
  try {
    return doc.dump();
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

// The archive with one entry mutated, or nothing when the input is not a readable archive or
// the result would be longer than `max_size`. `fixup` may change the entries after the mutation
// (the package target lists the changed entry's hash in the manifest again).
template <typename Fixup>
std::optional<std::string> mutate_entry(const uint8_t* data, size_t size, size_t max_size, std::minstd_rand& rng,
                                        Fixup&& fixup) {
  using coil::frontend::ZipReader;
  coil::frontend::ZipEntries entries;
  try {
    ZipReader zip = ZipReader::from_bytes(std::string(reinterpret_cast<const char*>(data), size), "input");
    for (const auto& name : zip.names()) entries.emplace_back(name, zip.read(name, max_size));
  } catch (const coil::Error&) {
    return std::nullopt;
  }
  if (entries.empty()) return std::nullopt;
  std::vector<size_t> json_entries;
  for (size_t i = 0; i < entries.size(); ++i)
    if (entries[i].first.ends_with(".json")) json_entries.push_back(i);
  // The JSON entries hold nearly all the structure; weights and the small entries get the rest.
  size_t pick = !json_entries.empty() && rng() % 4 != 0 ? json_entries[rng() % json_entries.size()] : rng() % entries.size();
  std::string& bytes = entries[pick].second;
  std::optional<std::string> tree;
  if (entries[pick].first.ends_with(".json") && rng() % 2 == 0) tree = mutate_json(bytes, rng);
  if (tree) {
    bytes = std::move(*tree);
  } else {
    const size_t old_size = bytes.size();
    const size_t room = old_size + (max_size > size ? max_size - size : 0) + 1;
    bytes.resize(room);
    bytes.resize(LLVMFuzzerMutate(reinterpret_cast<uint8_t*>(bytes.data()), old_size, room));
  }
  fixup(entries, rng);
  try {
    std::string out = coil::frontend::zip_bytes(entries);
    if (out.size() <= max_size) return out;
  } catch (const coil::Error&) {
  }
  return std::nullopt;
}

// LLVMFuzzerCustomMutator of a zip-based target: seven mutations in eight are of one entry
// (then `fixup`), the rest of the raw bytes, for the zip layer itself.
template <typename Fixup>
size_t mutate_archive(uint8_t* data, size_t size, size_t max_size, unsigned int seed, Fixup&& fixup) {
  std::minstd_rand rng(seed);
  if (rng() % 8 != 0) {
    if (std::optional<std::string> out = mutate_entry(data, size, max_size, rng, fixup)) {
      std::memcpy(data, out->data(), out->size());
      return out->size();
    }
  }
  return LLVMFuzzerMutate(data, size, max_size);
}

}  // namespace coil::fuzz
