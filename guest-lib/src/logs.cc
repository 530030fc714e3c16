// Error log management (cudaLogs*, CUDA 12.9): the program's own log, kept by guest-lib
// (program_log.h says what it holds and why not the host driver's). Local calls: no device
// needed, no sticky error.
#include "program_log.h"
#include "runtime_state.h"
#include "vmcuda/cudart_api.h"

namespace program_log = vmcuda::guest::program_log;
using vmcuda::guest::record;

cudaError_t cudaLogsRegisterCallback(cudaLogsCallback_t callbackFunc, void* userData,
                                     cudaLogsCallbackHandle* callback_out) {
  void* handle = nullptr;
  const cudaError_t e = program_log::register_callback(callbackFunc, userData, &handle);
  if (e == cudaSuccess && callback_out) *callback_out = static_cast<cudaLogsCallbackHandle>(handle);
  return record(e);
}

cudaError_t cudaLogsUnregisterCallback(cudaLogsCallbackHandle callback) {
  return record(program_log::unregister_callback(callback));
}

cudaError_t cudaLogsCurrent(cudaLogIterator* iterator_out, unsigned int flags) {
  return record(program_log::current(iterator_out, flags));
}

cudaError_t cudaLogsDumpToFile(cudaLogIterator* iterator, const char* pathToFile, unsigned int flags) {
  return record(program_log::dump_to_file(iterator, pathToFile, flags));
}

cudaError_t cudaLogsDumpToMemory(cudaLogIterator* iterator, char* buffer, size_t* size, unsigned int flags) {
  return record(program_log::dump_to_memory(iterator, buffer, size, flags));
}
