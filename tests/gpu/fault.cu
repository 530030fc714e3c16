extern "C" __global__ void fault(int* p) { *p = 1; }
