// vmcuda-stub: the host daemon on the real CUDA driver (libcuda.so.1, loaded at run time).
#include "stub_main.h"

int main(int argc, char** argv) { return vmcuda::host::stub_main(argc, argv, nullptr); }
