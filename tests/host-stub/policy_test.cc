// The per-VM policy file (host-stub/src/policy.h): precedence, profiles, sizes, and errors
// that name the file and the key; and placement's option forms (placement.h).
#include <unistd.h>

#include <fstream>
#include <gtest/gtest.h>

#include "placement.h"
#include "policy.h"

namespace vmcuda::host {
namespace {

struct PolicyFile {
  std::string path;
  explicit PolicyFile(const std::string& text) {
    char tmpl[] = "/tmp/vmcuda-policy-XXXXXX";
    const int fd = ::mkstemp(tmpl);
    ::close(fd);
    path = tmpl;
    std::ofstream(path) << text;
  }
  ~PolicyFile() { ::unlink(path.c_str()); }
};

constexpr uint64_t kGiB = 1ull << 30;

TEST(Policy, DefaultsThenProfileThenTheVm) {
  PolicyFile f(R"(
[defaults]
profile = "quarter"
isolation = "process"
[profiles.quarter]
memory_fraction = 0.25
weight = 1
[profiles.half]
memory = "40G"
weight = 2
[vm.big]
profile = "half"
weight = 3
devices = [0, 1]
[vm.thready]
isolation = "thread"
devices = "auto:2"
)");
  std::string why;
  auto big = load_policy(f.path, "big", true, &why);
  ASSERT_TRUE(big) << why;
  EXPECT_EQ(big->profile, "half");
  EXPECT_EQ(big->memory_bytes, 40 * kGiB);
  EXPECT_FALSE(big->memory_fraction);
  EXPECT_EQ(big->weight, 3u);  // its own over its profile's
  EXPECT_EQ(big->devices, "0,1");
  EXPECT_EQ(big->isolation, "process");  // from [defaults]
  auto other = load_policy(f.path, "other", true, &why);
  ASSERT_TRUE(other) << why;
  EXPECT_EQ(other->profile, "quarter");
  EXPECT_EQ(other->memory_fraction, 0.25);
  EXPECT_FALSE(other->memory_bytes);
  EXPECT_EQ(other->weight, 1u);
  EXPECT_FALSE(other->devices);
  auto t = load_policy(f.path, "thready", true, &why);
  ASSERT_TRUE(t) << why;
  EXPECT_EQ(t->isolation, "thread");
  EXPECT_EQ(t->devices, "auto:2");
}

// Finding 10.6: the limit of programs served at once is a policy key too (--max-clients wins).
TEST(Policy, MaxClientsIsAKeyAndChecked) {
  PolicyFile f(R"(
[defaults]
max_clients = 8
[vm.wide]
max_clients = 0
)");
  std::string why;
  auto d = load_policy(f.path, "any", true, &why);
  ASSERT_TRUE(d) << why;
  EXPECT_EQ(d->max_clients, 8u);
  auto w = load_policy(f.path, "wide", true, &why);
  ASSERT_TRUE(w) << why;
  EXPECT_EQ(w->max_clients, 0u);
  PolicyFile bad("[defaults]\nmax_clients = -1\n");
  EXPECT_FALSE(load_policy(bad.path, "any", true, &why));
  EXPECT_NE(why.find("max_clients"), std::string::npos) << why;
}

// The VM's host memory bound (pinned memory, worker processes) is a policy key too
// (--host-memory-quota-mib wins).
TEST(Policy, HostMemoryIsAKeyAndChecked) {
  PolicyFile f(R"(
[defaults]
host_memory = "16G"
[vm.small]
host_memory = 536870912
)");
  std::string why;
  auto d = load_policy(f.path, "any", true, &why);
  ASSERT_TRUE(d) << why;
  EXPECT_EQ(d->host_memory_bytes, 16ull << 30);
  auto s = load_policy(f.path, "small", true, &why);
  ASSERT_TRUE(s) << why;
  EXPECT_EQ(s->host_memory_bytes, 512ull << 20);
  PolicyFile bad("[defaults]\nhost_memory = \"lots\"\n");
  EXPECT_FALSE(load_policy(bad.path, "any", true, &why));
  EXPECT_NE(why.find("host_memory"), std::string::npos) << why;
}

// How the VM's programs share a GPU (--gpu-sharing): time slices or MPS.
TEST(Policy, GpuSharingIsAKeyAndChecked) {
  PolicyFile f(R"(
[defaults]
gpu_sharing = "time"
[vm.batch]
gpu_sharing = "mps"
)");
  std::string why;
  auto d = load_policy(f.path, "any", true, &why);
  ASSERT_TRUE(d) << why;
  EXPECT_EQ(d->gpu_sharing, "time");
  auto b = load_policy(f.path, "batch", true, &why);
  ASSERT_TRUE(b) << why;
  EXPECT_EQ(b->gpu_sharing, "mps");
  PolicyFile bad("[defaults]\ngpu_sharing = \"spatial\"\n");
  EXPECT_FALSE(load_policy(bad.path, "any", true, &why));
  EXPECT_NE(why.find("gpu_sharing"), std::string::npos) << why;
}

TEST(Policy, TheShippedExampleReads) {
  std::string why;
  auto p = load_policy(VMCUDA_POLICY_EXAMPLE, "web1", true, &why);
  ASSERT_TRUE(p) << why;
  EXPECT_EQ(p->profile, "whole-gpu");
  EXPECT_EQ(p->memory_fraction, 1.0);
  EXPECT_EQ(p->isolation, "process");
}

TEST(Policy, AMissingFileIsNoPolicyUnlessNamed) {
  std::string why;
  EXPECT_FALSE(load_policy("/nonexistent/policy.toml", "vm", false, &why));
  EXPECT_TRUE(why.empty());
  EXPECT_FALSE(load_policy("/nonexistent/policy.toml", "vm", true, &why));
  EXPECT_NE(why.find("does not exist"), std::string::npos) << why;
}

TEST(Policy, MistakesAreErrorsThatSayWhere) {
  const std::pair<const char*, const char*> cases[] = {
      {"[vm.a]\nmemroy = \"1G\"\n", "unknown key vm.a.memroy (line 2)"},
      {"[vm.a]\nprofile = \"nope\"\n", "profile \"nope\" is not defined"},
      {"[vm.a]\nmemory = \"lots\"\n", "vm.a.memory (line 2) must be a size"},
      {"[vm.a]\nmemory_fraction = 1.5\n", "must be a fraction"},
      {"[vm.a]\nweight = 0\n", "from 1 to 1000"},
      {"[vm.a]\nisolation = \"none\"\n", "\"process\" or \"thread\""},
      {"[vm.a]\ndevices = [-1]\n", "must list GPU indexes"},
      {"[profiles.p]\nprofile = \"q\"\n[vm.a]\nprofile = \"p\"\n", "cannot name another profile"},
      {"[vms.a]\n", "unknown table vms"},
      {"[vm.a\n", ":1: "},
  };
  for (const auto& [text, want] : cases) {
    PolicyFile f(text);
    std::string why;
    EXPECT_FALSE(load_policy(f.path, "a", true, &why)) << text;
    EXPECT_NE(why.find(want), std::string::npos) << "for:\n" << text << "got: " << why;
    EXPECT_NE(why.find(f.path), std::string::npos) << why;
  }
}

TEST(Policy, Sizes) {
  EXPECT_EQ(parse_size("4096"), 4096u);
  EXPECT_EQ(parse_size("512M"), 512ull << 20);
  EXPECT_EQ(parse_size("20G"), 20 * kGiB);
  EXPECT_EQ(parse_size("20GiB"), 20 * kGiB);
  EXPECT_EQ(parse_size("1T"), 1ull << 40);
  EXPECT_FALSE(parse_size(""));
  EXPECT_FALSE(parse_size("G"));
  EXPECT_FALSE(parse_size("12X"));
  EXPECT_FALSE(parse_size("99999999999999999999"));
  EXPECT_FALSE(parse_size("99999999999T"));
}

TEST(Placement, OptionForms) {
  std::string why;
  auto a = parse_placement("auto", &why);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->auto_count, 1);
  auto b = parse_placement("auto:2", &why);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->auto_count, 2);
  auto c = parse_placement("1,0", &why);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->devices, (std::vector<int>{1, 0}));
  EXPECT_FALSE(parse_placement("auto:0", &why));
  EXPECT_FALSE(parse_placement("0,,1", &why));
  EXPECT_FALSE(parse_placement("-1", &why));
  // Workers and a re-executed stub get the VM's GPUs whatever form the first line had.
  EXPECT_EQ(with_devices({"--socket", "s", "-d", "0", "--devices=1", "-d2", "--vm", "x"}, {1, 0}),
            (std::vector<std::string>{"--socket", "s", "--vm", "x", "--devices", "1,0"}));
}

TEST(Placement, MovesKeepTheModelAndThePool) {
  Placement p("vm", {{0, "H100 (81559 MiB)"}, {1, "H100 (81559 MiB)"}, {2, "A100 (40536 MiB)"}});
  std::string why;
  ASSERT_TRUE(p.place({{0}, 0}, "", &why)) << why;
  EXPECT_TRUE(p.check_move({1}, &why)) << why;
  EXPECT_FALSE(p.check_move({2}, &why));
  EXPECT_NE(why.find("same model"), std::string::npos) << why;
  EXPECT_FALSE(p.check_move({3}, &why));
  EXPECT_FALSE(p.check_move({0, 1}, &why));
  EXPECT_FALSE(p.place({{0, 0}, 0}, "", &why));
  EXPECT_NE(why.find("twice"), std::string::npos);
}

}  // namespace
}  // namespace vmcuda::host
