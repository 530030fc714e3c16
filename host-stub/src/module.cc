// Module calls (calls.def, 0x1300): fatbins shipped once, kernels and their parameter
// layouts (cuFuncGetParamInfo, once per kernel; docs/cuda-runtime-internals.md §3).
#include <algorithm>
#include <cstring>
#include <span>
#include <vector>

#include "image_cache.h"
#include "module_symbols.h"
#include "session.h"
#include "vmrpc/log.h"

namespace vmcuda::host {

using vmrpc::wire::ChannelStatus;

namespace {

template <class T>
T read_at(std::span<const std::byte> b, uint64_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof v);
  return v;
}

// The driver is not told an image's size (cuModuleLoadData): it reads as far as the image's
// own headers say. Whether those stay inside the `image` bytes the guest sent: a fatbin's
// header (docs/cuda-runtime-internals.md §2: header_size + fat_size) and each entry's header
// and payload sizes; an ELF's section and program header tables. Other images (PTX text)
// are read up to a NUL, which the padded copy provides.
bool image_fits(std::span<const std::byte> image) {
  const uint64_t n = image.size();
  if (n >= 4 && read_at<uint32_t>(image, 0) == 0xBA55ED50u) {
    if (n < 16) return false;
    const uint64_t header = read_at<uint16_t>(image, 6), fat = read_at<uint64_t>(image, 8);
    if (header < 16 || header > n || fat > n - header) return false;
    const uint64_t end = header + fat;
    for (uint64_t off = header; off < end;) {  // entries: {u16 kind, u16, u32 header, u64 payload, ...}
      if (end - off < 16) return false;
      const uint64_t eh = read_at<uint32_t>(image, off + 4), payload = read_at<uint64_t>(image, off + 8);
      if (eh < 16 || eh > end - off || payload > end - off - eh) return false;
      off += eh + payload;
    }
    return true;
  }
  if (n >= 4 && std::memcmp(image.data(), "\x7f" "ELF", 4) == 0) {
    if (n < 64 || static_cast<uint8_t>(image[4]) != 2) return false;  // ELF64 only (sm_90 cubins)
    auto table_fits = [&](uint64_t off, uint64_t count, uint64_t entry) {
      return count == 0 || (off <= n && entry != 0 && count <= (n - off) / entry);
    };
    return table_fits(read_at<uint64_t>(image, 0x28), read_at<uint16_t>(image, 0x3c), read_at<uint16_t>(image, 0x3a)) &&
           table_fits(read_at<uint64_t>(image, 0x20), read_at<uint16_t>(image, 0x38), read_at<uint16_t>(image, 0x36));
  }
  return true;
}

// Zero bytes after the private copy: the driver sniffs the first bytes of any image (its
// magic, an ELF header) and reads PTX text up to a NUL.
constexpr size_t kImagePad = 64;

}  // namespace

// What a module costs the VM (its quota, vm_ledger.h). The driver reports no module's device
// footprint, so the charge is what the stub can know for certain:
//  - the image's bytes (the padded copy): the stub keeps it in host memory for as long as
//    the module is loaded (a suspend saves it, a resume loads it again); also when it comes
//    from the image cache (image_cache.h), which the VM's clients share: a hit saves the
//    crossing and the copy, and is charged the same, so a VM's quota never depends on
//    what other clients loaded before (nor tells it). The module's
//    code on the device comes from it (the cubin of the device's architecture, or code
//    compiled from its PTX), so the image's size also stands for the code;
//  - each of its __device__, __constant__ and __managed__ variables at its size as the
//    driver reports it (cuModuleGetGlobal of every data symbol the image names:
//    module_symbols.h), the module's data on the device.
// Not counted: the driver's own rounding of module memory and what a compressed fatbin entry
// hides (its variables are not read). Measuring free device memory around the load
// (cuMemGetInfo) would count other tenants' allocations made meanwhile, so it is not used.
CUresult Session::load_module_charged(ModuleObject& m) {
  const uint64_t image_bytes = m.image->size();
  auto refused = [&](uint64_t asked, uint64_t variables) {
    constexpr uint32_t kLogged = 8;  // a guest that retries in a loop cannot fill the log
    if (module_refusals_ < kLogged)
      VMRPC_LOG(kWarn, "stub", log_tag_ + ": a module load is refused: the VM's device memory quota (" +
                                   std::to_string(memory_quota() >> 20) + " MiB, " +
                                   std::to_string(limits_.ledger ? limits_.ledger->used() >> 20 : 0) +
                                   " MiB in use) has no room for its " + std::to_string(asked) + " bytes (image " +
                                   std::to_string(image_bytes) + ", variables " + std::to_string(variables) +
                                   "); the program gets CUDA_ERROR_OUT_OF_MEMORY (vmcuda-stub --memory-quota-mib, "
                                   "or the VM's policy)" +
                                   (module_refusals_ + 1 == kLogged ? "; further ones are not logged" : ""));
    ++module_refusals_;
    return CUDA_ERROR_OUT_OF_MEMORY;
  };
  // The image first: a load that cannot fit is refused before the driver parses anything.
  if (account_ && !account_->charge(image_bytes)) return refused(image_bytes, 0);
  if (CUresult e = api_.cuModuleLoadData(&m.module, m.image->data()); e != CUDA_SUCCESS) {
    if (account_) account_->refund(image_bytes);
    m.module = nullptr;
    return e;
  }
  uint64_t variables = 0;
  for (const std::string& name : module_data_symbols(m.image->span()).names) {
    CUdeviceptr ptr = 0;
    size_t bytes = 0;
    // Not found: a variable of another architecture's code than the one the driver loaded.
    if (api_.cuModuleGetGlobal_v2(&ptr, &bytes, m.module, name.c_str()) == CUDA_SUCCESS) variables += bytes;
  }
  if (account_ && variables && !account_->charge(variables)) {
    api_.cuModuleUnload(m.module);
    m.module = nullptr;
    account_->refund(image_bytes);
    return refused(image_bytes + variables, variables);
  }
  m.charged = image_bytes + variables;
  module_bytes_ += m.charged;
  return CUDA_SUCCESS;
}

