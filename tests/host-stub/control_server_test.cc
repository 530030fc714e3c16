// The stub's control socket (host-stub/src/control_server.h) with fake handlers in a temporary
// directory, and the vmcudactl binary (VMCUDACTL_PATH) against it.
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "control_server.h"
#include "vmrpc/unix_socket.h"

extern char** environ;

namespace {

using nlohmann::json;
using vmcuda::host::ControlServer;
using vmcuda::host::ControlServerOptions;
using vmcuda::host::PeerCredentials;
using vmcuda::host::Progress;
using vmrpc::UniqueFd;
namespace fs = std::filesystem;

constexpr uint64_t kMiB = 1024 * 1024;

class TemporaryDirectory {
 public:
  TemporaryDirectory() {
    std::string pattern = "/tmp/vmcuda-ctl-XXXXXX";
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TemporaryDirectory() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

sockaddr_un address_of(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof address.sun_path - 1);
  return address;
}

// A test-side client: one line out, lines back, with a timeout so a bug fails instead of hanging.
class Client {
 public:
  explicit Client(const std::string& path) : fd_(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_un address = address_of(path);
    connected_ = ::connect(fd_.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  }
  bool connected() const { return connected_; }

  void send_raw(const std::string& bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      ssize_t n = ::send(fd_.get(), bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;  // the server may have closed on us; the reply says why
      sent += static_cast<size_t>(n);
    }
  }
  // Next line, or "" on EOF / timeout.
  std::string read_line(int timeout_ms = 5000) {
    for (;;) {
      if (size_t newline = pending_.find('\n'); newline != std::string::npos) {
        std::string line = pending_.substr(0, newline);
        pending_.erase(0, newline + 1);
        return line;
      }
      pollfd pfd{fd_.get(), POLLIN, 0};
      if (::poll(&pfd, 1, timeout_ms) <= 0) return "";
      char buffer[4096];
      ssize_t n = ::recv(fd_.get(), buffer, sizeof buffer, 0);
      if (n <= 0) return "";
      pending_.append(buffer, static_cast<size_t>(n));
    }
  }
  bool at_eof(int timeout_ms = 5000) {
    pollfd pfd{fd_.get(), POLLIN, 0};
    if (::poll(&pfd, 1, timeout_ms) <= 0) return false;
    char byte;
    return ::recv(fd_.get(), &byte, 1, 0) == 0;
  }
  // The reply to `request`, progress lines collected in `progress`.
  json call(const json& request, std::vector<json>* progress = nullptr) { return call_raw(request.dump() + "\n", progress); }
  json call_raw(const std::string& line, std::vector<json>* progress = nullptr) {
    send_raw(line);
    for (;;) {
      std::string text = read_line();
      if (text.empty()) return json();
      json reply = json::parse(text);
      if (reply.contains("progress")) {
        if (progress) progress->push_back(reply["progress"]);
        continue;
      }
      return reply;
    }
  }

 private:
  UniqueFd fd_;
  bool connected_ = false;
  std::string pending_;
};

json fake_status(const std::string& vm) {
  return json{{"vm", vm}, {"state", "running"}, {"pid", ::getpid()}, {"clients", 2},
              {"device_memory_bytes", 1536 * kMiB}, {"gpus", json::array({"0: Test GPU"})}, {"weight", 3},
              {"gpu_time", json::array({json{{"gpu", 0}, {"busy_seconds", 12.5}, {"share", 0.75}, {"weight", 3},
                                             {"vms_active", 2}}})}};
}

// The fake stub: status, a suspend with progress in two phases, save echoing its file, and
// ops that fail.
void register_fake_handlers(ControlServer& server, const std::string& vm) {
  server.on("status", [vm](const json&, Progress&) { return fake_status(vm); });
  server.on("suspend", [](const json&, Progress& progress) {
    for (uint64_t i = 0; i <= 4; ++i) {
      progress.report(i * 256 * kMiB, 1024 * kMiB, "saving device memory");
      std::this_thread::sleep_for(std::chrono::milliseconds(120));
    }
    progress.report(1, 1, "freeing contexts");
    return json{{"suspended_bytes", 1024 * kMiB}};
  });
  server.on("save", [](const json& request, Progress&) { return json{{"file", request.at("file")}}; });
  server.on("fail", [](const json&, Progress&) -> json { throw std::runtime_error("GPU 0 is busy; try again"); });
  server.on("flood", [](const json&, Progress& progress) {
    for (int i = 0; i < 100000; ++i) progress.report(static_cast<uint64_t>(i), 100000, "flooding");
    return json();
  });
}

struct ServerInDirectory {
  explicit ServerInDirectory(const std::string& directory, const std::string& vm = "vm1",
                             ControlServerOptions options = {}) {
    options.socket_path = directory + "/" + vm + ".ctl";
    server = std::make_unique<ControlServer>(options);
    register_fake_handlers(*server, vm);
    server->start();
  }
  std::unique_ptr<ControlServer> server;
};

class ControlServerTest : public ::testing::Test {
 protected:
  TemporaryDirectory directory_;
  std::string path(const std::string& name = "vm1.ctl") const { return directory_.path() + "/" + name; }
};

TEST_F(ControlServerTest, StatusRequestGetsTheHandlersResult) {
  ServerInDirectory stub(directory_.path());
  Client client(path());
  ASSERT_TRUE(client.connected());
  json reply = client.call({{"op", "status"}});
  EXPECT_EQ(reply["ok"], true);
  EXPECT_EQ(reply["result"], fake_status("vm1"));
  // Several requests on one connection, served in order.
  EXPECT_EQ(client.call({{"op", "save"}, {"file", "/x/y"}})["result"]["file"], "/x/y");
}

TEST_F(ControlServerTest, ProgressLinesArriveBeforeTheResult) {
  ServerInDirectory stub(directory_.path());
  Client client(path());
  std::vector<json> progress;
  json reply = client.call({{"op", "suspend"}}, &progress);
  EXPECT_EQ(reply["ok"], true);
  EXPECT_EQ(reply["result"]["suspended_bytes"], 1024 * kMiB);
  ASSERT_EQ(progress.size(), 6u);  // 120 ms apart: none dropped by the rate limit
  EXPECT_EQ(progress.front()["phase"], "saving device memory");
  EXPECT_EQ(progress.front()["done"], 0);
  EXPECT_EQ(progress.front()["total"], 1024 * kMiB);
  EXPECT_EQ(progress[4]["done"], 1024 * kMiB);
  EXPECT_EQ(progress.back()["phase"], "freeing contexts");
}

TEST_F(ControlServerTest, ProgressIsRateLimited) {
  ServerInDirectory stub(directory_.path());
  Client client(path());
  std::vector<json> progress;
  EXPECT_EQ(client.call({{"op", "flood"}}, &progress)["ok"], true);
  EXPECT_GE(progress.size(), 1u);
  EXPECT_LT(progress.size(), 50u) << "100000 reports in well under a second";
}

TEST_F(ControlServerTest, BadRequestsGetErrorsAndTheConnectionKeepsServing) {
  ServerInDirectory stub(directory_.path());
  Client client(path());
  auto expect_error = [&](const std::string& line, const std::string& message_part) {
    json reply = client.call_raw(line);
    EXPECT_EQ(reply["ok"], false) << line;
    ASSERT_TRUE(reply["error"].is_string()) << line;
    EXPECT_NE(reply["error"].get<std::string>().find(message_part), std::string::npos) << reply["error"];
  };
  expect_error("{\"op\": \"status\"\n", "malformed request");
  expect_error("not json at all\n", "malformed request");
  expect_error("\xff\xfe{\"op\":\"\xc3\x28\"}\n", "malformed request");  // not UTF-8
  expect_error("[1,2,3]\n", "no \"op\" string");
  expect_error("{\"op\": 7}\n", "no \"op\" string");
  expect_error(std::string(20000, '[') + std::string(20000, ']') + "\n", "no \"op\" string");
  expect_error("{\"op\":\"nope\"}\n", "unknown op \"nope\"; this stub knows: fail, flood, save, status, suspend");
  expect_error("{\"op\":\"fail\"}\n", "GPU 0 is busy; try again");
  expect_error("{\"op\":\"save\"}\n", "file");  // the handler's json::at throws: a message, no crash
  // Blank lines are skipped; CRLF is accepted.
  EXPECT_EQ(client.call_raw("\n\r\n{\"op\":\"status\"}\r\n")["ok"], true);
}

TEST_F(ControlServerTest, OversizedLineClosesThatConnectionOnly) {
  ServerInDirectory stub(directory_.path());
  Client client(path());
  client.send_raw(std::string(vmcuda::host::kMaxControlLineBytes + 10000, 'x'));
  json reply = json::parse(client.read_line());
  EXPECT_EQ(reply["ok"], false);
  EXPECT_NE(reply["error"].get<std::string>().find("longer than 65536 bytes"), std::string::npos);
  EXPECT_TRUE(client.at_eof());
  Client next(path());
  EXPECT_EQ(next.call({{"op", "status"}})["ok"], true);
}

TEST_F(ControlServerTest, IdleConnectionIsClosedAfterTheReadTimeout) {
  ControlServerOptions options;
  options.read_timeout = std::chrono::milliseconds(200);
  ServerInDirectory stub(directory_.path(), "vm1", options);
  Client client(path());
  const std::string line = client.read_line(3000);
  ASSERT_FALSE(line.empty());
  EXPECT_NE(json::parse(line)["error"].get<std::string>().find("no request within 0.2 s"), std::string::npos);
  EXPECT_TRUE(client.at_eof());
}

TEST_F(ControlServerTest, ConnectionsOverTheLimitAreRefused) {
  ControlServerOptions options;
  options.max_connections = 2;
  ServerInDirectory stub(directory_.path(), "vm1", options);
  Client first(path()), second(path());
  for (int i = 0; i < 200 && stub.server->active_connections() < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(stub.server->active_connections(), 2u);
  Client third(path());
  json reply = json::parse(third.read_line());
  EXPECT_NE(reply["error"].get<std::string>().find("too many control connections (2)"), std::string::npos);
  EXPECT_TRUE(third.at_eof());
  EXPECT_EQ(first.call({{"op", "status"}})["ok"], true);
}

TEST_F(ControlServerTest, StopReturnsWithIdleClientsConnected) {
  ServerInDirectory stub(directory_.path());
  Client idle(path());
  EXPECT_EQ(idle.call({{"op", "status"}})["ok"], true);
  const auto started = std::chrono::steady_clock::now();
  stub.server->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(3));
  EXPECT_TRUE(idle.at_eof());
}

// A server on `path` must refuse to start, saying `why`.
void expect_start_refused(const std::string& path, const std::string& why) {
  ControlServerOptions options;
  options.socket_path = path;
  ControlServer server(options);
  try {
    server.start();
    ADD_FAILURE() << "started where it must not: " << why;
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
  }
}

TEST_F(ControlServerTest, SecondServerOnALivePathIsRefused) {
  ServerInDirectory stub(directory_.path());
  expect_start_refused(path(), "another vmcuda-stub serves " + path() + " (pid " + std::to_string(::getpid()) + ")");
  Client client(path());
  EXPECT_EQ(client.call({{"op", "status"}})["ok"], true) << "the first server still serves";
}

TEST_F(ControlServerTest, StaleSocketIsReplaced) {
  {
    UniqueFd dead(::socket(AF_UNIX, SOCK_STREAM, 0));
    sockaddr_un address = address_of(path());
    ASSERT_EQ(::bind(dead.get(), reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  }  // bound, never listened, closed: what a killed stub leaves
  ServerInDirectory stub(directory_.path());
  Client client(path());
  EXPECT_EQ(client.call({{"op", "status"}})["ok"], true);
}

TEST_F(ControlServerTest, RegularFileAtThePathIsNotUnlinked) {
  { std::ofstream(path()) << "precious"; }
  expect_start_refused(path(), "exists and is not a socket");
  std::ifstream in(path());
  std::string content;
  in >> content;
  EXPECT_EQ(content, "precious");
  // Nothing left behind: no temporary directory.
  EXPECT_EQ(std::distance(fs::directory_iterator(directory_.path()), fs::directory_iterator()), 1);
}

TEST_F(ControlServerTest, SocketHasTheConfiguredModeAndIsRemovedOnDestruction) {
  {
    ServerInDirectory stub(directory_.path());
    struct stat st{};
    ASSERT_EQ(::lstat(path().c_str(), &st), 0);
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
    EXPECT_EQ(st.st_mode & 07777, 0660u);
    EXPECT_EQ(std::distance(fs::directory_iterator(directory_.path()), fs::directory_iterator()), 1)
        << "the temporary directory is gone";
  }
  EXPECT_FALSE(fs::exists(fs::symlink_status(path())));
  ControlServerOptions options;
  options.mode = 0600;
  ServerInDirectory stub(directory_.path(), "vm1", options);
  struct stat st{};
  ASSERT_EQ(::lstat(path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

TEST_F(ControlServerTest, DestructorLeavesASuccessorsFileAlone) {
  {
    ServerInDirectory stub(directory_.path());
    ASSERT_EQ(::unlink(path().c_str()), 0);
    std::ofstream(path()) << "successor";
  }
  EXPECT_TRUE(fs::is_regular_file(path()));
}

TEST_F(ControlServerTest, GroupIsSetOnTheSocket) {
  if (::geteuid() != 0) GTEST_SKIP() << "giving a socket to another group needs root";
  ControlServerOptions options;
  options.group = "54321";
  ServerInDirectory stub(directory_.path(), "vm1", options);
  struct stat st{};
  ASSERT_EQ(::lstat(path().c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, 54321u);
}

TEST(ControlServerOptionsTest, UnknownGroupIsRefusedWithItsName) {
  ControlServerOptions options;
  options.socket_path = "/tmp/never.ctl";
  options.group = "no-such-group-vmcuda";
  try {
    ControlServer server(options);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("group 'no-such-group-vmcuda'"), std::string::npos) << e.what();
  }
  EXPECT_EQ(vmrpc::resolve_group("0", "control socket"), 0u);
  EXPECT_EQ(vmrpc::resolve_group("root", "control socket"), 0u);
}

TEST(ControlPeerTest, AdmissionRule) {
  using vmcuda::host::control_peer_allowed;
  const uid_t stub_uid = 990;
  const gid_t admins = 1500;
  auto peer = [](uid_t uid, gid_t gid, std::vector<gid_t> groups) { return PeerCredentials{1, uid, gid, groups}; };
  EXPECT_TRUE(control_peer_allowed(peer(0, 0, {}), stub_uid, admins, {}));            // root
  EXPECT_TRUE(control_peer_allowed(peer(990, 990, {}), stub_uid, std::nullopt, {}));  // the stub's own user
  EXPECT_TRUE(control_peer_allowed(peer(1000, 1500, {}), stub_uid, admins, {}));      // primary group
  EXPECT_TRUE(control_peer_allowed(peer(1000, 1000, {27, 1500}), stub_uid, admins, {}));  // supplementary
  EXPECT_TRUE(control_peer_allowed(peer(1001, 1001, {}), stub_uid, admins, {1001}));      // allowed uid
  EXPECT_FALSE(control_peer_allowed(peer(1000, 1000, {27, 100}), stub_uid, admins, {}));
  EXPECT_FALSE(control_peer_allowed(peer(1000, 1500, {1500}), stub_uid, std::nullopt, {}));  // no group set
  EXPECT_FALSE(control_peer_allowed(peer(65534, 65534, {}), stub_uid, admins, {1001}));
}

TEST(ControlPeerTest, ProcStatusGroupsLine) {
  using vmcuda::host::parse_proc_status_groups;
  EXPECT_EQ(parse_proc_status_groups("Name:\tbash\nUid:\t1000\t1000\t1000\t1000\nGroups:\t4 27 1500 \nNgid:\t0\n"),
            (std::vector<gid_t>{4, 27, 1500}));
  EXPECT_EQ(parse_proc_status_groups("Groups:\t\n"), std::vector<gid_t>{});
  EXPECT_EQ(parse_proc_status_groups("Name:\tx\n"), std::nullopt);
  EXPECT_EQ(parse_proc_status_groups("Groups:\t4 x\n"), std::nullopt);
}

// As root, a child process with another uid is the other local user of DESIGN.md's Security.
// Returns the first line the server sent to a connection made as (uid, gid, groups).
std::string first_line_as(const std::string& socket_path, uid_t uid, gid_t gid, std::vector<gid_t> groups,
                          const std::string& request) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) return "pipe failed";
  const sockaddr_un address = address_of(socket_path);
  pid_t child = ::fork();
  if (child == 0) {  // async-signal-safe calls only: the parent has threads
    ::close(pipe_fds[0]);
    if (::setgroups(groups.size(), groups.data()) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0) ::_exit(10);
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) ::_exit(11);
    (void)!::send(fd, request.data(), request.size(), MSG_NOSIGNAL);  // a refusal may have closed already
    char buffer[1024];
    ssize_t n;
    while ((n = ::read(fd, buffer, sizeof buffer)) > 0) {
      (void)!::write(pipe_fds[1], buffer, static_cast<size_t>(n));
      if (std::memchr(buffer, '\n', static_cast<size_t>(n))) break;
    }
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  std::string output;
  char buffer[1024];
  ssize_t n;
  while ((n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0) output.append(buffer, static_cast<size_t>(n));
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "child failed with " + std::to_string(status);
  return output.substr(0, output.find('\n'));
}

TEST_F(ControlServerTest, OtherUsersAreRefusedUnlessInTheGroup) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to connect as another uid (the rule itself: AdmissionRule)";
  ASSERT_EQ(::chmod(directory_.path().c_str(), 0755), 0);
  ControlServerOptions options;
  options.mode = 0666;  // let the socket's mode pass everyone: the credential check must refuse
  options.group = "54321";
  ServerInDirectory stub(directory_.path(), "vm1", options);
  const std::string request = "{\"op\":\"status\"}\n";
  auto reply_as = [&](uid_t uid, gid_t gid, std::vector<gid_t> groups) {
    const std::string line = first_line_as(path(), uid, gid, groups, request);
    EXPECT_TRUE(line.starts_with("{")) << line;
    return line.starts_with("{") ? json::parse(line) : json();
  };

  json refused = reply_as(65534, 65534, {});
  EXPECT_EQ(refused["ok"], false);
  EXPECT_NE(refused["error"].get<std::string>().find("uid 65534"), std::string::npos) << refused;
  EXPECT_NE(refused["error"].get<std::string>().find("member of group 54321"), std::string::npos) << refused;

  json member = reply_as(65534, 65534, {54321});
  EXPECT_EQ(member["ok"], true) << member;
  json primary = reply_as(65534, 54321, {});
  EXPECT_EQ(primary["ok"], true) << primary;

  Client root(path());
  EXPECT_EQ(root.call({{"op", "status"}})["ok"], true) << "the server serves on";
}

// ---- vmcudactl ---------------------------------------------------------------------------

struct CommandResult {
  int exit_status = -1;
  std::string out;
  std::string err;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class VmcudactlTest : public ControlServerTest {
 protected:
  CommandResult run(std::vector<std::string> arguments) {
    const std::string out_path = directory_.path() + "/.out", err_path = directory_.path() + "/.err";
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    arguments.insert(arguments.begin(), VMCUDACTL_PATH);
    std::vector<char*> argv;
    for (auto& argument : arguments) argv.push_back(argument.data());
    argv.push_back(nullptr);
    std::vector<char*> environment;  // without VMCUDA_RUN_DIR: --run-dir decides
    for (char** e = environ; *e; ++e)
      if (!std::string_view(*e).starts_with("VMCUDA_RUN_DIR=")) environment.push_back(*e);
    environment.push_back(nullptr);
    pid_t pid = 0;
    CommandResult result;
    if (posix_spawn(&pid, VMCUDACTL_PATH, &actions, nullptr, argv.data(), environment.data()) != 0) return result;
    posix_spawn_file_actions_destroy(&actions);
    int status = 0;
    ::waitpid(pid, &status, 0);
    result.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    result.out = read_file(out_path);
    result.err = read_file(err_path);
    ::unlink(out_path.c_str());
    ::unlink(err_path.c_str());
    return result;
  }
  std::string run_dir() const { return directory_.path(); }
};

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST_F(VmcudactlTest, StatusTableListsEveryStubAndNotAnsweringOnes) {
  ServerInDirectory vm1(run_dir(), "vm1");
  ServerInDirectory vm2(run_dir(), "vm2");
  {
    UniqueFd dead(::socket(AF_UNIX, SOCK_STREAM, 0));  // a stale socket: nobody listens
    sockaddr_un address = address_of(path("vm3.ctl"));
    ASSERT_EQ(::bind(dead.get(), reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  }
  CommandResult r = run({"--run-dir", run_dir(), "status"});
  EXPECT_EQ(r.exit_status, 0) << r.err;
  EXPECT_EQ(r.out,
            "VM   STATE          CLIENTS  MEMORY MiB  QUOTA MiB  WEIGHT  GPU SHARE  GPU BUSY s  GPUS\n"
            "vm1  running              2        1536          -       3        75%        12.5  0: Test GPU\n"
            "vm2  running              2        1536          -       3        75%        12.5  0: Test GPU\n"
            "vm3  not answering        -           -          -       -          -           -  -\n");
  EXPECT_TRUE(contains(r.err, "vm3: not answering")) << r.err;
  EXPECT_TRUE(contains(r.err, "ECONNREFUSED")) << r.err;
}

TEST_F(VmcudactlTest, StatusJson) {
  ServerInDirectory vm1(run_dir(), "vm1");
  CommandResult all = run({"--run-dir", run_dir(), "status", "--json"});
  ASSERT_EQ(all.exit_status, 0) << all.err;
  json list = json::parse(all.out);
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["vm"], "vm1");
  EXPECT_EQ(list[0]["socket"], path("vm1.ctl"));
  EXPECT_EQ(list[0]["status"], fake_status("vm1"));

  CommandResult one = run({"status", "vm1", "--json", "--run-dir", run_dir()});
  ASSERT_EQ(one.exit_status, 0) << one.err;
  EXPECT_EQ(json::parse(one.out), fake_status("vm1"));

  CommandResult by_socket = run({"--socket", path("vm1.ctl"), "status"});
  ASSERT_EQ(by_socket.exit_status, 0) << by_socket.err;
  EXPECT_TRUE(contains(by_socket.out, "vm1  running")) << by_socket.out;
}

TEST_F(VmcudactlTest, SuspendShowsProgressAndSucceeds) {
  ServerInDirectory vm1(run_dir(), "vm1");
  CommandResult r = run({"--run-dir", run_dir(), "suspend", "vm1"});
  EXPECT_EQ(r.exit_status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "vm1: suspended in ")) << r.out;
  // stderr is not a terminal here: whole lines, the first at once, a new phase at once.
  EXPECT_TRUE(contains(r.err, "saving device memory: 0 B / 1.0 GiB (0%)\n")) << r.err;
  EXPECT_TRUE(contains(r.err, "freeing contexts: 1 B / 1 B (100%)")) << r.err;
}

TEST_F(VmcudactlTest, SaveSendsAnAbsolutePath) {
  ServerInDirectory vm1(run_dir(), "vm1");
  CommandResult r = run({"--run-dir", run_dir(), "--json", "save", "vm1", "relative/state.vmcuda"});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["file"], (fs::current_path() / "relative/state.vmcuda").string());
}

TEST_F(VmcudactlTest, ErrorReplyExitsOneWithTheMessage) {
  ControlServerOptions options;
  options.socket_path = path("vm2.ctl");
  ControlServer failing(options);
  failing.on("resume", [](const json&, Progress&) -> json {
    throw std::runtime_error("no saved state for vm2; run vmcudactl suspend vm2 first");
  });
  failing.start();
  CommandResult r = run({"--run-dir", run_dir(), "resume", "vm2"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_EQ(r.err, "vmcudactl: vm2: no saved state for vm2; run vmcudactl suspend vm2 first\n");
  CommandResult unknown = run({"--run-dir", run_dir(), "upgrade", "vm2"});
  EXPECT_EQ(unknown.exit_status, 1);
  EXPECT_TRUE(contains(unknown.err, "vmcudactl: vm2: unknown op \"upgrade\"")) << unknown.err;
}

TEST_F(VmcudactlTest, NoStubExitsThreeWithTheHint) {
  CommandResult r = run({"--run-dir", run_dir(), "suspend", "ghost"});
  EXPECT_EQ(r.exit_status, 3);
  EXPECT_TRUE(contains(r.err, path("ghost.ctl"))) << r.err;
  EXPECT_TRUE(contains(r.err, "ENOENT")) << r.err;
  EXPECT_TRUE(contains(r.err, "is vmcuda-stub@ghost running? (systemctl status vmcuda-stub@ghost)")) << r.err;
  CommandResult status = run({"--run-dir", run_dir(), "status", "ghost"});
  EXPECT_EQ(status.exit_status, 3);
}

TEST_F(VmcudactlTest, UsageHelpAndVersion) {
  EXPECT_EQ(run({}).exit_status, 2);
  EXPECT_EQ(run({"suspend"}).exit_status, 2);
  EXPECT_EQ(run({"restore", "file.state"}).exit_status, 2) << "restore needs --vm";
  EXPECT_EQ(run({"frobnicate"}).exit_status, 2);
  EXPECT_EQ(run({"suspend", "../etc"}).exit_status, 2);
  CommandResult help = run({"--help"});
  EXPECT_EQ(help.exit_status, 0);
  EXPECT_TRUE(contains(help.out, "restore")) << help.out;
  CommandResult version = run({"--version"});
  EXPECT_EQ(version.exit_status, 0);
  EXPECT_TRUE(contains(version.out, "vmcudactl " VMCUDA_VERSION)) << version.out;
}

}  // namespace
