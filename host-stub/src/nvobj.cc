// What cuSPARSE and cuSOLVER share on the host (nvobj.h): why a suspend is
// refused while their objects exist.
#include "nvobj.h"

namespace vmcuda::host {

std::string Session::nvobj_blocks_suspend() const {
  const size_t sparse = vol_.count(ObjectKind::Cusparse), solver = vol_.count(ObjectKind::Cusolver);
  if (sparse + solver == 0) return {};
  return "the client holds " + std::to_string(sparse) + " cuSPARSE handles or descriptors and " +
         std::to_string(solver) +
         " cuSOLVER handles or parameter objects, which a suspend cannot carry yet; destroy them (cusparseDestroy*, "
         "cusolverDnDestroy*) and suspend again, or end the program";
}

}  // namespace vmcuda::host
