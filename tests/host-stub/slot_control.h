// A stub's one served slot driven through the endpoint's control path, as vmcuda-stub
// drives it for suspend, resume, save and restore (suspend_test.cc, stub_modules_test.cc).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "client_control.h"
#include "host-stub/stub_fixture.h"

namespace vmcuda::host::test::slot_control {

namespace cc = client_control;
using namespace std::chrono_literals;

// The one served slot of the stub.
inline vmrpc::ServedSlot served(Stub& s) {
  for (int i = 0; i < 200; ++i) {
    auto v = s.endpoint.served_slots();
    if (!v.empty()) return v.front();
    std::this_thread::sleep_for(5ms);
  }
  ADD_FAILURE() << "no served slot";
  return {};
}

inline cc::Reply control(Stub& s, cc::Op op, const std::string& path = {}, std::vector<cc::Progress>* progress = nullptr) {
  const auto slot = served(s);
  std::vector<std::byte> reply;
  std::string why;
  const bool ok = s.endpoint.control_slot(
      slot.connection_id, slot.slot, cc::encode(cc::Request{op, path}), &reply,
      [&](std::span<const std::byte> m) {
        cc::Progress p;
        EXPECT_TRUE(cc::decode(m, &p));
        if (progress) progress->push_back(p);
      },
      &why);
  EXPECT_TRUE(ok) << why;
  cc::Reply r;
  EXPECT_TRUE(cc::decode(reply, &r));
  return r;
}

inline bool hold(Stub& s) {
  const auto slot = served(s);
  std::string why;
  const bool ok = s.endpoint.hold_slot(slot.connection_id, slot.slot, 2000ms, &why);
  EXPECT_TRUE(ok) << why;
  return ok;
}
inline void release(Stub& s) {
  const auto slot = served(s);
  s.endpoint.release_slot(slot.connection_id, slot.slot);
}

}  // namespace vmcuda::host::test::slot_control
