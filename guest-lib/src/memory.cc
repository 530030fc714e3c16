// memory area: allocations, copies, arrays and channel descriptors.
#include "runtime_state.h"
#include "vmcuda/cudart_api.h"

// Pure data: NVIDIA's checks nothing either (cudaCreateChannelDesc<T>() in the headers
// calls this with the sizes of T's members).
struct cudaChannelFormatDesc cudaCreateChannelDesc(int x, int y, int z, int w, enum cudaChannelFormatKind f) {
  return cudaChannelFormatDesc{x, y, z, w, f};
}
