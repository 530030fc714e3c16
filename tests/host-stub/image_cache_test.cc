// The module image cache (host-stub/src/image_cache.h, module.cc ModuleLoadCached): an image
// crosses once per VM; a hit loads from the host's copy and is charged as a load; keys are
// the hashes the host computes (a guest's claim poisons nothing); other VMs miss unless they
// share the host scope; the cap and the per-VM bound evict least recently used files, and a
// module loaded from an evicted file keeps working; a suspend saves the image itself and a
// resume takes it from the cache; hostile sizes and hashes are refused or miss.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include "host-stub/slot_control.h"
#include "host-stub/stub_fixture.h"
#include "image_cache.h"
#include "vm_ledger.h"

namespace vmcuda::host::test {
namespace {

namespace cc = client_control;
using namespace slot_control;
using namespace std::chrono_literals;

constexpr int32_t kInvalidValue = 1;
constexpr uint64_t kPad = 64;        // module.cc kImagePad
constexpr uint64_t kHeader = 4096;   // image_cache.cc: a file's header page

struct TempDir {
  std::string path;
  TempDir() {
    char t[] = "/tmp/vmcuda-image-cache-XXXXXX";
    path = ::mkdtemp(t);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

std::shared_ptr<ImageCache> open_cache(const std::string& dir, const std::string& vm, uint64_t cap,
                                       uint64_t vm_bound = ~0ull) {
  std::string why;
  auto c = ImageCache::open({dir, vm, cap, vm_bound}, &why);
  EXPECT_TRUE(c) << why;
  return c;
}

// A fake module image (the executor loads any that starts with its magic) of `bytes` bytes,
// made distinct by `fill`.
std::string image(size_t bytes, char fill = ' ') {
  std::string s = std::string(tst::kFakeModuleMagic) + "\n";
  s.resize(bytes, fill);
  return s;
}
std::span<const std::byte> bytes_of(const std::string& s) { return std::as_bytes(std::span(s)); }
Sha256 hash_of(const std::string& s) { return sha256(bytes_of(s)); }

api::ModuleLoadCachedArgs cached_args(const Sha256& h, uint64_t bytes) {
  api::ModuleLoadCachedArgs a{};
  std::memcpy(a.sha256, h.data(), h.size());
  a.bytes = bytes;
  return a;
}

// ModuleLoadCached of `text`'s hash: the status; *hit and *handle from the reply.
int32_t ask(Client& c, const Sha256& h, uint64_t bytes, bool* hit, uint64_t* handle = nullptr) {
  api::ModuleLoadCachedReply r{};
  const int32_t st = c.call<api::Call::ModuleLoadCached>(cached_args(h, bytes), &r);
  *hit = r.hit != 0;
  if (handle) *handle = r.handle;
  return st;
}

// ModuleLoad of `text` (its bytes cross); the status and the handle.
int32_t send(Client& c, const std::string& text, uint64_t* handle = nullptr) {
  auto block = c.slot->heap().allocate(text.size());
  EXPECT_TRUE(block);
  if (!block) return -1;
  std::memcpy(block->data, text.data(), text.size());
  api::HandleReply r{};
  const int32_t st = c.call<api::Call::ModuleLoad>({block->ref()}, &r);
  c.slot->heap().free(block->offset);
  if (handle) *handle = r.handle;
  return st;
}

// What the guest library does (guest-lib/src/module_image.cc): ask, send on a miss.
struct Loaded {
  int32_t status = 0;
  bool crossed = false;
  uint64_t handle = 0;
};
Loaded load(Client& c, const std::string& text) {
  Loaded l;
  bool hit = false;
  l.status = ask(c, hash_of(text), text.size(), &hit, &l.handle);
  if (l.status != 0 || hit) return l;
  l.crossed = true;
  l.status = send(c, text, &l.handle);
  return l;
}

// The module works: its add_one kernel runs.
void expect_runs(Client& c, uint64_t module) {
  const std::string name = tst::kAddOneKernel;
  api::GetFunctionReply fn{};
  std::vector<std::byte> params;
  ASSERT_EQ(c.call<api::Call::ModuleGetFunction>({module, uint32_t(name.size()), 0}, &fn,
                                                  std::as_bytes(std::span(name)), &params, 1024),
            0);
  const uint64_t p = c.malloc(64);
  c.put(p, std::vector<int>(16, 1));
  EXPECT_EQ(c.launch(fn.function, p, 16, 0), 0);
  EXPECT_EQ(c.get(p, 16), std::vector<int>(16, 2));
}

TEST(ImageCache, TheSecondClientOfAVmLoadsWithoutTheImageCrossing) {
  TempDir dir;
  StubLimits limits;
  limits.ledger = VmLedger::create(64ull << 20);
  limits.image_cache = open_cache(dir.path, "vm1", 64ull << 20);
  // Two stubs with one cache directory: as two worker processes of one VM.
  StubLimits other_limits = limits;
  other_limits.image_cache = open_cache(dir.path, "vm1", 64ull << 20);
  Stub stub(limits), other_stub(other_limits);
  Client a(stub), b(other_stub);
  const std::string text = image(100000);
  const Loaded first = load(a, text);
  ASSERT_EQ(first.status, 0);
  EXPECT_TRUE(first.crossed);
  const uint64_t charged_once = limits.ledger->used();
  const Loaded second = load(b, text);
  ASSERT_EQ(second.status, 0);
  EXPECT_FALSE(second.crossed);  // no image bytes crossed
  expect_runs(b, second.handle);
  expect_runs(a, first.handle);
  // Charged to the VM as a load all the same (module.cc load_module_charged).
  EXPECT_GE(limits.ledger->used(), 2 * (text.size() + kPad));
  EXPECT_GE(limits.ledger->used() - charged_once, text.size() + kPad);
  EXPECT_EQ(cc::Reply(control(other_stub, cc::Op::kStatus)).status.module_bytes, text.size() + kPad);
  const ImageCacheStats s = limits.image_cache->stats();
  EXPECT_EQ(s.entries, 1u);
  EXPECT_EQ(s.bytes, kHeader + text.size() + kPad);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.stored, 1u);
  // One file, 0600, named by the hash.
  struct stat st{};
  ASSERT_EQ(::stat((dir.path + "/" + hex(hash_of(text))).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(ImageCache, AnotherVmMissesByDefaultAndHitsOnlyInTheHostScope) {
  TempDir vm1_dir, vm2_dir, host_dir;
  const std::string text = image(5000);
  {
    StubLimits l1, l2;
    l1.image_cache = open_cache(vm1_dir.path, "vm1", 1 << 20);
    l2.image_cache = open_cache(vm2_dir.path, "vm2", 1 << 20);  // its own directory (ImageCache::default_dir)
    Stub s1(l1), s2(l2);
    Client c1(s1), c2(s2);
    ASSERT_TRUE(load(c1, text).crossed);
    EXPECT_TRUE(load(c2, text).crossed);
  }
  EXPECT_NE(ImageCache::default_dir("/run/vmcuda", "vm1", ImageCache::Scope::kVm),
            ImageCache::default_dir("/run/vmcuda", "vm2", ImageCache::Scope::kVm));
  EXPECT_EQ(ImageCache::default_dir("/run/vmcuda", "vm1", ImageCache::Scope::kHost),
            ImageCache::default_dir("/run/vmcuda", "vm2", ImageCache::Scope::kHost));
  StubLimits l1, l2;
  l1.image_cache = open_cache(host_dir.path, "vm1", 1 << 20);
  l2.image_cache = open_cache(host_dir.path, "vm2", 1 << 20);
  Stub s1(l1), s2(l2);
  Client c1(s1), c2(s2);
  ASSERT_TRUE(load(c1, text).crossed);
  const Loaded l = load(c2, text);
  ASSERT_EQ(l.status, 0);
  EXPECT_FALSE(l.crossed);
  expect_runs(c2, l.handle);
  EXPECT_EQ(l2.image_cache->stats().vm_entries, 0u);  // vm1 added it
}

TEST(ImageCache, AGuestsClaimedHashPoisonsNothing) {
  TempDir dir;
  StubLimits limits;
  limits.image_cache = open_cache(dir.path, "vm1", 1 << 20);
  Stub stub(limits), other_stub(limits);
  Client attacker(stub), victim(other_stub);
  const std::string wanted = image(3000, 'a'), evil = image(3000, 'e');
  // The attacker names `wanted`'s hash (a miss), then sends other bytes.
  bool hit = true;
  ASSERT_EQ(ask(attacker, hash_of(wanted), wanted.size(), &hit), 0);
  EXPECT_FALSE(hit);
  uint64_t h = 0;
  ASSERT_EQ(send(attacker, evil, &h), 0);
  // They are stored under their own hash: the victim asking for `wanted` misses, sends it,
  // and its module is made of its own bytes.
  EXPECT_TRUE(std::filesystem::exists(dir.path + "/" + hex(hash_of(evil))));
  EXPECT_FALSE(std::filesystem::exists(dir.path + "/" + hex(hash_of(wanted))));
  const Loaded v = load(victim, wanted);
  ASSERT_EQ(v.status, 0);
  EXPECT_TRUE(v.crossed);
  // And the file under `wanted`'s name holds `wanted`.
  auto mapped = limits.image_cache->find(hash_of(wanted), wanted.size());
  ASSERT_TRUE(mapped);
  EXPECT_EQ(std::memcmp(mapped->data(), wanted.data(), wanted.size()), 0);
}

TEST(ImageCache, HostileArgumentsAreRefusedOrMiss) {
  TempDir dir;
  StubLimits limits;
  limits.max_module_bytes = 1 << 20;
  limits.image_cache = open_cache(dir.path, "vm1", 4 << 20);
  Stub stub(limits);
  Client c(stub);
  const std::string text = image(2000);
  ASSERT_TRUE(load(c, text).crossed);
  bool hit = true;
  // No size, a size beyond any image the stub takes, the right hash with another size.
  EXPECT_EQ(ask(c, hash_of(text), 0, &hit), kInvalidValue);
  EXPECT_EQ(ask(c, hash_of(text), ~0ull, &hit), kInvalidValue);
  EXPECT_EQ(ask(c, hash_of(text), (1 << 20) + 1, &hit), kInvalidValue);
  ASSERT_EQ(ask(c, hash_of(text), text.size() - 1, &hit), 0);
  EXPECT_FALSE(hit);
  ASSERT_EQ(ask(c, hash_of(text), text.size() + 1, &hit), 0);
  EXPECT_FALSE(hit);
  // A hash nobody stored.
  Sha256 unknown{};
  unknown.fill(0x5a);
  ASSERT_EQ(ask(c, unknown, 100, &hit), 0);
  EXPECT_FALSE(hit);
  // A file cut short (a full disk, a crash of another version) is a miss, never a crash.
  const std::string name = dir.path + "/" + hex(hash_of(text));
  ASSERT_EQ(::truncate(name.c_str(), kHeader + 100), 0);
  ASSERT_EQ(ask(c, hash_of(text), text.size(), &hit), 0);
  EXPECT_FALSE(hit);
  // A bad image is not stored (only what the driver loaded is).
  const std::string junk(3000, 'j');
  EXPECT_NE(send(c, junk), 0);
  EXPECT_FALSE(std::filesystem::exists(dir.path + "/" + hex(hash_of(junk))));
  // The stub serves on.
  const Loaded l = load(c, image(2500));
  ASSERT_EQ(l.status, 0);
  expect_runs(c, l.handle);
}

TEST(ImageCache, TheCapAndTheVmBoundEvictLeastRecentlyUsed) {
  TempDir dir;
  constexpr size_t kImage = 10000;
  constexpr uint64_t kFile = kHeader + kImage + kPad;
  // A shared directory of 4 files; vm1 may add 2 of them.
  auto vm1 = open_cache(dir.path, "vm1", 4 * kFile, 2 * kFile);
  auto vm2 = open_cache(dir.path, "vm2", 4 * kFile, 4 * kFile);
  StubLimits l1, l2;
  l1.image_cache = vm1;
  l2.image_cache = vm2;
  Stub s1(l1), s2(l2);
  Client c1(s1), c2(s2);
  std::vector<std::string> imgs;
  for (char f = 'a'; f <= 'g'; ++f) imgs.push_back(image(kImage, f));
  auto present = [&](const std::string& t) { return std::filesystem::exists(dir.path + "/" + hex(hash_of(t))); };
  // vm2 adds two; vm1 adds three: its own oldest goes (its bound), not vm2's.
  ASSERT_EQ(load(c2, imgs[0]).status, 0);
  ASSERT_EQ(load(c2, imgs[1]).status, 0);
  const Loaded kept = load(c1, imgs[2]);
  ASSERT_EQ(kept.status, 0);
  std::this_thread::sleep_for(10ms);  // mtimes apart
  ASSERT_EQ(load(c1, imgs[3]).status, 0);
  std::this_thread::sleep_for(10ms);
  ASSERT_EQ(load(c1, imgs[4]).status, 0);
  EXPECT_TRUE(present(imgs[0]) && present(imgs[1]));
  EXPECT_FALSE(present(imgs[2]));
  EXPECT_TRUE(present(imgs[3]) && present(imgs[4]));
  EXPECT_EQ(vm1->stats().vm_entries, 2u);
  // A module loaded from an evicted file works on (its mapping stays).
  expect_runs(c1, kept.handle);
  // The cap: vm2 uses imgs[0] again (a hit makes it recent), then adds one: the least
  // recently used of all (imgs[1]) goes.
  std::this_thread::sleep_for(10ms);
  EXPECT_FALSE(load(c2, imgs[0]).crossed);
  std::this_thread::sleep_for(10ms);
  ASSERT_EQ(load(c2, imgs[5]).status, 0);
  EXPECT_TRUE(present(imgs[0]));
  EXPECT_FALSE(present(imgs[1]));
  const ImageCacheStats s = vm2->stats();
  EXPECT_EQ(s.entries, 4u);
  EXPECT_LE(s.bytes, 4 * kFile);
  EXPECT_EQ(s.evicted, 2u);
  // An image larger than the VM's bound is not stored, and loads all the same.
  auto small = open_cache(dir.path, "vm3", 4 * kFile, kFile / 2);
  StubLimits l3;
  l3.image_cache = small;
  Stub s3(l3);
  Client c3(s3);
  const Loaded big = load(c3, imgs[6]);
  ASSERT_EQ(big.status, 0);
  EXPECT_FALSE(present(imgs[6]));
  expect_runs(c3, big.handle);
}

TEST(ImageCache, ASuspendSavesTheImageAndAResumeTakesItFromTheCache) {
  TempDir dir;
  StubLimits limits;
  limits.image_cache = open_cache(dir.path, "vm1", 1 << 20);
  Stub stub(limits), other_stub(limits);
  Client c(stub), other(other_stub);
  const std::string text = image(20000);
  ASSERT_TRUE(load(other, text).crossed);
  const Loaded l = load(c, text);
  ASSERT_EQ(l.status, 0);
  ASSERT_FALSE(l.crossed);
  ASSERT_TRUE(hold(stub));
  cc::Reply r = control(stub, cc::Op::kSuspend);
  ASSERT_TRUE(r.ok) << r.error;
  // The state holds the image itself (restorable on a stub without this cache).
  EXPECT_GE(r.state_bytes, text.size());
  r = control(stub, cc::Op::kResume);
  ASSERT_TRUE(r.ok) << r.error;
  release(stub);
  expect_runs(c, l.handle);
  EXPECT_EQ(limits.image_cache->stats().stored, 1u);  // found again, not stored twice
  EXPECT_EQ(r.status.module_bytes, text.size() + kPad);
  // Evicted meanwhile (or another stub's cache): the resume stores it again from the state.
  ASSERT_TRUE(hold(stub));
  r = control(stub, cc::Op::kSuspend);
  ASSERT_TRUE(r.ok) << r.error;
  std::filesystem::remove(dir.path + "/" + hex(hash_of(text)));
  r = control(stub, cc::Op::kResume);
  ASSERT_TRUE(r.ok) << r.error;
  release(stub);
  expect_runs(c, l.handle);
  EXPECT_TRUE(std::filesystem::exists(dir.path + "/" + hex(hash_of(text))));
}

TEST(ImageCache, ADirectoryOthersMayWriteIsRefused) {
  TempDir dir;
  ASSERT_EQ(::chmod(dir.path.c_str(), 0777), 0);
  std::string why;
  EXPECT_FALSE(ImageCache::open({dir.path, "vm1", 1 << 20, 1 << 20}, &why));
  EXPECT_NE(why.find("others may write"), std::string::npos) << why;
  // Made by the stub: 0700.
  const std::string sub = dir.path + "/cache";
  ASSERT_TRUE(ImageCache::open({sub, "vm1", 1 << 20, 1 << 20}, &why)) << why;
  struct stat st{};
  ASSERT_EQ(::stat(sub.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST(ImageCache, WithoutACacheEveryLoadIsAMiss) {
  Stub stub;
  Client c(stub);
  const std::string text = image(1000);
  EXPECT_TRUE(load(c, text).crossed);
  const Loaded l = load(c, text);
  EXPECT_TRUE(l.crossed);
  ASSERT_EQ(l.status, 0);
  expect_runs(c, l.handle);
}

}  // namespace
}  // namespace vmcuda::host::test
