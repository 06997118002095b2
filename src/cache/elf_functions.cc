#include "src/cache/elf_functions.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace mlajit::cache {
namespace {

// ELF64 constants (the System V gABI).
constexpr absl::string_view kMagic("\177ELF", 4);  // 0x7f "ELF"
constexpr size_t kHeaderBytes = 64;
constexpr size_t kSectionHeaderBytes = 64;
constexpr size_t kSymbolBytes = 24;
constexpr uint32_t kSymtab = 2;            // SHT_SYMTAB
constexpr uint8_t kFunc = 2;               // STT_FUNC
constexpr uint16_t kUndefined = 0;         // SHN_UNDEF
constexpr uint16_t kReservedLow = 0xff00;  // SHN_LORESERVE: not a section index

template <typename T>
T Load(absl::string_view image, size_t at) {
  T v;
  std::memcpy(&v, image.data() + at, sizeof(T));  // little-endian host (x86-64, aarch64)
  return v;
}

// Whether [offset, offset + count * size) lies inside `bytes`, without overflow.
bool Fits(uint64_t offset, uint64_t count, uint64_t size, uint64_t bytes) {
  if (offset > bytes) return false;
  return size == 0 || count <= (bytes - offset) / size;
}

absl::Status Malformed(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("ELF image: ", what));
}

}  // namespace

absl::StatusOr<std::vector<ElfFunction>> ListElfFunctions(absl::string_view image) {
  if (image.size() < kHeaderBytes || image.substr(0, 4) != kMagic) {
    return Malformed(
        absl::StrCat("size ", image.size(), ", no ELF magic: expected an ELF code object"));
  }
  if (image[4] != 2 || image[5] != 1) {
    return Malformed(absl::StrCat("class ", static_cast<int>(static_cast<unsigned char>(image[4])),
                                  ", data ", static_cast<int>(static_cast<unsigned char>(image[5])),
                                  ": expected 2 (ELF64) and 1 (little-endian)"));
  }
  const uint64_t shoff = Load<uint64_t>(image, 0x28);
  const uint16_t shentsize = Load<uint16_t>(image, 0x3a);
  const uint16_t shnum = Load<uint16_t>(image, 0x3c);
  if (shentsize != kSectionHeaderBytes) {
    return Malformed(absl::StrCat("e_shentsize=", shentsize, ": expected ", kSectionHeaderBytes));
  }
  if (!Fits(shoff, shnum, kSectionHeaderBytes, image.size())) {
    return Malformed(absl::StrCat("e_shoff=", shoff, " with e_shnum=", shnum,
                                  ": section headers past the end (", image.size(), " bytes)"));
  }
  struct Section {
    uint32_t type;
    uint32_t link;
    uint64_t offset, size, entsize;
  };
  auto section = [&](size_t i) {
    const size_t at = shoff + i * kSectionHeaderBytes;
    return Section{Load<uint32_t>(image, at + 4), Load<uint32_t>(image, at + 40),
                   Load<uint64_t>(image, at + 24), Load<uint64_t>(image, at + 32),
                   Load<uint64_t>(image, at + 56)};
  };
  std::vector<ElfFunction> functions;
  // An object has at most one symbol table (gABI), which also bounds the list
  // by the image: section headers naming the same bytes again and again would
  // otherwise list their symbols once per header, up to 65535 times over.
  size_t first_symtab = shnum;
  for (size_t i = 0; i < shnum; ++i) {
    const Section symtab = section(i);
    if (symtab.type != kSymtab) continue;
    if (first_symtab < shnum) {
      return Malformed(absl::StrCat("sections ", first_symtab, " and ", i,
                                    " are both symbol tables: expected at most one"));
    }
    first_symtab = i;
    if (symtab.entsize != kSymbolBytes || symtab.size % kSymbolBytes != 0 ||
        !Fits(symtab.offset, symtab.size, 1, image.size())) {
      return Malformed(absl::StrCat("symbol table (section ", i, ") at ", symtab.offset, ", ",
                                    symtab.size, " bytes of ", symtab.entsize,
                                    "-byte entries: expected ", kSymbolBytes,
                                    "-byte entries inside the image"));
    }
    if (symtab.link >= shnum) {
      return Malformed(absl::StrCat("symbol table (section ", i, ") names string table ",
                                    symtab.link, ": only ", shnum, " sections"));
    }
    const Section strtab = section(symtab.link);
    if (!Fits(strtab.offset, strtab.size, 1, image.size())) {
      return Malformed(absl::StrCat("string table (section ", symtab.link, ") at ", strtab.offset,
                                    ", ", strtab.size, " bytes: past the end"));
    }
    const absl::string_view names = image.substr(strtab.offset, strtab.size);
    // The names listed fit in their string table, end to end: symbols that
    // name the same bytes again and again (or ever later suffixes of one long
    // name) would otherwise make the list, and the time to read it, grow with
    // the square of the image. Stopping there also bounds the bytes scanned.
    uint64_t name_bytes = 0;
    for (uint64_t at = symtab.offset; at < symtab.offset + symtab.size; at += kSymbolBytes) {
      const uint32_t name = Load<uint32_t>(image, at);
      const uint8_t info = Load<uint8_t>(image, at + 4);
      const uint16_t shndx = Load<uint16_t>(image, at + 6);
      const uint64_t size = Load<uint64_t>(image, at + 16);
      if ((info & 0xf) != kFunc || shndx == kUndefined || shndx >= kReservedLow) continue;
      const size_t end = name < names.size() ? names.find('\0', name) : absl::string_view::npos;
      if (end == absl::string_view::npos) {
        return Malformed(absl::StrCat("function symbol's name at ", name,
                                      " runs past its string table (", names.size(), " bytes)"));
      }
      name_bytes += end - name + 1;
      if (name_bytes > names.size()) {
        return Malformed(absl::StrCat("function names total more than their string table's ",
                                      names.size(),
                                      " bytes: names overlap; expected each in the table once"));
      }
      functions.push_back({std::string(names.substr(name, end - name)), size});
    }
  }
  std::sort(functions.begin(), functions.end(),
            [](const ElfFunction& a, const ElfFunction& b) { return a.name < b.name; });
  return functions;
}

}  // namespace mlajit::cache
