// cuGetExportTable and the private tables NVIDIA's CUDA runtime 13.x asks libcuda for
// (driver_export_tables.h; each table and entry, and where the facts come from:
// docs/driver-export-tables.md). Every table is an array of entry addresses; most begin with
// their own size in bytes, and tables grow at their end between releases, so each is served
// at the size the tested runtime expects. An entry vmcuda does not understand is a logging
// stub that returns CUDA_ERROR_NOT_SUPPORTED and touches no argument, never NULL; an unknown
// table is CUDA_ERROR_INVALID_VALUE and one log line naming its UUID.
//
// Everything here is guest-local except the module loads of the runtime interface, which go
// through cuModuleLoadData onto the host as any module does (driver_module.cc).
#include "driver_export_tables.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "driver_state.h"
#include "log.h"
#include "runtime_state.h"
#include "vmcuda/cudart_api.h"
#include "vmcuda/cudart_types.h"

#define CU_API extern "C" __attribute__((visibility("default")))

extern "C" {
CUresult cuModuleLoadData(CUmodule* module, const void* image);
CUresult cuCtxGetCurrent(CUcontext* ctx);
CUresult cuCtxGetId(CUcontext ctx, unsigned long long* id);
CUresult cuDeviceGetCount(int* count);
CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev);
CUresult cuDeviceGetAttribute(int* value, int attribute, CUdevice dev);
CUresult cuDriverGetVersion(int* version);
}

