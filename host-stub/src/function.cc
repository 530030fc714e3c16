// Function attributes and occupancy (calls.def, 0x1410), of a kernel this client found
// with ModuleGetFunction; each runs in the context of the device the kernel was loaded on.
// The guest caches the answers (per kernel and device; occupancy per block size and
// dynamic shared memory too) and drops them when it sets an attribute. The occupancy queries
// are plain calls (plain_calls.def).
#include "session.h"

namespace vmcuda::host {

namespace {
// cudaFuncAttribute's values: the settable CUfunction_attributes.
constexpr bool settable(int32_t attribute) {
  return attribute >= CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES &&
         attribute <= CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE;
}
}  // namespace

int32_t Session::on_FuncGetAttributes(const api::FunctionArgs& a, api::FuncAttributesReply& r, Request&) {
  const Object* fo = find_function(a.function);
  if (!fo) return CUDA_ERROR_INVALID_HANDLE;
  static_assert(api::kFuncAttributeSlots == CU_FUNC_ATTRIBUTE_MAX);
  const CUfunction fn = fo->as<FunctionObject>().fn;
  return on_device(fo->device, [&] {
    for (int i = 0; i < CU_FUNC_ATTRIBUTE_MAX; ++i) {
      CUresult e = api_.cuFuncGetAttribute(&r.values[i], i, fn);
      if (e == CUDA_SUCCESS) continue;
      // The attributes cudaFuncAttributes has always had must answer; the cluster ones
      // (10 and up) are 0 where the device or driver knows none.
      if (i < 10) return e;
      r.values[i] = 0;
    }
    return CUDA_SUCCESS;
  });
}

int32_t Session::on_FuncSetAttribute(const api::FuncSetAttributeArgs& a, api::Empty&, Request&) {
  const Object* fo = find_function(a.function);
  if (!fo) return CUDA_ERROR_INVALID_HANDLE;
  if (!settable(a.attribute)) return CUDA_ERROR_INVALID_VALUE;
  // The driver checks the value (the dynamic shared memory against the device's opt-in
  // maximum less the kernel's static shared memory, ...).
  const CUfunction fn = fo->as<FunctionObject>().fn;
  const CUresult e = on_device(fo->device, [&] { return api_.cuFuncSetAttribute(fn, a.attribute, a.value); });
  if (e == CUDA_SUCCESS) vol_.find(ObjectKind::Function, a.function)->as<FunctionObject>().attributes[a.attribute] = a.value;
  return e;
}

}  // namespace vmcuda::host
