#include "vmcuda/api/calls.h"

namespace vmcuda::api {

const char* call_name(uint32_t number) {
  switch (static_cast<Call>(number)) {
#define VMCUDA_CALL(number, name, args, reply, flags) \
  case Call::name:                                        \
    return #name;
#include "vmcuda/api/calls.def"
#undef VMCUDA_CALL
  }
  return "an unknown call";
}

}  // namespace vmcuda::api