int32_t Session::on_ModuleLoad(const api::ModuleLoadArgs& a, api::HandleReply& r, Request& req) {
  auto image = req.ctx.heap(a.image);
  if (!image) return guest_fault("ModuleLoad: a heap range that is not in the shared heap", ChannelStatus::kBadHeapRef);
  if (image->empty() || image->size() > limits_.max_module_bytes) return CUDA_ERROR_INVALID_VALUE;
  // The driver parses the image: give it a private copy the guest cannot change meanwhile,
  // checked against its own headers (the driver trusts them) and padded with zeros.
  std::vector<std::byte> copy(image->begin(), image->end());
  if (!image_fits(copy)) return CUDA_ERROR_INVALID_IMAGE;
  const uint64_t bytes = copy.size();
  copy.resize(bytes + kImagePad);
  ModuleObject m;
  m.image = ImageBytes::copy(std::move(copy));
  if (CUresult e = load_module_charged(m); e != CUDA_SUCCESS) return e;
  // Loaded: the cache keeps it (only images the driver took: a guest cannot fill it with
  // junk). Its key is the hash of the bytes received here, whatever the guest may have
  // claimed in a ModuleLoadCached before: no guest chooses what another loads under a key.
  if (limits_.image_cache) {
    const Sha256 hash = sha256(m.image->span().first(bytes));
    m.image = limits_.image_cache->store(hash, bytes, std::move(m.image));
  }
  return list_module(std::move(m), r.handle);
}

// A module from the image cache (calls.def 0x1330): on a hit, as ModuleLoad of the cached
// bytes, charged to the VM the same (the image's bytes and variables: a hit saves the
// crossing and the host memory of a copy, not the VM's quota); on a miss, hit 0 and nothing
// loaded: the guest sends the image (ModuleLoad).
int32_t Session::on_ModuleLoadCached(const api::ModuleLoadCachedArgs& a, api::ModuleLoadCachedReply& r, Request&) {
  r = {};
  if (a.bytes == 0 || a.bytes > limits_.max_module_bytes) return CUDA_ERROR_INVALID_VALUE;
  if (!limits_.image_cache) return CUDA_SUCCESS;  // a miss: no cache here
  Sha256 hash;
  std::memcpy(hash.data(), a.sha256, hash.size());
  ModuleObject m;
  m.image = limits_.image_cache->find(hash, a.bytes);
  if (!m.image) return CUDA_SUCCESS;
  r.hit = 1;
  if (CUresult e = load_module_charged(m); e != CUDA_SUCCESS) return e;
  return list_module(std::move(m), r.handle);
}

