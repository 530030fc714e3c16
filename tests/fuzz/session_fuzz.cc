// libFuzzer target for vmcuda-stub's call handlers (host-stub Session): what a hostile guest
// reaches once the frame decoder (frame_decoder_fuzz) has accepted a frame. Each input is a
// few heap writes and a sequence of calls (session_fuzz_input.h) run through Session::call,
// as the slot server runs them, on the test executor (tests/executor/fake_driver.cc) as the
// driver. Built with clang -fsanitize=fuzzer,address,undefined (tests/fuzz/CMakeLists.txt,
// `make fuzz`).
//
// Besides the sanitizers' own checks, it aborts (a crash libFuzzer saves) when
//   - a call sets reply_bytes past the reply's capacity, or returns a status that is
//     neither a CUresult (>= 0) nor a wire::ChannelStatus;
//   - closing the session leaves anything behind in the driver (memory, contexts, modules,
//     streams, events, VA reservations, pinned host ranges): close() must free it all.
// The argument copy and the reply are allocations of their exact size (ASan sees any access
// past them); the shared heap is a real mapping, as the guest's region is.
//
// Each input gets a fresh Session and a reset executor, so that a crash replays from its
// input alone. SESSION_FUZZ_INPUTS_PER_SESSION=N keeps one Session for N inputs (state
// carried across inputs, so a crash may need the inputs before it to replay); it is
// recreated sooner when the executor holds more than kStateBound bytes.
// SESSION_FUZZ_TRACE=1 prints each call, its status and reply size (to check seeds, and
// to read a crash's input).
#include <sys/mman.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "executor/fake_driver.h"
#include "image_cache.h"
#include "ipc_registry.h"
#include "output.h"
#include "session.h"
#include "state_stream.h"
#include "session_fuzz_input.h"
#include "vmrpc/region.h"
#include "vmrpc/wire.h"