namespace vmcuda::guest {
namespace {

namespace cu = vmcuda::cu;
using Uuid = std::array<unsigned char, 16>;

// ------------------------------------------------------------------ the tables' identities

enum TableId {
  kRuntimeInterface,
  kToolsTls,
  kCallbackHooks,
  kContextStorage,
  kContextChecks,
  kIntegrity,
  kContextQueries,
  kTableCount
};

struct TableInfo {
  const char* name;
  Uuid uuid;
  int entries;      // served size, in entries (slot 0 included)
  bool size_word;   // slot 0 holds the table's size in bytes
};

// Sizes: what NVIDIA's driver 580 serves to runtime 13.0 (its size words, read with
// scripts/trace-export-tables.sh on the H100: docs/driver-export-tables.md); a runtime may
// check them, and a slot past the end must still hold a function (a logging stub).
constexpr TableInfo kTables[kTableCount] = {
    {"runtime interface", {0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a, 0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9}, 13, true},
    {"tools TLS", {0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47, 0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec, 0xdc}, 3, true},
    {"tools callback hooks", {0xa0, 0x94, 0x79, 0x8c, 0x2e, 0x74, 0x2e, 0x74, 0x93, 0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a, 0x66}, 7, true},
    {"context-local storage", {0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11, 0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95, 0x93}, 4, false},
    {"context checks", {0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43, 0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d, 0xfa, 0x7e}, 15, true},
    {"integrity check", {0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b, 0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1, 0xf2}, 3, true},
    // Asked by NVIDIA's libraries (cuBLAS, cuFFT), not by the runtime.
    {"context queries", {0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48, 0x8c, 0xa6, 0x41, 0xff, 0x73, 0x24, 0xc8, 0xf2}, 93, true},
};
constexpr int kMaxEntries = 93;

// Refused on purpose (every working implementation does; NVIDIA's runtime 13.0 goes on
// without it): logged at info level only.
constexpr Uuid kRefused = {0xf8, 0xcf, 0xf9, 0x51, 0x21, 0x46, 0x8b, 0x4e, 0xb9, 0xe2, 0xfb, 0x46, 0x9e, 0x7c, 0x0d, 0xd9};

std::string uuid_text(const unsigned char* u) {
  char s[33];
  for (int i = 0; i < 16; ++i) std::snprintf(s + 2 * i, 3, "%02x", u[i]);
  return s;
}

// ------------------------------------------------------------------ entries not understood

// One function per (table, slot), so its one log line can name both. It reads no argument
// and writes nothing: whatever its signature, returning 801 is safe for a caller expecting
// a CUresult; one expecting void ignores it.
template <int T, int S>
CUresult unknown_entry() {
  static std::atomic<bool> logged{false};
  if (!logged.exchange(true))
    VMCUDA_LOG(kWarn, "api",
               "export table %s (%s) entry %d was called; vmcuda does not serve it: it returns "
               "CUDA_ERROR_NOT_SUPPORTED (801). Please report this with the program's CUDA version",
               kTables[T].name, uuid_text(kTables[T].uuid.data()).c_str(), S);
  return cu::kNotSupported;
}

template <int T, size_t... S>
constexpr std::array<void*, kMaxEntries> unknown_entries(std::index_sequence<S...>) {
  return {reinterpret_cast<void*>(&unknown_entry<T, static_cast<int>(S)>)...};
}

// ------------------------------------------------------------------ runtime interface (6bd5fb6c)

CUresult load_module(CUmodule* module, const void* image, const char* what) {
  if (!module || !image) return cu::kInvalidValue;
  const CUresult e = cuModuleLoadData(module, image);
  VMCUDA_LOG(kDebug, "api", "runtime interface: %s(%p): %d, module %p", what, image, e, static_cast<void*>(*module));
  return e;
}

// Entry 1: a module from a fatbin wrapper (__fatBinC_Wrapper_t), as cuModuleLoadFatBinary.
CUresult module_from_wrapper(CUmodule* module, const void* wrapper) {
  return load_module(module, wrapper, "module from fatbin wrapper");
}

// Entry 2: the primary context of `dev`, not retained (the runtime retains it itself).
CUresult primary_context_unretained(CUcontext* pctx, CUdevice dev) {
  if (CUresult e = enter_driver_call()) return e;
  if (!pctx) return cu::kInvalidValue;
  CUcontext c = primary_context(dev);
  if (!c) return cu::kInvalidDevice;
  *pctx = c;
  return cu::kSuccess;
}

// Entries 6 and 8: as 1, with options vmcuda does not know (JIT-like arguments): with any
// of them set, 801 (what ZLUDA does too), else the plain load.
CUresult module_from_wrapper_ext(CUmodule* module, const void* wrapper, void* a3, void* a4, unsigned a5) {
  if (a3 || a4 || a5) {
    VMCUDA_LOG(kWarn, "api", "runtime interface entry 6 with options (%p, %p, %u) is not supported; it returns 801", a3,
               a4, a5);
    return cu::kNotSupported;
  }
  return load_module(module, wrapper, "module from fatbin wrapper (entry 6)");
}
CUresult module_from_fatbin_ext(const void* fatbin, CUmodule* module, void* a3, void* a4, unsigned a5) {
  if (a3 || a4 || a5) {
    VMCUDA_LOG(kWarn, "api", "runtime interface entry 8 with options (%p, %p, %u) is not supported; it returns 801", a3,
               a4, a5);
    return cu::kNotSupported;
  }
  return load_module(module, fatbin, "module from fatbin (entry 8)");
}

// Entry 7: takes one word and returns nothing; nothing to do here.
void runtime_interface_7(size_t) {}

// Entry 12 (CUDA 13): loads the JIT compilers natively; the host's driver has its own.
CUresult load_compilers() { return cu::kSuccess; }

// ------------------------------------------------------------------ callback hooks (a094798c)

// The runtime asks for two buffers of enable flags (one per callback domain and one per
// callback); all zero: no tool is attached, every callback is off.
uint32_t g_callback_enables[1024];
uint32_t g_callback_domains[14];
void callback_enables(void** p, size_t* n) {
  if (p) *p = g_callback_enables;
  if (n) *n = std::size(g_callback_enables);
}
void callback_domains(void** p, size_t* n) {
  if (p) *p = g_callback_domains;
  if (n) *n = std::size(g_callback_domains);
}

// ------------------------------------------------------------------ context-local storage (c693336e)

using StorageDestructor = void (*)(CUcontext, void*, void*);
struct StorageEntry {
  void* value;
  StorageDestructor destructor;
};
struct Storage {
  std::mutex mu;
  std::map<std::pair<CUcontext, void*>, StorageEntry> entries;
};
Storage& storage() {
  static auto* s = new Storage;  // never destroyed: used from atexit handlers
  return *s;
}

// NULL names the calling thread's current context.
CUresult storage_context(CUcontext* ctx) {
  if (CUresult e = enter_driver_call()) return e;
  if (!*ctx) *ctx = current_context();
  if (!*ctx || !valid_context(*ctx)) return cu::kInvalidContext;
  return cu::kSuccess;
}

CUresult storage_put(CUcontext ctx, void* key, void* value, StorageDestructor destructor) {
  if (CUresult e = storage_context(&ctx)) return e;
  auto& s = storage();
  std::lock_guard l(s.mu);
  s.entries[{ctx, key}] = {value, destructor};
  return cu::kSuccess;
}

// Forgets the entry; its destructor does not run (the caller is deleting its own value).
CUresult storage_delete(CUcontext ctx, void* key) {
  if (CUresult e = storage_context(&ctx)) return e;
  auto& s = storage();
  std::lock_guard l(s.mu);
  s.entries.erase({ctx, key});
  return cu::kSuccess;
}

// A key never put is CUDA_ERROR_INVALID_HANDLE (what the runtime takes as "nothing yet").
CUresult storage_get(void** value, CUcontext ctx, void* key) {
  if (!value) return cu::kInvalidValue;
  if (CUresult e = storage_context(&ctx)) return e;
  auto& s = storage();
  std::lock_guard l(s.mu);
  auto it = s.entries.find({ctx, key});
  if (it == s.entries.end()) return cu::kInvalidHandle;
  *value = it->second.value;
  return cu::kSuccess;
}

// ------------------------------------------------------------------ context checks (263e8860)

// Entry 2: what kind of context `ctx` is: 0, an ordinary one (vmcuda has no green contexts).
CUresult context_kind(CUcontext, uint32_t* kind, const void** extra) {
  if (kind) *kind = 0;
  (void)extra;  // left alone: natively never written for an ordinary context
  return cu::kSuccess;
}
// Entry 3: green contexts are not supported.
uint32_t green_contexts_supported() { return 0; }

// ------------------------------------------------------------------ tools TLS (42d85a81)

// Entry 2: the calling thread's current context (observed: the libraries call it, then ask
// the context's id in 21318c60's entry 4 with what it gave).
CUresult tools_current_context(CUcontext* ctx) {
  if (!ctx) return cu::kInvalidValue;
  return cuCtxGetCurrent(ctx);
}

// ------------------------------------------------------------------ context queries (21318c60)

// Entry 4: the context's unique id, as cuCtxGetId (observed: (context, &id)).
CUresult context_id(CUcontext ctx, unsigned long long* id) { return cuCtxGetId(ctx, id); }

// Entries 51 and 39, inferred from what the driver answered cuSOLVER natively (observed on
// the H100: 51 (context, 0, &out) gave an object; 39 (context, that object, &out) gave 7):
// the context's device's current memory pool, and that pool's reuse policies as bits
// (follow event dependencies 1, opportunistic 2, internal dependencies 4: all on by
// default, 7). An answer outside that reading is refused, never guessed.
CUresult context_memory_pool(CUcontext ctx, unsigned flags, cudaMemPool_t* pool) {
  if (!pool || flags != 0) return cu::kInvalidValue;
  if (!ctx && cuCtxGetCurrent(&ctx) != cu::kSuccess) return cu::kInvalidContext;
  if (!ctx || !ctx->alive.load()) return cu::kInvalidContext;
  KeepRuntimeLastError keep;
  return to_cu_result(cudaDeviceGetMemPool(pool, ctx->device));
}
CUresult memory_pool_reuse_policies(CUcontext, cudaMemPool_t pool, uint64_t* bits) {
  if (!pool || !bits) return cu::kInvalidValue;
  KeepRuntimeLastError keep;
  uint64_t out = 0;
  const cudaMemPoolAttr attrs[3] = {cudaMemPoolReuseFollowEventDependencies, cudaMemPoolReuseAllowOpportunistic,
                                    cudaMemPoolReuseAllowInternalDependencies};
  for (int i = 0; i < 3; ++i) {
    int on = 0;
    if (cudaError_t e = cudaMemPoolGetAttribute(pool, attrs[i], &on)) return to_cu_result(e);
    if (on) out |= uint64_t{1} << i;
  }
  *bits = out;
  return cu::kSuccess;
}

// ------------------------------------------------------------------ the tables

struct Tables {
  std::array<void*, kMaxEntries> slots[kTableCount];
  Tables();
};

CUresult integrity_check(uint32_t version, uint64_t unix_seconds, uint64_t* result);

template <size_t... T>
void fill_unknown(Tables& t, std::index_sequence<T...>) {
  ((t.slots[T] = unknown_entries<static_cast<int>(T)>(std::make_index_sequence<kMaxEntries>())), ...);
}

Tables::Tables() {
  fill_unknown(*this, std::make_index_sequence<kTableCount>());
  for (int i = 0; i < kTableCount; ++i)
    if (kTables[i].size_word) slots[i][0] = reinterpret_cast<void*>(sizeof(void*) * kTables[i].entries);
  auto set = [&](TableId t, int slot, auto fn) { slots[t][slot] = reinterpret_cast<void*>(fn); };
  set(kRuntimeInterface, 1, &module_from_wrapper);
  set(kRuntimeInterface, 2, &primary_context_unretained);
  set(kRuntimeInterface, 6, &module_from_wrapper_ext);
  set(kRuntimeInterface, 7, &runtime_interface_7);
  set(kRuntimeInterface, 8, &module_from_fatbin_ext);
  set(kRuntimeInterface, 12, &load_compilers);
  set(kCallbackHooks, 2, &callback_enables);
  set(kCallbackHooks, 6, &callback_domains);
  set(kContextStorage, 0, &storage_put);
  set(kContextStorage, 1, &storage_delete);
  set(kContextStorage, 2, &storage_get);
  set(kContextChecks, 2, &context_kind);
  set(kContextChecks, 3, &green_contexts_supported);
  set(kIntegrity, 1, &integrity_check);
  set(kToolsTls, 2, &tools_current_context);
  set(kContextQueries, 4, &context_id);
  set(kContextQueries, 39, &memory_pool_reuse_policies);
  set(kContextQueries, 51, &context_memory_pool);
}

Tables& tables() {
  static auto* t = new Tables;  // never destroyed: the runtime keeps the addresses
  return *t;
}

// ------------------------------------------------------------------ integrity check (d4082055)

// Entry 1: called by the runtime with its version (13000, 13001, 13002 for 13.0: the last
// digit says which answer) and the time; the runtime computes the same answer from what the
// driver API tells it (versions, devices) and the tables' addresses, and refuses a driver
// whose answer differs (cudaErrorSoftwareValidityNotEstablished).
CUresult integrity_check(uint32_t version, uint64_t unix_seconds, uint64_t* result) {
  if (!result) return cu::kInvalidValue;
  int driver = 0, count = 0;
  if (CUresult e = cuDriverGetVersion(&driver)) return e;
  if (CUresult e = cuDeviceGetCount(&count)) return e;
  std::vector<export_tables::DeviceIds> devices(static_cast<size_t>(std::max(count, 0)));
  for (int d = 0; d < count; ++d) {
    auto& ids = devices[d];
    CUuuid u;
    if (CUresult e = cuDeviceGetUuid_v2(&u, d)) return e;
    std::memcpy(ids.uuid, u.bytes, 16);
    // CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, _PCI_BUS_ID, _PCI_DEVICE_ID
    if (CUresult e = cuDeviceGetAttribute(&ids.pci_domain, 50, d)) return e;
    if (CUresult e = cuDeviceGetAttribute(&ids.pci_bus, 33, d)) return e;
    if (CUresult e = cuDeviceGetAttribute(&ids.pci_device, 34, d)) return e;
  }
  Tables& t = tables();
  const export_tables::IntegrityInputs in{
      static_cast<uint32_t>(driver),
      version,
      static_cast<uint32_t>(getpid()),
      static_cast<uint32_t>(reinterpret_cast<uintptr_t>(reinterpret_cast<void*>(pthread_self()))),
      t.slots[kRuntimeInterface].data(),
      t.slots[kIntegrity].data(),
      t.slots[kIntegrity][1],
      unix_seconds,
  };
  const auto answer = export_tables::integrity_answer(in, devices);
  std::memcpy(result, answer.data(), sizeof answer);
  VMCUDA_LOG(kDebug, "api", "integrity check: version %u, time %llu, driver %d, %d devices", version,
             static_cast<unsigned long long>(unix_seconds), driver, count);
  return cu::kSuccess;
}

}  // namespace

void run_context_storage_destructors(CUcontext ctx) noexcept {
  std::vector<std::pair<void*, StorageEntry>> gone;
  {
    auto& s = storage();
    std::lock_guard l(s.mu);
    for (auto it = s.entries.lower_bound({ctx, nullptr}); it != s.entries.end() && it->first.first == ctx;) {
      gone.emplace_back(it->first.second, it->second);
      it = s.entries.erase(it);
    }
  }
  for (const auto& [key, e] : gone)
    if (e.destructor) e.destructor(ctx, key, e.value);
}

}  // namespace vmcuda::guest

