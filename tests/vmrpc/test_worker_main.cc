// A worker process for the endpoint's worker-mode tests: serves one slot with the test
// service (tests/support/test_service.h).
#include "support/test_service.h"
#include "vmrpc/worker.h"

int main(int argc, char** argv) {
  vmrpc::testing::TestService service;
  return vmrpc::run_worker(argc, argv, service);
}
