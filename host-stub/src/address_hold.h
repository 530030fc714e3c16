// Keeps the address ranges a suspended client's contexts gave back free for its resume.
//
// The driver places a new context's own ranges (module data among them) top-down in the
// host's mmap area, so a context created again lands where the last one was only if that
// hole is still free. Anything mapped in between (a thread's stack or malloc arena, a
// library, pinned staging) would take it and move the module variables the guest holds the
// addresses of. So a suspend covers the hole with inaccessible placeholders, and the resume
// takes them away just before it creates the contexts again.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace vmcuda::host {

struct AddressRange {
  uint64_t begin = 0, end = 0;  // [begin, end)
  bool operator==(const AddressRange&) const = default;
};

// Held while contexts are created or destroyed: one client at a time, so that the ranges a
// context takes or gives back are that client's alone (several share the process with
// --isolation thread).
std::recursive_mutex& context_layout_mu();

// How much free address space a new context keeps below its ranges (a fence): the driver
// asks for more than it keeps, to align, so a context created again needs that slack free
// too, and a thread stack or library mapped right below the first context would take it.
inline constexpr uint64_t kContextFenceBytes = 1ull << 30;

// Where the ranges a context took end downwards: the largest of `added` (sorted) and the
// ranges below it that lie within kClusterGap of each other (its threads' stacks, its
// mappings); 0 if there are none. Ranges elsewhere (the heap growing) are not the context's.
inline constexpr uint64_t kClusterGap = 64ull << 20;
uint64_t lowest_of_cluster(const std::vector<AddressRange>& added);

// The free space directly below `at` (down to the next mapping of `maps`, at most `bytes`).
AddressRange free_below(const std::vector<AddressRange>& maps, uint64_t at, uint64_t bytes);

// /proc/self/maps' lines for the mappings that meet [begin, end): what a resume whose module
// data moved logs, to show what took its place.
std::string mappings_between(uint64_t begin, uint64_t end);

// This process's mappings, from /proc/self/maps, in address order (empty if unreadable).
std::vector<AddressRange> current_mappings();

// The parts of `before` that no range of `after` covers (both sorted).
std::vector<AddressRange> vanished_ranges(const std::vector<AddressRange>& before,
                                          const std::vector<AddressRange>& after);

class AddressHold {
 public:
  AddressHold() = default;
  AddressHold(const AddressHold&) = delete;
  AddressHold& operator=(const AddressHold&) = delete;
  ~AddressHold() { release(); }

  // Maps a placeholder over each range that nothing has taken yet (never over a mapping);
  // remembers the ranges so that hold_again() can cover them once more. hold() replaces
  // what was held; add() holds more.
  void hold(std::vector<AddressRange> ranges);
  void add(const std::vector<AddressRange>& ranges);
  // After a failed resume gave the contexts back again.
  void hold_again() { hold(ranges_); }
  // Unmaps the placeholders (the ranges stay remembered; forget() drops them too).
  void release();
  void forget() {
    release();
    ranges_.clear();
  }

  uint64_t held_bytes() const;
  size_t held_ranges() const { return held_.size(); }
  std::string describe() const;  // for logs: "N ranges, M MiB"

 private:
  std::vector<AddressRange> ranges_;  // what to hold
  std::vector<AddressRange> held_;    // placeholders mapped now
};

}  // namespace vmcuda::host