// ------------------------------------------------------------------ the entry point

namespace {
// A table by its UUID. `warn_unknown`: an unknown one is logged once per UUID (a library
// asking the driver for a table vmcuda does not serve is worth knowing; a program probing
// through the runtime's door is not).
CUresult export_table(const void** table, const CUuuid* id, bool warn_unknown) {
  using namespace vmcuda::guest;
  if (!table || !id) return vmcuda::cu::kInvalidValue;
  const auto* u = reinterpret_cast<const unsigned char*>(id->bytes);
  for (int i = 0; i < kTableCount; ++i)
    if (std::memcmp(kTables[i].uuid.data(), u, 16) == 0) {
      *table = tables().slots[i].data();
      VMCUDA_LOG(kDebug, "api", "cuGetExportTable(%s): the %s table", uuid_text(u).c_str(), kTables[i].name);
      return vmcuda::cu::kSuccess;
    }
  *table = nullptr;
  if (std::memcmp(kRefused.data(), u, 16) == 0) {
    VMCUDA_LOG(kInfo, "api", "cuGetExportTable(%s): refused on purpose (docs/driver-export-tables.md)",
               uuid_text(u).c_str());
    return vmcuda::cu::kInvalidValue;
  }
  if (!warn_unknown) return vmcuda::cu::kInvalidValue;
  // One line per UUID (a program may ask again and again).
  static std::mutex mu;
  static std::vector<Uuid> seen;
  Uuid key;
  std::memcpy(key.data(), u, 16);
  {
    std::lock_guard l(mu);
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) return vmcuda::cu::kInvalidValue;
    seen.push_back(key);
  }
  VMCUDA_LOG(kWarn, "api",
             "cuGetExportTable: unknown table %s; it returns CUDA_ERROR_INVALID_VALUE (docs/driver-export-tables.md "
             "lists the tables vmcuda serves)",
             uuid_text(u).c_str());
  return vmcuda::cu::kInvalidValue;
}
}  // namespace

CU_API CUresult cuGetExportTable(const void** table, const CUuuid* id) { return export_table(table, id, true); }

// The runtime's door to the same tables (cudaGetExportTable, private: NVIDIA's libraries
// built against the runtime ask through it).
cudaError_t cudaGetExportTable(const void** ppExportTable, const cudaUUID_t* pExportTableId) {
  // The driver's answers are the runtime's numbers (invalid value 1).
  return vmcuda::guest::record(static_cast<cudaError_t>(export_table(ppExportTable, pExportTableId, false)));
}
