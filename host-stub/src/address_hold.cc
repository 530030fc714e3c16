#include "address_hold.h"

#include <sys/mman.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>

namespace vmcuda::host {

std::recursive_mutex& context_layout_mu() {
  static std::recursive_mutex mu;
  return mu;
}

uint64_t lowest_of_cluster(const std::vector<AddressRange>& added) {
  if (added.empty()) return 0;
  size_t i = 0;
  for (size_t k = 1; k < added.size(); ++k)
    if (added[k].end - added[k].begin > added[i].end - added[i].begin) i = k;
  while (i > 0 && added[i - 1].end + kClusterGap >= added[i].begin) --i;
  return added[i].begin;
}

AddressRange free_below(const std::vector<AddressRange>& maps, uint64_t at, uint64_t bytes) {
  uint64_t floor = at > bytes ? at - bytes : 0;
  for (const AddressRange& r : maps)
    if (r.begin < at) floor = std::max(floor, std::min(r.end, at));
  return {floor, at};
}

std::string mappings_between(uint64_t begin, uint64_t end) {
  std::string out;
  FILE* f = std::fopen("/proc/self/maps", "re");
  if (!f) return out;
  char line[4096];
  while (std::fgets(line, sizeof line, f)) {
    uint64_t b = 0, e = 0;
    if (std::sscanf(line, "%" SCNx64 "-%" SCNx64, &b, &e) == 2 && b < end && begin < e) out += line;
  }
  std::fclose(f);
  return out;
}

std::vector<AddressRange> current_mappings() {
  std::vector<AddressRange> out;
  FILE* f = std::fopen("/proc/self/maps", "re");
  if (!f) return out;
  char line[4096];
  while (std::fgets(line, sizeof line, f)) {
    uint64_t b = 0, e = 0;
    if (std::sscanf(line, "%" SCNx64 "-%" SCNx64, &b, &e) == 2 && b < e) out.push_back({b, e});
  }
  std::fclose(f);
  std::sort(out.begin(), out.end(), [](const AddressRange& a, const AddressRange& b) { return a.begin < b.begin; });
  return out;
}

std::vector<AddressRange> vanished_ranges(const std::vector<AddressRange>& before,
                                          const std::vector<AddressRange>& after) {
  std::vector<AddressRange> out;
  size_t j = 0;
  for (AddressRange r : before) {
    while (j < after.size() && after[j].end <= r.begin) ++j;
    for (size_t k = j; k < after.size() && after[k].begin < r.end && r.begin < r.end; ++k) {
      if (after[k].begin > r.begin) out.push_back({r.begin, after[k].begin});
      r.begin = std::max(r.begin, after[k].end);
    }
    if (r.begin < r.end) out.push_back(r);
  }
  // Adjacent pieces are one hole.
  std::vector<AddressRange> merged;
  for (const AddressRange& r : out)
    if (!merged.empty() && merged.back().end == r.begin)
      merged.back().end = r.end;
    else
      merged.push_back(r);
  return merged;
}

void AddressHold::hold(std::vector<AddressRange> ranges) {
  forget();
  add(ranges);
}

void AddressHold::add(const std::vector<AddressRange>& ranges) {
  for (const AddressRange& r : ranges) {
    if (r.begin >= r.end) continue;
    ranges_.push_back(r);
    // MAP_FIXED_NOREPLACE: a range something took meanwhile stays that thing's.
    void* p = ::mmap(reinterpret_cast<void*>(r.begin), r.end - r.begin, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED) continue;
    if (reinterpret_cast<uint64_t>(p) != r.begin) {  // a kernel without MAP_FIXED_NOREPLACE
      ::munmap(p, r.end - r.begin);
      continue;
    }
    held_.push_back(r);
  }
}

void AddressHold::release() {
  for (const AddressRange& r : held_) ::munmap(reinterpret_cast<void*>(r.begin), r.end - r.begin);
  held_.clear();
}

uint64_t AddressHold::held_bytes() const {
  uint64_t n = 0;
  for (const AddressRange& r : held_) n += r.end - r.begin;
  return n;
}

std::string AddressHold::describe() const {
  return std::to_string(held_.size()) + " range(s), " + std::to_string(held_bytes() >> 20) + " MiB";
}

}  // namespace vmcuda::host
