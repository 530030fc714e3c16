// A stub's one served slot driven through the endpoint's control path, as vmcuda-stub
// drives it for suspend, resume, save and restore (suspend_test.cc, stub_modules_test.cc).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "client_control.h"
#include "host-stub/stub_fixture.h"
#include "state_stream.h"

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

// The records of state file `from` copied to `to`, each object record's payload (or each
// record of type `type`: 1 the client's header) through `edit` (which may change it).
inline void rewrite_state(const std::string& from, const std::string& to,
                   const std::function<void(std::vector<std::byte>&)>& edit, uint32_t type = 3 /* kObjectRecord */) {
  state::FileSource in(from);
  state::FileSink out(to);
  state::RecordHeader h{};
  std::string why;
  std::vector<std::byte> payload;
  while (in.next(&h, &why)) {
    if (!h.is_blob()) {
      ASSERT_TRUE(in.read_payload(&payload, &why)) << why;
      if (h.type == type) edit(payload);
      ASSERT_TRUE(out.put_record(h.type, h.id, payload)) << out.error();
      continue;
    }
    ASSERT_TRUE(out.begin_blob(h.type, h.id, h.payload_bytes)) << out.error();
    for (;;) {
      std::span<const std::byte> chunk;
      ASSERT_TRUE(in.read_chunk_view(&chunk, &why)) << why;
      if (chunk.empty()) break;
      std::span<std::byte> buf = out.acquire(chunk.size());
      ASSERT_EQ(buf.size(), chunk.size()) << out.error();
      std::memcpy(buf.data(), chunk.data(), chunk.size());
      ASSERT_TRUE(out.commit(buf)) << out.error();
    }
    ASSERT_TRUE(out.end_blob()) << out.error();
  }
  ASSERT_TRUE(why.empty()) << why;
  ASSERT_TRUE(out.finish(&why)) << why;
}

// A forged state file: what one case changes (rewrite_state's edit) and what the refusal names.
struct Forgery {
  const char* what;
  std::function<void(std::vector<std::byte>&)> edit;
  const char* expect;
};

// Each forgery of the good state file `path`, written to `bad`, is refused by a restore naming
// its `expect`, and the client stays suspended; `check` then asserts what the test's kind of
// object must show (nothing of it made again).
inline void expect_forgeries_refused(Stub& stub, const std::string& path, const std::string& bad,
                                     std::span<const Forgery> cases,
                                     const std::function<void(const cc::Reply&)>& check) {
  for (const Forgery& k : cases) {
    SCOPED_TRACE(k.what);
    state::remove_state_file(bad);
    ASSERT_NO_FATAL_FAILURE(rewrite_state(path, bad, k.edit));
    const cc::Reply reply = control(stub, cc::Op::kRestore, bad);
    EXPECT_FALSE(reply.ok);
    EXPECT_NE(reply.error.find(k.expect), std::string::npos) << reply.error;
    EXPECT_TRUE(reply.status.suspended);
    check(reply);
  }
}

}  // namespace vmcuda::host::test::slot_control
