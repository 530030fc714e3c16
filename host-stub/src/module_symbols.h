// The data symbols (__device__, __constant__, __managed__ variables) a module image defines,
// read from the image itself: a suspend must save every variable of every loaded module,
// also those the program never named from host code (the guest binds variables lazily) and
// file-static ones. Reads uncompressed cubins (ELF symbol tables; nvcc's default for the
// fatbin's own architectures) and PTX text; compressed entries (-compress-all, zstd PTX)
// are skipped and counted. The image is untrusted: every offset is checked.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace vmcuda::host {

struct ModuleSymbols {
  std::vector<std::string> names;  // sorted, unique
  unsigned skipped_entries = 0;    // compressed fatbin entries that could not be read
};

ModuleSymbols module_data_symbols(std::span<const std::byte> image);

}  // namespace vmcuda::host
