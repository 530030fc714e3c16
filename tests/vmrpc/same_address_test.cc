// Same-address mapping of the region (RegionHeader::host_map_address): the host endpoint
// says where the process that serves a slot maps the region; a guest that can map it at
// the same address shares heap pointers with that process.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstring>

#include "support/temp_socket.h"
#include "support/test_service.h"
#include "vmrpc/client.h"
#include "vmrpc/fd.h"
#include "vmrpc/knobs.h"
#include "vmrpc/worker.h"

namespace vmrpc {
namespace {

RegionConfig small_region() { return RegionConfig{16ull << 20, 4, 64 << 10, 4096}; }

// Where the serving process sees `b` (TestService's kHeapAddress).
uint64_t host_address(ClientSlot& slot, const HeapBlock& b) {
  const wire::HeapRef ref = b.ref();
  auto r = slot.call(testing::kHeapAddress, std::as_bytes(std::span(&ref, 1)), 8);
  EXPECT_EQ(r.status, 0);
  uint64_t v = 0;
  if (r.bytes.size() == 8) std::memcpy(&v, r.bytes.data(), 8);
  return v;
}

TEST(SameAddress, HeaderCarriesTheHostAddress) {
  std::string why;
  auto l = Layout::plan(small_region(), &why);
  ASSERT_TRUE(l) << why;
  EXPECT_EQ(l->host_map_address, 0u);  // per connection: plan() does not know it
  l->host_map_address = 0x600000000000ull;
  wire::RegionHeader h{};
  l->write_header(h, 7);
  EXPECT_EQ(h.host_map_address, 0x600000000000ull);
  auto g = Layout::from_header(h, 16ull << 20, &why);
  ASSERT_TRUE(g) << why;
  EXPECT_EQ(g->host_map_address, 0x600000000000ull);
  h.host_map_address = 0x600000000123ull;  // not page aligned: ignored, not trusted
  g = Layout::from_header(h, 16ull << 20, &why);
  ASSERT_TRUE(g) << why;
  EXPECT_EQ(g->host_map_address, 0u);
}

TEST(SameAddress, MapsAtTheHostAddressOnlyWhenFree) {
  UniqueFd fd(::memfd_create("same-address-test", MFD_CLOEXEC));
  ASSERT_TRUE(fd);
  ASSERT_EQ(::ftruncate(fd.get(), 16 << 20), 0);
  std::string why;
  auto l = Layout::plan(small_region(), &why);
  ASSERT_TRUE(l) << why;
  // A free address (found by mapping and unmapping), then one that is taken.
  Mapping probe = Mapping::map_shared(fd.get(), 16 << 20, "probe");
  const uint64_t free_at = reinterpret_cast<uint64_t>(probe.data());
  probe.reset();
  l->host_map_address = free_at;
  Mapping m = Mapping::map_shared(fd.get(), 16 << 20, "first");
  ASSERT_TRUE(map_at_host_address(fd.get(), 0, *l, m, &why)) << why;
  EXPECT_EQ(reinterpret_cast<uint64_t>(m.data()), free_at);
  EXPECT_TRUE(RegionView(m.data(), *l).same_address());

  Mapping other = Mapping::map_shared(fd.get(), 16 << 20, "other");  // m's address is taken now
  ASSERT_NE(other.data(), m.data());
  std::byte* before = other.data();
  EXPECT_FALSE(map_at_host_address(fd.get(), 0, *l, other, &why));
  EXPECT_NE(why.find("not free"), std::string::npos) << why;
  EXPECT_EQ(other.data(), before);  // the first mapping is kept
  EXPECT_FALSE(RegionView(other.data(), *l).same_address());
  l->host_map_address = 0;
  EXPECT_FALSE(map_at_host_address(fd.get(), 0, *l, other, &why));
  EXPECT_FALSE(RegionView(other.data(), *l).same_address());
}

// Thread mode: the endpoint serves the region at its own mapping. This test's client is
// the endpoint's own process, where that address is taken: it keeps another mapping and
// knows it (a client in another process gets the same address: two_process tests).
TEST(SameAddress, ThreadModeAnnouncesTheEndpointsMapping) {
  testing::TestService service;
  HostEndpoint host(HostEndpointOptions{testing::temp_socket_path("same"), small_region(), 8}, service);
  host.start();
  auto conn = LocalConnection::connect(host.socket_path());
  const uint64_t announced = conn->region().layout().host_map_address;
  EXPECT_NE(announced, 0u);
  EXPECT_NE(reinterpret_cast<uint64_t>(conn->region().base()), announced);
  EXPECT_FALSE(conn->region().same_address());
  std::string why;
  auto slot = ClientSlot::claim(conn->region(), *conn, &why);
  ASSERT_TRUE(slot) << why;
  auto b = slot->heap().allocate(4096);
  ASSERT_TRUE(b);
  const uint64_t seen = host_address(*slot, *b);
  EXPECT_EQ(seen, announced + conn->region().layout().heap_offset + b->offset);
  // A second connection gets a region of its own, at an address of its own.
  auto conn2 = LocalConnection::connect(host.socket_path());
  EXPECT_NE(conn2->region().layout().host_map_address, announced);
}

HostEndpointOptions worker_options(uint64_t map_address) {
  HostEndpointOptions o{testing::temp_socket_path("same-worker"), small_region(), 8,
                        [](const WorkerSpec& spec) { return spawn_worker_process(VMRPC_TEST_WORKER, {}, spec); }};
  o.worker_map_address = map_address;
  return o;
}

// Worker mode: every worker maps its region at the fixed address first; a client (here a
// process other than the worker) maps it there too, and a heap pointer means the same
// bytes on both sides.
TEST(SameAddress, WorkerServesAtTheFixedAddressTheClientShares) {
  testing::TestService unused;
  // Next to the configured worker address (the sanitizer builds move it out of their own
  // memory: Makefile), not at it, so it is not what the endpoint would use anyway.
  const uint64_t kAt = static_cast<uint64_t>(knobs::kWorkerMapAddress.get()) + (64ull << 30);
  HostEndpoint host(worker_options(kAt), unused);
  host.start();
  auto conn = LocalConnection::connect(host.socket_path());
  EXPECT_EQ(conn->region().layout().host_map_address, kAt);
  EXPECT_EQ(reinterpret_cast<uint64_t>(conn->region().base()), kAt);
  EXPECT_TRUE(conn->region().same_address());
  std::string why;
  auto slot = ClientSlot::claim(conn->region(), *conn, &why);
  ASSERT_TRUE(slot) << why;
  auto b = slot->heap().allocate(8192);
  ASSERT_TRUE(b);
  EXPECT_EQ(host_address(*slot, *b), reinterpret_cast<uint64_t>(b->data));
  // The same region still works through the shared bytes.
  std::memset(b->data, 0x5a, 8192);
  const wire::HeapRef ref = b->ref();
  auto r = slot->call(testing::kHeapChecksum, std::as_bytes(std::span(&ref, 1)), 8);
  ASSERT_EQ(r.status, 0);
  uint64_t sum;
  std::memcpy(&sum, r.bytes.data(), 8);
  EXPECT_EQ(sum, testing::fnv1a(b->data, 8192));
}

// A worker that cannot map the region at the announced address must not serve it (the
// client would take its pointers for the worker's): the slot fails, nothing is served.
TEST(SameAddress, WorkerRefusesWhenTheAddressCannotBeMapped) {
#if defined(__SANITIZE_THREAD__)
  // TSan's runtime aborts the process on any fixed mapping outside its application ranges,
  // which is what this test asks for (the other builds run it).
  GTEST_SKIP() << "a fixed mapping outside TSan's application memory aborts under TSan";
#endif
  testing::TestService unused;
  HostEndpoint host(worker_options(0xfff0000000000000ull), unused);  // never user space
  host.start();
  auto conn = LocalConnection::connect(host.socket_path());
  EXPECT_FALSE(conn->region().same_address());
  std::string why;
  auto slot = ClientSlot::claim(conn->region(), *conn, &why);
  EXPECT_FALSE(slot);
  EXPECT_NE(why.find("did not accept"), std::string::npos) << why;
}

// VMRPC_WORKER_MAP_ADDRESS=0: workers map anywhere and announce nothing.
TEST(SameAddress, WorkerWithoutFixedAddressAnnouncesNone) {
  testing::TestService unused;
  HostEndpoint host(worker_options(0), unused);
  host.start();
  auto conn = LocalConnection::connect(host.socket_path());
  EXPECT_EQ(conn->region().layout().host_map_address, 0u);
  EXPECT_FALSE(conn->region().same_address());
  std::string why;
  auto slot = ClientSlot::claim(conn->region(), *conn, &why);
  ASSERT_TRUE(slot) << why;
  auto b = slot->heap().allocate(4096);
  ASSERT_TRUE(b);
  EXPECT_NE(host_address(*slot, *b), 0u);
}

}  // namespace
}  // namespace vmrpc
