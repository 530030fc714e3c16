// Module calls (calls.def, 0x1300): fatbins shipped once, kernels and their parameter
// layouts (cuFuncGetParamInfo, once per kernel; docs/cuda-runtime-internals.md §3).
#include <cstring>
#include <span>
#include <vector>

#include "session.h"

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

int32_t Session::on_ModuleLoad(const api::ModuleLoadArgs& a, api::HandleReply& r, Request& req) {
  auto image = req.ctx.heap(a.image);
  if (!image) return guest_fault("ModuleLoad: a heap range that is not in the shared heap", ChannelStatus::kBadHeapRef);
  if (image->empty() || image->size() > limits_.max_module_bytes) return CUDA_ERROR_INVALID_VALUE;
  // The driver parses the image: give it a private copy the guest cannot change meanwhile,
  // checked against its own headers (the driver trusts them) and padded with zeros.
  std::vector<std::byte> copy(image->begin(), image->end());
  if (!image_fits(copy)) return CUDA_ERROR_INVALID_IMAGE;
  copy.resize(copy.size() + kImagePad);
  CUmodule m = nullptr;
  if (CUresult e = api_.cuModuleLoadData(&m, copy.data()); e != CUDA_SUCCESS) return e;
  // The image stays with the entry: a resume loads it again.
  r.handle = vol_.next_handle(ObjectKind::Module);
  vol_.add(ObjectKind::Module, current_, r.handle, vol_.context(current_)->id, ModuleObject{m, std::move(copy)});
  return CUDA_SUCCESS;
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