// A module image from a state stream (a resume, a restore): what a suspend saved is the
// padded copy the load kept, so with a cache the hash of its bytes before the padding finds
// it there (or stores it): resumed clients share one copy again.
std::shared_ptr<const ImageBytes> Session::saved_module_image(std::vector<std::byte> saved) {
  if (saved.empty()) return nullptr;
  const bool padded = saved.size() > kImagePad &&
                      std::all_of(saved.end() - kImagePad, saved.end(), [](std::byte b) { return b == std::byte{0}; });
  if (padded && limits_.image_cache) {
    const uint64_t bytes = saved.size() - kImagePad;
    const Sha256 hash = sha256(std::span<const std::byte>(saved).first(bytes));
    return limits_.image_cache->store(hash, bytes, ImageBytes::copy(std::move(saved)));
  }
  // The driver reads PTX up to a NUL: never past the copy (one from elsewhere gets a NUL).
  if (saved.back() != std::byte{0}) saved.push_back(std::byte{0});
  return ImageBytes::copy(std::move(saved));
}

// Lists loaded module `m` in the current context; the handle in `handle`.
int32_t Session::list_module(ModuleObject m, uint64_t& handle) {
  // The image stays with the entry: a resume loads it again.
  handle = vol_.next_handle(ObjectKind::Module);
  vol_.add(ObjectKind::Module, current_, handle, vol_.context(current_)->id, std::move(m));
  publish_status();
  return CUDA_SUCCESS;
}

// cuModuleUnload, cuLibraryUnload: the module and everything found in it (functions,
// variables, managed variables) go; release() pays the VM back.
int32_t Session::on_ModuleUnload(const api::ModuleArgs& a, api::Empty&, Request&) {
  const Object* mod = vol_.find(ObjectKind::Module, a.module);
  if (!mod) return CUDA_ERROR_INVALID_HANDLE;
  // A graph's kernel nodes name the driver's functions, which the host does not trace back
  // to their modules: while the client holds a graph (or captures one) its modules stay, so
  // that no graph launches code that is gone. They are unloaded with the client.
  if (const size_t graphs = vol_.count(ObjectKind::Graph) + vol_.count(ObjectKind::GraphExec);
      graphs || captures_open_) {
    if (!said_unload_with_graphs_)
      VMRPC_LOG(kWarn, "stub", log_tag_ + ": cuModuleUnload while the program holds " + std::to_string(graphs) +
                                   " graph(s) or captures one is refused (CUDA_ERROR_NOT_PERMITTED): destroy its "
                                   "graphs first; the module stays loaded until then or the program's end");
    said_unload_with_graphs_ = true;
    return CUDA_ERROR_NOT_PERMITTED;
  }
  // Kernels of it may still run or wait in streams: they finish first. An error of theirs
  // stays the context's (sticky) and reaches the program at its next synchronizing call.
  on_device(mod->device, [&] { return api_.cuCtxSynchronize(); });
  const CUresult e = destroy_entry(ObjectKind::Module, a.module, CUDA_ERROR_INVALID_HANDLE);
  publish_status();
  return e;
}

int32_t Session::on_ModuleGetFunction(const api::GetFunctionArgs& a, api::GetFunctionReply& r, Request& req) {
  const Object* mod = find_module_here(a.module);
  if (!mod) return CUDA_ERROR_INVALID_HANDLE;
  if (a.name_bytes == 0 || a.name_bytes > limits_.max_name_bytes || a.name_bytes != req.tail.size())
    return guest_fault("ModuleGetFunction: a function name of the wrong length");
  const std::string name(reinterpret_cast<const char*>(req.tail.data()), req.tail.size());
  if (name.find('\0') != std::string::npos) return guest_fault("ModuleGetFunction: a function name with a NUL byte");
  FunctionObject f{nullptr, name, {}};
  if (CUresult e = api_.cuModuleGetFunction(&f.fn, mod->as<ModuleObject>().module, name.c_str()); e != CUDA_SUCCESS)
    return e;
  // There is no count API: ask until the driver says there is no such parameter.
  for (size_t i = 0; i < api::kMaxKernelParams; ++i) {
    size_t off = 0, size = 0;
    if (api_.cuFuncGetParamInfo(f.fn, i, &off, &size) != CUDA_SUCCESS) break;
    f.params.push_back({static_cast<uint32_t>(off), static_cast<uint32_t>(size)});
  }
  const size_t bytes = f.params.size() * sizeof(api::ParamInfo);
  if (bytes > req.extra.size()) return guest_fault("ModuleGetFunction: a reply area too small for the data", ChannelStatus::kReplyTooSmall);
  if (bytes) std::memcpy(req.extra.data(), f.params.data(), bytes);
  req.extra_bytes = static_cast<uint32_t>(bytes);
  r.param_count = static_cast<uint32_t>(f.params.size());
  r.function = vol_.next_handle(ObjectKind::Function);
  vol_.add(ObjectKind::Function, current_, r.function, mod->id, std::move(f));
  return CUDA_SUCCESS;
}

}  // namespace vmcuda::host
