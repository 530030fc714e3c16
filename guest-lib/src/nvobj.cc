// nvobj.h: the guest side shared by cuSPARSE and cuSOLVER.
#include "nvobj.h"

#include "stream_event.h"

namespace vmcuda::guest::nvobj {

std::unique_ptr<Handle> Registry::make(int type) {
  auto h = std::make_unique<Handle>();
  h->wire = handles::next();
  h->type = type;
  return h;
}

int stream_handle(cudaStream_t stream, uint64_t* wire) noexcept {
  return stream_wire_handle(stream, false, wire) == cudaSuccess ? 0 : 1;
}

}  // namespace vmcuda::guest::nvobj
