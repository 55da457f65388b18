// Seeded mutation fuzzing of the .pt2 reader, built with AddressSanitizer, UndefinedBehavior-
// Sanitizer and LeakSanitizer by gcc (tests/CMakeLists.txt), so ctest checks the reader where
// clang's libFuzzer is missing; tests/fuzz/pt2.cc is the coverage-guided target (scripts/fuzz).
// Every fixture under tests/fixtures/pt2 is mutated three ways: characters of its
// model JSON replaced by JSON punctuation and digits, raw bytes of the zip flipped, and the file
// truncated. Each mutant must load or fail with a coil::Error; anything else (a crash, a
// sanitizer report, a leak at exit, another exception) fails the run.
//
//   pt2_mutations FIXTURE_DIR [ITERATIONS_PER_FIXTURE] [SEED]
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "coil/error.h"
#include "frontend/pt2.h"
#include "frontend/zip_reader.h"

namespace fs = std::filesystem;

namespace {

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// The archive with every models/*.json entry mutated.
void write_json_mutant(const fs::path& fixture, const fs::path& out, std::mt19937& rng) {
  auto zip = coil::frontend::ZipReader::open(fixture.string());
  std::vector<std::pair<std::string, std::string>> entries;
  for (const auto& name : zip.names()) {
    std::string bytes = zip.read(name);
    if (name.find("/models/") != std::string::npos && !bytes.empty())
      for (int k = 0; k < 1 + static_cast<int>(rng() % 4); ++k) bytes[rng() % bytes.size()] = "{}[]\":,0129aZ -e."[rng() % 17];
    entries.emplace_back(name, std::move(bytes));
  }
  coil::frontend::write_zip(out.string(), entries);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: pt2_mutations FIXTURE_DIR [ITERATIONS_PER_FIXTURE] [SEED]\n";
    return 2;
  }
  int iterations = argc > 2 ? std::stoi(argv[2]) : 40;
  std::mt19937 rng(argc > 3 ? static_cast<unsigned>(std::stoul(argv[3])) : 7u);
  fs::path scratch = fs::temp_directory_path() / ("coil_pt2_mutations_" + std::to_string(rng()));
  fs::create_directories(scratch);
  int loaded = 0, refused = 0;
  for (const auto& f : fs::directory_iterator(argv[1])) {
    if (f.path().extension() != ".pt2") continue;
    std::string original = read_bytes(f.path());
    for (int i = 0; i < iterations; ++i) {
      fs::path mutant = scratch / "mutant.pt2";
      if (i % 3 == 0) {
        write_json_mutant(f.path(), mutant, rng);
      } else {
        std::string b = i % 3 == 1 ? original : original.substr(0, rng() % original.size());
        if (i % 3 == 1)
          for (int k = 0; k < 1 + static_cast<int>(rng() % 8); ++k) b[rng() % b.size()] = static_cast<char>(rng());
        std::ofstream(mutant, std::ios::binary) << b;
      }
      try {
        coil::load_pt2(mutant.string());
        ++loaded;
      } catch (const coil::Error&) {
        ++refused;
      }
    }
  }
  fs::remove_all(scratch);
  std::printf("pt2 mutations: %d loaded, %d refused with a coil::Error, no crash\n", loaded, refused);
  return loaded + refused > 0 ? 0 : 1;
}
