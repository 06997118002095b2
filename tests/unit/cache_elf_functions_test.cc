// The ELF symbol reader behind `jitcache show`'s function list: a small image
// built here, each malformation it must refuse, and every truncation of it.
// (jit_compile_test.cc reads real NVRTC and hiprtc binaries with it.)
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/cache/elf_functions.h"

namespace mlajit::cache {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Symbol {
  std::string name;
  uint8_t type;  // STT_FUNC 2, STT_OBJECT 1
  uint16_t section;
  uint64_t size;
};

template <typename T>
void Put(std::string* s, size_t at, T v) {
  std::memcpy(&(*s)[at], &v, sizeof(T));
}

// Offsets of the parts of the image MakeElf writes, for the tests that break one.
struct Layout {
  size_t strtab, symtab, symtab_bytes, shdrs;
};

// A little-endian ELF64 image: sections null, .text, .symtab (linked to the
// next), .strtab; the symbols after the null one.
std::string MakeElf(const std::vector<Symbol>& symbols, Layout* layout = nullptr) {
  std::string strtab(1, '\0');
  std::vector<uint32_t> names;
  for (const Symbol& s : symbols) {
    names.push_back(static_cast<uint32_t>(strtab.size()));
    strtab += s.name + '\0';
  }
  const size_t strtab_at = 64;
  const size_t symtab_at = (strtab_at + strtab.size() + 7) / 8 * 8;
  const size_t symtab_bytes = 24 * (symbols.size() + 1);
  const size_t shdrs_at = symtab_at + symtab_bytes;
  std::string image(shdrs_at + 4 * 64, '\0');
  image.replace(0, 4,
                "\x7f"
                "ELF");
  image[4] = 2;  // ELF64
  image[5] = 1;  // little-endian
  image[6] = 1;
  Put<uint64_t>(&image, 0x28, shdrs_at);
  Put<uint16_t>(&image, 0x34, 64);
  Put<uint16_t>(&image, 0x3a, 64);
  Put<uint16_t>(&image, 0x3c, 4);
  Put<uint16_t>(&image, 0x3e, 3);
  image.replace(strtab_at, strtab.size(), strtab);
  for (size_t i = 0; i < symbols.size(); ++i) {
    const size_t at = symtab_at + 24 * (i + 1);
    Put<uint32_t>(&image, at, names[i]);
    Put<uint8_t>(&image, at + 4, static_cast<uint8_t>(0x10 | symbols[i].type));  // global
    Put<uint16_t>(&image, at + 6, symbols[i].section);
    Put<uint64_t>(&image, at + 16, symbols[i].size);
  }
  auto section = [&](int i, uint32_t type, uint64_t offset, uint64_t size, uint32_t link,
                     uint64_t entsize) {
    const size_t at = shdrs_at + 64 * i;
    Put<uint32_t>(&image, at + 4, type);
    Put<uint64_t>(&image, at + 24, offset);
    Put<uint64_t>(&image, at + 32, size);
    Put<uint32_t>(&image, at + 40, link);
    Put<uint64_t>(&image, at + 56, entsize);
  };
  section(1, 1, 0, 0, 0, 0);  // .text (its bytes do not matter here)
  section(2, 2, symtab_at, symtab_bytes, 3, 24);
  section(3, 3, strtab_at, strtab.size(), 0, 0);
  if (layout != nullptr) *layout = {strtab_at, symtab_at, symtab_bytes, shdrs_at};
  return image;
}

const std::vector<Symbol> kSymbols = {
    {"mla_decode_kernel", 2, 1, 109184},    {"data", 1, 1, 64},  // an object: not a function
    {"external_helper", 2, 0, 0},                                // undefined: not in this image
    {"mla_combine_kernel_w4", 2, 1, 11008}, {"helper_slowpath", 2, 1, 1040},
};

TEST(ElfFunctions, ListsTheDefinedFunctionsByName) {
  auto fns = ListElfFunctions(MakeElf(kSymbols));
  ASSERT_TRUE(fns.ok()) << fns.status();
  std::vector<std::string> names;
  std::vector<uint64_t> sizes;
  for (const ElfFunction& f : *fns) {
    names.push_back(f.name);
    sizes.push_back(f.code_bytes);
  }
  EXPECT_THAT(names, ElementsAre("helper_slowpath", "mla_combine_kernel_w4", "mla_decode_kernel"));
  EXPECT_THAT(sizes, ElementsAre(1040, 11008, 109184));
}

TEST(ElfFunctions, AnImageWithoutFunctionsListsNone) {
  auto fns = ListElfFunctions(MakeElf({{"data", 1, 1, 8}}));
  ASSERT_TRUE(fns.ok()) << fns.status();
  EXPECT_TRUE(fns->empty());
}

void ExpectRefused(const std::string& image, const std::string& message) {
  auto fns = ListElfFunctions(image);
  ASSERT_FALSE(fns.ok());
  EXPECT_EQ(fns.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(fns.status().message(), HasSubstr(message));
}

TEST(ElfFunctions, RefusesWhatIsNotALittleEndianElf64) {
  ExpectRefused("", "size 0, no ELF magic");
  ExpectRefused(std::string(100, 'x'), "no ELF magic");
  std::string elf32 = MakeElf(kSymbols);
  elf32[4] = 1;
  ExpectRefused(elf32, "class 1, data 1: expected 2 (ELF64) and 1 (little-endian)");
  std::string big = MakeElf(kSymbols);
  big[5] = 2;
  ExpectRefused(big, "class 2, data 2");
}

// fuzz_elf_functions: section headers that all name the one symbol table
// listed its functions once per header, more functions than the image has
// symbol bytes for (a 555-byte input listed 24); enough headers would exhaust
// memory. A second symbol table is refused.
TEST(ElfFunctions, RefusesASecondSymbolTable) {
  Layout l;
  std::string image = MakeElf(kSymbols, &l);
  // Section 1 (.text) becomes a copy of section 2 (.symtab).
  image.replace(l.shdrs + 64, 64, image.substr(l.shdrs + 128, 64));
  ExpectRefused(image, "sections 1 and 2 are both symbol tables: expected at most one");
}

// Many function symbols naming one string: each listed its own copy, so a
// table of n such symbols and a name of m bytes listed n x m bytes.
TEST(ElfFunctions, RefusesNamesThatOverlap) {
  std::vector<Symbol> symbols(9, {"f", 2, 1, 8});
  symbols[0].name = "mla_decode_kernel_with_a_long_name";
  Layout l;
  const std::string distinct = MakeElf(symbols, &l);
  ASSERT_TRUE(ListElfFunctions(distinct).ok());
  // Every symbol takes symbol 1's name (string table offset 1).
  std::string image = distinct;
  for (size_t i = 2; i <= symbols.size(); ++i) Put<uint32_t>(&image, l.symtab + 24 * i, 1);
  ExpectRefused(image, "function names total more than their string table's 52 bytes");
}

TEST(ElfFunctions, RefusesOffsetsAndCountsPastTheEnd) {
  Layout l;
  const std::string good = MakeElf(kSymbols, &l);

  std::string s = good;
  Put<uint64_t>(&s, 0x28, s.size() - 64);  // four headers from 64 bytes before the end
  ExpectRefused(s, "section headers past the end");
  s = good;
  Put<uint64_t>(&s, 0x28, ~0ull - 8);  // an offset that would wrap
  ExpectRefused(s, "section headers past the end");
  s = good;
  Put<uint16_t>(&s, 0x3a, 40);
  ExpectRefused(s, "e_shentsize=40: expected 64");

  const size_t symtab_header = l.shdrs + 64 * 2;
  s = good;
  Put<uint64_t>(&s, symtab_header + 32, ~0ull / 24 * 24);  // a huge symbol table
  ExpectRefused(s, "symbol table (section 2)");
  s = good;
  Put<uint64_t>(&s, symtab_header + 56, 16);
  ExpectRefused(s, "16-byte entries");
  s = good;
  Put<uint32_t>(&s, symtab_header + 40, 9);
  ExpectRefused(s, "names string table 9: only 4 sections");

  const size_t strtab_header = l.shdrs + 64 * 3;
  s = good;
  Put<uint64_t>(&s, strtab_header + 24, s.size());
  Put<uint64_t>(&s, strtab_header + 32, 1);
  ExpectRefused(s, "string table (section 3)");

  s = good;
  Put<uint32_t>(&s, l.symtab + 24, 100000);  // the first symbol's name offset
  ExpectRefused(s, "name at 100000 runs past its string table");
  s = good;
  Put<uint64_t>(&s, strtab_header + 32, 5);  // cuts "mla_decode_kernel" short of its NUL
  ExpectRefused(s, "runs past its string table (5 bytes)");
}

// Every truncation of a good image is refused, and none reads past its end
// (the sanitized builds check the reads).
TEST(ElfFunctions, EveryTruncationIsRefused) {
  const std::string good = MakeElf(kSymbols);
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(ListElfFunctions(good.substr(0, n)).ok()) << n << " bytes";
  }
}

}  // namespace
}  // namespace mlajit::cache
