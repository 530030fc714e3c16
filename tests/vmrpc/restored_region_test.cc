// A connection's region replaced by a saved image (what QEMU does on a VM restore or a
// snapshot revert with master=on), in one process: the host notices the image token change,
// lists the clients that were mid-session in the image, and either serves them again (held
// first, so their state can be brought back) or fails their calls with kStateLost. Slots
// claimed after the image, and free ones, stay ordinary.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "support/temp_socket.h"
#include "support/test_service.h"
#include "vmrpc/client.h"
#include "vmrpc/host_endpoint.h"
#include "vmrpc/ordering.h"

namespace vmrpc {
namespace {

using testing::TestService;
using wire::ChannelStatus;

RegionConfig small_region() { return RegionConfig{16ull << 20, 4, 64 << 10, 4096}; }

uint64_t call_index(ClientSlot& s, int32_t* status = nullptr) {
  auto r = s.call(testing::kCallIndex, {}, 8);
  if (status) *status = r.status;
  uint64_t v = ~0ull;
  if (r.status == 0 && r.bytes.size() == 8) std::memcpy(&v, r.bytes.data(), 8);
  return v;
}

// Host endpoint whose on_region_restored records what it was given and then does `decide`.
struct Restorable {
  TestService service;
  std::mutex mu;
  std::vector<RestoredRegion> seen;
  std::function<void(HostEndpoint&, const RestoredRegion&)> decide;
  HostEndpoint host;
  Restorable()
      : host(
            [this] {
              HostEndpointOptions o{testing::temp_socket_path("restore"), small_region(), 8};
              o.on_region_restored = [this](const RestoredRegion& r) {
                {
                  std::lock_guard l(mu);
                  seen.push_back(r);
                }
                if (decide) decide(host, r);
              };
              return o;
            }(),
            service) {
    host.start();
  }
  size_t seen_count() {
    std::lock_guard l(mu);
    return seen.size();
  }
  RestoredRegion seen_at(size_t i) {
    std::lock_guard l(mu);
    return seen.at(i);
  }
  bool wait_seen(size_t n) {
    for (int i = 0; i < 500 && seen_count() < n; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return seen_count() >= n;
  }
};

// The connection's id (the loop registers it right after the handshake the client saw).
uint64_t only_connection(const HostEndpoint& h) {
  for (int i = 0; i < 500; ++i) {
    if (auto ids = h.connection_ids(); ids.size() == 1) return ids[0];
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ADD_FAILURE() << "no connection";
  return 0;
}

// A save as vmcuda does one: the client held at a call boundary, the region named by a new
// token, the image taken (QEMU), then a token of its own again and the client let go.
std::vector<std::byte> save_image(const RegionView& v);
std::vector<std::byte> save_held(HostEndpoint& h, uint64_t id, uint32_t slot, const RegionView& v, uint64_t saved_token,
                                 uint64_t running_token) {
  std::string why;
  EXPECT_TRUE(h.hold_slot(id, slot, std::chrono::seconds(5), &why)) << why;
  EXPECT_TRUE(h.set_image_token(id, saved_token));
  auto image = save_image(v);
  EXPECT_TRUE(h.set_image_token(id, running_token));
  h.release_slot(id, slot);
  return image;
}

// The guest's view of the whole region, saved and put back as QEMU would.
std::vector<std::byte> save_image(const RegionView& v) {
  return {v.base(), v.base() + v.layout().region_bytes};
}
void load_image(const RegionView& v, const std::vector<std::byte>& image) {
  std::memcpy(v.base(), image.data(), image.size());
}

TEST(RestoredRegion, ClientWithoutItsStateGetsStateLostAndTheSlotComesBack) {
  Restorable r;
  r.decide = [](HostEndpoint& h, const RestoredRegion& rr) {
    for (uint32_t s : rr.slots) h.lose_restored_slot(rr.connection_id, s);
  };
  auto conn = LocalConnection::connect(r.host.socket_path());
  std::string why;
  auto slot = ClientSlot::claim(conn->region(), *conn, &why);
  ASSERT_TRUE(slot) << why;
  EXPECT_EQ(call_index(*slot), 0u);
  const std::vector<uint64_t> ids{only_connection(r.host)};
  const uint64_t before = r.host.image_token(ids[0]);
  EXPECT_NE(before, 0u);
  EXPECT_EQ(conn->region().header().image_token, before);
  // Saved (the host names the image), then running on under another token.
  const auto image = save_held(r.host, ids[0], slot->index(), conn->region(), 0x5afe, 0x7777);
  EXPECT_EQ(call_index(*slot), 1u);
  EXPECT_EQ(r.seen_count(), 0u) << "a token the host wrote itself is no restore";

  load_image(conn->region(), image);
  // QEMU loads an image while the VM is stopped: nothing is decided before the VM runs
  // (rings), when every page of the image is in place.
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_EQ(r.seen_count(), 0u) << "decided on a region that may still be loading";
  int32_t st = 0;
  call_index(*slot, &st);
  EXPECT_EQ(st, static_cast<int32_t>(ChannelStatus::kStateLost));
  ASSERT_TRUE(r.wait_seen(1)) << "the host never noticed the restored image";
  {
    std::lock_guard l(r.mu);
    EXPECT_EQ(r.seen[0].connection_id, ids[0]);
    EXPECT_EQ(r.seen[0].image_token, 0x5afeu);
    EXPECT_EQ(r.seen[0].slots, std::vector<uint32_t>{slot->index()});
  }
  call_index(*slot, &st);
  EXPECT_EQ(st, static_cast<int32_t>(ChannelStatus::kStateLost)) << "lost stays lost";
  // Released, the slot is ordinary again: a new client is served from its start.
  slot.reset();
  std::unique_ptr<ClientSlot> again;
  for (int i = 0; i < 200 && !again; ++i) {
    again = ClientSlot::claim(conn->region(), *conn, &why);
    if (!again) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(again) << why;
  EXPECT_EQ(call_index(*again), 0u);
  EXPECT_EQ(r.seen_count(), 1u);
}

TEST(RestoredRegion, AdoptedClientIsServedHeldUntilReleasedAndContinuesAfterItsLastAnswer) {
  Restorable r;
  std::atomic<bool> adopted{false}, controlled{false};
  r.decide = [&](HostEndpoint& h, const RestoredRegion& rr) {
    for (uint32_t s : rr.slots) {
      std::string why;
      if (!h.adopt_restored_slot(rr.connection_id, s, std::chrono::seconds(5), &why)) {
        ADD_FAILURE() << why;
        continue;
      }
      adopted = true;
      // Held: this is where the client's state comes back, before its next call.
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      std::vector<std::byte> reply;
      controlled = h.control_slot(rr.connection_id, s, {}, &reply, {}, &why);
      h.release_slot(rr.connection_id, s);
    }
  };
  auto conn = LocalConnection::connect(r.host.socket_path());
  std::string why;
  auto slot = ClientSlot::claim(conn->region(), *conn, &why);
  ASSERT_TRUE(slot) << why;
  EXPECT_EQ(call_index(*slot), 0u);
  const uint64_t id = only_connection(r.host);
  const auto image = save_held(r.host, id, slot->index(), conn->region(), 0xabc, 0xdef);
  EXPECT_EQ(call_index(*slot), 1u);
  load_image(conn->region(), image);
  // The next call is served by a new service (its index starts at 0), and only once the
  // decision released it.
  EXPECT_EQ(call_index(*slot), 0u);
  EXPECT_EQ(r.seen_count(), 1u);
  EXPECT_TRUE(adopted);
  EXPECT_TRUE(controlled);
  EXPECT_EQ(call_index(*slot), 1u);
  EXPECT_EQ(r.service.counters.opened.load(), 2u);
  EXPECT_EQ(r.service.counters.closed.load(), 1u) << "the service of the replaced image was closed";
}

TEST(RestoredRegion, SlotsClaimedAfterTheImageOrFreeInItAreNotRestored) {
  Restorable r;
  r.decide = [](HostEndpoint& h, const RestoredRegion& rr) {
    for (uint32_t s : rr.slots) h.lose_restored_slot(rr.connection_id, s);
  };
  auto conn = LocalConnection::connect(r.host.socket_path());
  const uint64_t id = only_connection(r.host);
  ASSERT_TRUE(r.host.set_image_token(id, 0x1));
  const auto image = save_image(conn->region());  // no client at all
  ASSERT_TRUE(r.host.set_image_token(id, 0x2));
  load_image(conn->region(), image);
  std::string why;
  auto slot = ClientSlot::claim(conn->region(), *conn, &why);
  ASSERT_TRUE(slot) << why;
  EXPECT_EQ(call_index(*slot), 0u);
  EXPECT_EQ(call_index(*slot), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // Told once, with no slot to decide (the stub gives the region a token of its own).
  ASSERT_TRUE(r.wait_seen(1));
  EXPECT_TRUE(r.seen_at(0).slots.empty()) << "an image with no client mid-session has no slot to decide";
}

// Without on_region_restored every restored client is lost, with a clear status.
TEST(RestoredRegion, WithoutARestorerEveryRestoredClientIsLost) {
  TestService service;
  HostEndpoint host(HostEndpointOptions{testing::temp_socket_path("norestore"), small_region(), 8}, service);
  host.start();
  auto conn = LocalConnection::connect(host.socket_path());
  std::string why;
  auto slot = ClientSlot::claim(conn->region(), *conn, &why);
  ASSERT_TRUE(slot) << why;
  EXPECT_EQ(call_index(*slot), 0u);
  const uint64_t id = only_connection(host);
  const auto image = save_held(host, id, slot->index(), conn->region(), 0x10, 0x20);
  load_image(conn->region(), image);
  int32_t st = 0;
  for (int i = 0; i < 100; ++i) {
    call_index(*slot, &st);
    if (st == static_cast<int32_t>(ChannelStatus::kStateLost)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(st, static_cast<int32_t>(ChannelStatus::kStateLost));
}

}  // namespace
}  // namespace vmrpc