namespace vmcuda::fuzz {
namespace {

using vmrpc::wire::ChannelStatus;

[[noreturn]] void fail(const char* file, int line, const char* what) {
  std::fprintf(stderr, "session_fuzz: invariant broken at %s:%d: %s\n", file, line, what);
  std::abort();
}
#define FUZZ_CHECK(cond) \
  do {                   \
    if (!(cond)) ::vmcuda::fuzz::fail(__FILE__, __LINE__, #cond); \
  } while (0)

// Small enough that a guest cannot make the executor hold much host memory: the quota
// bounds device memory (the arena maps 2 MiB granules of host memory in the executor).
constexpr uint64_t kQuota = 32ull << 20;
constexpr uint64_t kStateBound = 256ull << 20;
constexpr uint64_t kRegionBytes = 4ull << 20;

// Reads the input from the front; past the end it reads zeros.
struct Reader {
  const uint8_t* data;
  size_t size;
  size_t pos = 0;
  template <class T>
  T take() {
    uint8_t buf[sizeof(T)] = {};
    for (size_t i = 0; i < sizeof(T) && pos < size; ++i) buf[i] = data[pos++];
    T v;
    std::memcpy(&v, buf, sizeof v);
    return v;
  }
  // n bytes into `out` (zeros past the end).
  void bytes(std::byte* out, size_t n) {
    const size_t have = std::min(n, size - pos);
    if (have) std::memcpy(out, data + pos, have);
    if (n > have) std::memset(out + have, 0, n - have);
    pos += have;
  }
  bool done() const { return pos >= size; }
};

bool known_channel_status(int32_t s) {
  switch (static_cast<ChannelStatus>(s)) {
    case ChannelStatus::kBadArguments:
    case ChannelStatus::kReplyTooSmall:
    case ChannelStatus::kUnknownCall:
    case ChannelStatus::kBadHeapRef:
    case ChannelStatus::kHandlerFailed:
      return true;
    default:
      return false;
  }
}

// The process-wide setup: one region (its heap is the guest's shared heap), the driver.
struct World {
  host::DriverApi api;
  vmrpc::Layout layout;
  std::byte* base = nullptr;
  vmrpc::RegionView region;
  vmrpc::SlotInfo info{1, 0, 4242};
  std::unique_ptr<host::Session> session;
  std::shared_ptr<host::VmLedger> ledger;  // the VM's: the session's and the neighbor's
  host::StubLimits limits;
  std::shared_ptr<host::IpcRegistry> ipc_registry = std::make_shared<host::IpcRegistry>();
  vmrpc::SlotInfo neighbor_info{1, 1, 4343};
  std::unique_ptr<host::Session> neighbor;
  bool session_gpu_threads = false;
  uint64_t inputs_per_session = 1;
  uint64_t inputs_in_session = 0;
  bool trace = false;

  World() {
    std::string why;
    auto l = vmrpc::Layout::plan(vmrpc::RegionConfig{kRegionBytes, 2, 64u << 10, 4096}, &why);
    if (!l) {
      std::fprintf(stderr, "session_fuzz: Layout::plan: %s\n", why.c_str());
      std::abort();
    }
    layout = *l;
    void* p = ::mmap(nullptr, layout.region_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      std::perror("session_fuzz: mmap");
      std::abort();
    }
    base = static_cast<std::byte*>(p);
    region = vmrpc::RegionView(base, layout);
    layout.write_header(region.header(), 1);
    if (const char* n = std::getenv("SESSION_FUZZ_INPUTS_PER_SESSION"))
      inputs_per_session = std::max(1ull, std::strtoull(n, nullptr, 10));
    trace = std::getenv("SESSION_FUZZ_TRACE") != nullptr;
    // Kernel printf output flows as in a worker process (--isolation process): the
    // driver's stdout is a pipe the session drains into the guest's ring (OutputRing).
    // libFuzzer reports on stderr.
    std::string cwhy;
    if (!host::OutputCapture::install(1, &cwhy)) std::fprintf(stderr, "session_fuzz: no output capture: %s\n", cwhy.c_str());
  }

  // The guest's side of the region as a fresh client finds it: heap zeroed, every heap page
  // this client's (so OutputRing accepts a ring anywhere), the slot not claimed (a host
  // function's gate then stops waiting at once: no guest runs the function here).
  void reset_region() {
    std::memset(region.heap().data(), 0, region.heap().size());
    for (uint64_t i = 0; i < layout.heap_pages(); ++i) region.heap_table()[i] = info.slot + 1;
    region.control(info.slot).state = static_cast<uint32_t>(vmrpc::wire::SlotState::kFree);
    region.control(info.slot).late_status = 0;  // handed-over work's first error (gpu_threads)
  }

  void close_neighbor() {
    if (!neighbor) return;
    neighbor->close();
    neighbor.reset();
  }

  void close_session() {
    close_neighbor();
    if (!session) return;
    session->close();
    session.reset();
    // Every client of the VM gave its share of the quota back.
    FUZZ_CHECK(!ledger || ledger->used() == 0);
    // close() promises the client leaves nothing in the driver, nor in the VM's IPC table
    // (a suspended client's parked exports too).
    FUZZ_CHECK(ipc_registry->size() == 0);
    FUZZ_CHECK(testing::fake_allocated_bytes() == 0);
    FUZZ_CHECK(testing::fake_live_contexts() == 0);
    FUZZ_CHECK(testing::fake_live_modules() == 0);
    FUZZ_CHECK(testing::fake_live_streams() == 0);
    FUZZ_CHECK(testing::fake_live_events() == 0);
    FUZZ_CHECK(testing::fake_live_graphs() == 0);
    FUZZ_CHECK(testing::fake_live_graph_execs() == 0);
    FUZZ_CHECK(testing::fake_live_reservations() == 0);
    FUZZ_CHECK(testing::fake_vmm_mappings() == 0);
    FUZZ_CHECK(testing::fake_pinned_ranges() == 0);
  }

  host::Session& session_for(bool gpu_threads) {
    const bool fresh = !session || inputs_in_session >= inputs_per_session || gpu_threads != session_gpu_threads ||
                       testing::fake_allocated_bytes() > kStateBound;
    if (fresh) {
      close_session();
      testing::install_fake_driver(api);
      testing::fake_clear_fault();  // an illegal address in the last input poisoned the "GPU"
      reset_region();
      limits = {};
      if (!ledger) ledger = host::VmLedger::create(kQuota);  // one VM: close_session() checks it is empty again
      limits.ledger = ledger;
      limits.max_module_bytes = 1u << 20;
      limits.max_streams = 64;
      limits.max_events = 64;
      limits.max_host_funcs = 64;
      limits.gpu_threads = gpu_threads;
      // Module images stored and found under host-computed hashes (image_cache.h); small,
      // so that stores evict. One directory for the process, removed at exit.
      static const std::shared_ptr<host::ImageCache> cache = [] {
        static char dir[] = "/tmp/vmcuda-session-fuzz-XXXXXX";
        std::string why;
        std::shared_ptr<host::ImageCache> c;
        if (::mkdtemp(dir)) c = host::ImageCache::open({std::string(dir) + "/cache", "fuzz", 256u << 10, 128u << 10}, &why);
        if (!c) std::fprintf(stderr, "session_fuzz: no image cache: %s\n", why.c_str());
        else std::atexit([] { std::filesystem::remove_all(dir); });
        return c;
      }();
      limits.image_cache = cache;
      // The VM's IPC table, in process (`--isolation thread`): exports, and their tokens
      // parked and republished across a suspend (host-stub/src/ipc.cc).
      limits.ipc = host::local_ipc_channel(ipc_registry);
      session = std::make_unique<host::Session>(api, limits, std::vector<int>{0, 1}, info);
      session_gpu_threads = gpu_threads;
      inputs_in_session = 0;
    }
    ++inputs_in_session;
    return *session;
  }
};

World& world() {
  static World* w = new World;  // never destroyed: libFuzzer exits without unwinding
  return *w;
}

// Suspends the session to host memory (the GPU must then hold nothing of it), damages the
// state where the input says, and resumes from it: an undamaged state must come back; a
// damaged one must be refused cleanly or come back (checksums are not enforced in fuzz
// builds, so the reader's and the resume's checks face the damage themselves).
void suspend_and_resume(World& w, host::Session& session, Reader& in) {
  host::state::MemorySink sink;
  std::string why;
  if (!session.suspend(sink, &why)) return;  // e.g. a poisoned context: the client runs on
  FUZZ_CHECK(testing::fake_allocated_bytes() == 0);
  FUZZ_CHECK(w.ledger->used() == 0);  // a suspended client's share goes back to the VM
  FUZZ_CHECK(testing::fake_live_contexts() == 0);
  FUZZ_CHECK(testing::fake_vmm_mappings() == 0);
  FUZZ_CHECK(testing::fake_live_cublaslt_objects() == 0);  // carried in the state, not held
  std::vector<std::byte> bytes = sink.take_stream()->flatten();
  bool damaged = false;
  while (!in.done() && !bytes.empty()) {
    const uint32_t off = in.take<uint32_t>();
    const uint8_t x = in.take<uint8_t>();
    bytes[off % bytes.size()] ^= static_cast<std::byte>(x);
    damaged |= x != 0;
  }
  host::state::Limits limits;
  limits.max_record_bytes = 4u << 20;
  limits.max_total_bytes = 64u << 20;
  host::state::MemorySource source(host::state::MemoryStream::borrow(bytes), limits);
  const bool resumed = session.resume(source, &w.region, &why);
  if (!damaged && !resumed) {
    std::fprintf(stderr, "session_fuzz: an undamaged state did not resume: %s\n", why.c_str());
    FUZZ_CHECK(false);
  }
  if (!resumed) {  // nothing of the attempt may stay on the GPU, nor in the VM's ledger
    FUZZ_CHECK(w.ledger->used() == 0);
    FUZZ_CHECK(testing::fake_allocated_bytes() == 0);
    FUZZ_CHECK(testing::fake_live_contexts() == 0);
    FUZZ_CHECK(testing::fake_live_cublaslt_objects() == 0);
  }
}

void run_input(const uint8_t* data, size_t size) {
  World& w = world();
  Reader in{data, size};
  const uint8_t flags = in.take<uint8_t>();
  host::Session& session = w.session_for(flags & kFlagGpuThreads);

  const auto heap = w.region.heap();
  for (uint8_t n = in.take<uint8_t>(); n > 0 && !in.done(); --n) {
    const uint64_t off = in.take<uint32_t>() % heap.size();
    const size_t len = std::min<size_t>(in.take<uint16_t>(), heap.size() - off);
    in.bytes(heap.data() + off, len);
  }

  const vmrpc::CallContext ctx{w.info, w.region, nullptr};
  if (flags & kFlagNeighbor) {
    const uint64_t mib = in.take<uint8_t>() % 40;
    w.close_neighbor();
    w.neighbor = std::make_unique<host::Session>(w.api, w.limits, std::vector<int>{0, 1}, w.neighbor_info);
    const vmrpc::CallContext nctx{w.neighbor_info, w.region, nullptr};
    const api::MallocArgs a{mib << 20};
    api::PtrReply r{};
    uint32_t reply_bytes = 0;
    const int32_t st = w.neighbor->call(nctx, static_cast<uint32_t>(api::Call::Malloc), std::as_bytes(std::span(&a, 1)),
                                        std::as_writable_bytes(std::span(&r, 1)), reply_bytes);
    // Within the VM's quota it is granted; beyond it, the error a native program gets.
    FUZZ_CHECK(st == 0 || st == host::CUDA_ERROR_OUT_OF_MEMORY);
    if (w.inputs_per_session == 1)  // the session holds nothing yet: the whole quota is the neighbor's to take
      FUZZ_CHECK((st == 0) == (mib == 0 || (mib << 20) <= kQuota));
  }
  std::vector<uint64_t> remembered;
  for (size_t i = 0; i < kMaxCalls && !in.done(); ++i) {
    const uint8_t sel = in.take<uint8_t>();
    const CallShape* shape = sel != kRawCall && sel < kCallCount ? &kCalls[sel] : nullptr;
    const uint32_t call_id = shape ? shape->id : in.take<uint32_t>();
    if (!shape) shape = call_shape(call_id);  // a call past index 254 (or none: raw bytes)
    const uint8_t mode = in.take<uint8_t>();
    const uint16_t len = in.take<uint16_t>();
    uint8_t which = 0, at = 0;
    if (mode & kModePatch) which = in.take<uint8_t>(), at = in.take<uint8_t>();
    const uint32_t reply_extra = in.take<uint16_t>();
    const size_t arg_bytes = (mode & kModeRawLength) || !shape ? len : size_t{shape->arg_bytes} + len;
    const size_t reply_bytes_cap = (shape ? shape->reply_bytes : 0) + std::min(reply_extra, kMaxReplyExtra);

    // Exact-size buffers: ASan reports any access past them.
    std::unique_ptr<std::byte[]> args(new std::byte[arg_bytes ? arg_bytes : 1]);
    in.bytes(args.get(), arg_bytes);
    if ((mode & kModePatch) && arg_bytes >= 8 && !remembered.empty()) {
      const uint64_t v = remembered[which % remembered.size()];
      std::memcpy(args.get() + at % (arg_bytes - 7), &v, 8);
    }
    std::unique_ptr<std::byte[]> reply(new std::byte[reply_bytes_cap ? reply_bytes_cap : 1]);
    std::memset(reply.get(), 0xa5, reply_bytes_cap);

    uint32_t reply_bytes = 0;
    const int32_t status = session.call(ctx, call_id, std::span<const std::byte>(args.get(), arg_bytes),
                                        std::span<std::byte>(reply.get(), reply_bytes_cap), reply_bytes);
    if (w.trace)
      std::fprintf(stderr, "session_fuzz: %s (0x%x) args %zu reply %u/%zu: status %d\n",
                   shape ? shape->name : "?", call_id, arg_bytes, reply_bytes, reply_bytes_cap, status);
    FUZZ_CHECK(reply_bytes <= reply_bytes_cap);
    FUZZ_CHECK(status >= 0 || known_channel_status(status));
    if (status == 0 && reply_bytes >= 8 && remembered.size() < kMaxRemembered) {
      uint64_t v;
      std::memcpy(&v, reply.get(), 8);
      remembered.push_back(v);
    }
  }
  FUZZ_CHECK(w.ledger->used() <= kQuota);  // the VM's programs together, never beyond it
  w.close_neighbor();
  if (flags & kFlagSuspend) suspend_and_resume(w, session, in);
  if (w.inputs_per_session == 1) w.close_session();
}

}  // namespace
}  // namespace vmcuda::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("VMRPC_LOG", "0", 0);  // the stub's warnings about bad input: one per call otherwise
  vmcuda::fuzz::world();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  vmcuda::fuzz::run_input(data, size);
  return 0;
}
