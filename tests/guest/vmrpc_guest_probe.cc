// Runs inside the test VM (static, no driver): maps the ivshmem BARs from sysfs,
// claims a slot, sends requests through the region, rings the host through BAR0 and
// checks the host's answers. Prints VMRPC-GUEST-OK on success.
//
//   vmrpc_guest_probe /sys/bus/pci/devices/0000:00:03.0
#include <cstdio>
#include <cstring>
#include <string>

#include "support/test_service.h"
#include "vmrpc/bar_doorbell.h"

using namespace vmrpc;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s SYSFS_DIR_OF_IVSHMEM_DEVICE\n", argv[0]);
    return 2;
  }
  try {
    auto dev = BarDevice::open(argv[1]);
    const auto& l = dev->region().layout();
    std::printf("guest: IVPosition %u, region %llu MiB, %u slots, host peer %u\n", dev->iv_position(),
                (unsigned long long)(l.region_bytes >> 20), l.slot_count, l.host_peer_id);
    if (dev->iv_position() != l.guest_peer_id) {
      std::fprintf(stderr, "guest: peer id %u, region says %u\n", dev->iv_position(), l.guest_peer_id);
      return 3;
    }
    std::string why;
    auto slot = ClientSlot::claim(dev->region(), *dev, &why);  // Hello round trip inside
    if (!slot) {
      std::fprintf(stderr, "guest: claim failed: %s\n", why.c_str());
      return 4;
    }
    std::printf("guest: slot %u open\n", slot->index());
    const char msg[] = "request from inside the VM";
    auto r = slot->call(static_cast<uint32_t>(wire::MessageId::kEcho), std::as_bytes(std::span(msg)), 64);
    if (r.status != 0 || r.bytes.size() != sizeof msg || std::memcmp(r.bytes.data(), msg, sizeof msg)) {
      std::fprintf(stderr, "guest: echo failed (status %d)\n", r.status);
      return 5;
    }
    // A batch with a heap payload the host transforms.
    const uint64_t n = 1 << 20;
    auto in = slot->heap().allocate(n), out = slot->heap().allocate(n);
    if (!in || !out) return 6;
    for (uint64_t i = 0; i < n; ++i) in->data[i] = std::byte(i * 7 + 1);
    testing::XorCopyArgs a{in->ref(), out->ref(), 0x3c, {}};
    auto f1 = slot->batch().append(testing::kXorCopy, std::as_bytes(std::span(&a, 1)), 0);
    wire::HeapRef ref = out->ref();
    auto f2 = slot->batch().append(testing::kHeapChecksum, std::as_bytes(std::span(&ref, 1)), 8);
    if (slot->flush() != wire::ChannelStatus::kOk || slot->result(*f1).status != 0 || slot->result(*f2).status != 0) {
      std::fprintf(stderr, "guest: heap batch failed\n");
      return 7;
    }
    for (uint64_t i = 0; i < n; ++i)
      if (out->data[i] != (std::byte(i * 7 + 1) ^ std::byte{0x3c})) {
        std::fprintf(stderr, "guest: heap byte %llu differs\n", (unsigned long long)i);
        return 8;
      }
    uint64_t sum;
    std::memcpy(&sum, slot->result(*f2).reply.data(), 8);
    if (sum != testing::fnv1a(out->data, n)) return 9;
    std::printf("VMRPC-GUEST-OK slot %u\n", slot->index());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "guest: %s\n", e.what());
    return 10;
  }
  return 0;
}
