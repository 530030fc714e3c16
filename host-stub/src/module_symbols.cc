#include "module_symbols.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace vmcuda::host {

namespace {

template <class T>
bool read_at(std::span<const std::byte> b, uint64_t off, T* v) {
  if (off > b.size() || sizeof(T) > b.size() - off) return false;
  std::memcpy(v, b.data() + off, sizeof(T));
  return true;
}

// A NUL-terminated string at `off` inside `b` (empty when it runs off the end).
std::string_view c_string(std::span<const std::byte> b, uint64_t off) {
  if (off >= b.size()) return {};
  const char* p = reinterpret_cast<const char*>(b.data()) + off;
  const size_t max = b.size() - off;
  const size_t n = strnlen(p, max);
  return n == max ? std::string_view{} : std::string_view(p, n);
}

bool data_section(std::string_view name) {
  return name.starts_with(".nv.global") || name.starts_with(".nv.constant") || name.starts_with(".nv.managed");
}

void elf_symbols(std::span<const std::byte> elf, std::vector<std::string>& out) {
  if (elf.size() < 64 || std::memcmp(elf.data(), "\x7f" "ELF", 4) != 0 || static_cast<uint8_t>(elf[4]) != 2) return;
  uint64_t shoff = 0;
  uint16_t shentsize = 0, shnum = 0, shstrndx = 0;
  if (!read_at(elf, 0x28, &shoff) || !read_at(elf, 0x3a, &shentsize) || !read_at(elf, 0x3c, &shnum) ||
      !read_at(elf, 0x3e, &shstrndx) || shentsize < 64 || shnum == 0)
    return;
  struct Section {
    uint32_t name = 0, type = 0, link = 0;
    uint64_t offset = 0, size = 0, entsize = 0;
  };
  std::vector<Section> sections;
  for (uint32_t i = 0; i < shnum; ++i) {
    const uint64_t at = shoff + uint64_t{i} * shentsize;
    Section s;
    if (!read_at(elf, at, &s.name) || !read_at(elf, at + 4, &s.type) || !read_at(elf, at + 0x18, &s.offset) ||
        !read_at(elf, at + 0x20, &s.size) || !read_at(elf, at + 0x28, &s.link) || !read_at(elf, at + 0x38, &s.entsize))
      return;
    sections.push_back(s);
  }
  if (shstrndx >= sections.size()) return;
  const Section& names = sections[shstrndx];
  if (names.offset > elf.size() || names.size > elf.size() - names.offset) return;
  const auto section_names = elf.subspan(names.offset, names.size);
  for (const Section& symtab : sections) {
    if (symtab.type != 2 /* SHT_SYMTAB */ || symtab.link >= sections.size()) continue;
    const Section& strtab = sections[symtab.link];
    if (symtab.offset > elf.size() || symtab.size > elf.size() - symtab.offset) continue;
    if (strtab.offset > elf.size() || strtab.size > elf.size() - strtab.offset) continue;
    const auto syms = elf.subspan(symtab.offset, symtab.size);
    const auto strings = elf.subspan(strtab.offset, strtab.size);
    for (uint64_t at = 0; at + 24 <= syms.size(); at += 24) {
      uint32_t name = 0;
      uint8_t info = 0;
      uint16_t shndx = 0;
      uint64_t size = 0;
      read_at(syms, at, &name);
      read_at(syms, at + 4, &info);
      read_at(syms, at + 6, &shndx);
      read_at(syms, at + 16, &size);
      if ((info & 0xf) != 1 /* STT_OBJECT */ || size == 0 || shndx == 0 || shndx >= sections.size()) continue;
      if (!data_section(c_string(section_names, sections[shndx].name))) continue;
      const std::string_view n = c_string(strings, name);
      if (!n.empty() && n.size() < 4096) out.emplace_back(n);
    }
  }
}

// `.global`/`.const` state-space declarations at module scope of PTX text.
void ptx_symbols(std::string_view ptx, std::vector<std::string>& out) {
  int depth = 0;
  size_t line_start = 0;
  while (line_start < ptx.size()) {
    size_t end = ptx.find('\n', line_start);
    if (end == std::string_view::npos) end = ptx.size();
    std::string_view line = ptx.substr(line_start, end - line_start);
    line_start = end + 1;
    const size_t first = line.find_first_not_of(" \t");
    if (first != std::string_view::npos && depth == 0) {
      std::string_view l = line.substr(first);
      for (std::string_view linkage : {".visible ", ".extern ", ".weak ", ".common "})
        if (l.starts_with(linkage)) l = l.substr(linkage.size());
      if ((l.starts_with(".global ") || l.starts_with(".const ")) && l.find(".func") == std::string_view::npos &&
          l.find(".entry") == std::string_view::npos) {
        // The name is the last token before '[', '=' or ';'.
        const size_t stop = l.find_first_of("[=;");
        std::string_view head = l.substr(0, stop);
        while (!head.empty() && (head.back() == ' ' || head.back() == '\t')) head.remove_suffix(1);
        const size_t space = head.find_last_of(" \t");
        const std::string_view name = space == std::string_view::npos ? head : head.substr(space + 1);
        if (!name.empty() && name.front() != '.' && name.size() < 4096) out.emplace_back(name);
      }
    }
    for (char c : line) depth += c == '{' ? 1 : c == '}' ? -1 : 0;
    if (depth < 0) depth = 0;
  }
}

}  // namespace

ModuleSymbols module_data_symbols(std::span<const std::byte> image) {
  ModuleSymbols r;
  uint32_t magic = 0;
  if (read_at(image, 0, &magic) && magic == 0xBA55ED50u) {
    uint16_t header = 0;
    uint64_t fat = 0;
    if (read_at(image, 6, &header) && read_at(image, 8, &fat) && header >= 16 && header <= image.size() &&
        fat <= image.size() - header) {
      const uint64_t end = header + fat;
      for (uint64_t off = header; off + 16 <= end;) {
        uint16_t kind = 0;
        uint32_t eh = 0;
        uint64_t payload = 0, flags = 0;
        read_at(image, off, &kind);
        read_at(image, off + 4, &eh);
        read_at(image, off + 8, &payload);
        if (eh < 16 || eh > end - off || payload > end - off - eh) break;
        if (eh >= 0x38) read_at(image, off + 0x30, &flags);
        const auto body = image.subspan(off + eh, payload);
        if (flags & (0x2000 | 0x8000))
          ++r.skipped_entries;
        else if (kind == 2)
          elf_symbols(body, r.names);
        else if (kind == 1)
          ptx_symbols(std::string_view(reinterpret_cast<const char*>(body.data()),
                                       strnlen(reinterpret_cast<const char*>(body.data()), body.size())),
                      r.names);
        off += eh + payload;
      }
    }
  } else if (image.size() >= 4 && std::memcmp(image.data(), "\x7f" "ELF", 4) == 0) {
    elf_symbols(image, r.names);
  } else {
    ptx_symbols(std::string_view(reinterpret_cast<const char*>(image.data()),
                                 strnlen(reinterpret_cast<const char*>(image.data()), image.size())),
                r.names);
  }
  std::sort(r.names.begin(), r.names.end());
  r.names.erase(std::unique(r.names.begin(), r.names.end()), r.names.end());
  return r;
}

}  // namespace vmcuda::host
