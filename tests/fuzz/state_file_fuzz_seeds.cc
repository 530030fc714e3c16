// Writes the seed corpus of state_file_fuzz into a folder: small valid state streams made by
// MemorySink (empty; metadata records; blobs in many small chunks; an empty blob), and
// striped state files made by FileSink (1 and 3 stripes of 4 KiB units, in the fuzzer's
// "VMSTRIPE" form), so the fuzzer starts from the real format and follows it when it changes.
//
//   state_file_fuzz_seeds DIR
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "state_stream.h"

namespace {

using namespace vmcuda::host::state;

std::string g_dir;

void save(const std::string& name, MemorySink& sink) {
  std::string why;
  if (!sink.finish(&why)) {
    std::fprintf(stderr, "state_file_fuzz_seeds: %s: %s\n", name.c_str(), why.c_str());
    std::exit(1);
  }
  std::vector<std::byte> b = sink.take_stream()->flatten();
  const std::string path = g_dir + "/seed-state-" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(b.data(), 1, b.size(), f) != b.size() || std::fclose(f) != 0) {
    std::perror(path.c_str());
    std::exit(1);
  }
}

std::vector<std::byte> pattern(size_t n) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::byte(i * 7 + 1);
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  g_dir = argv[1];
  SinkOptions small;
  small.staging_bytes = 64;  // many chunks in a small file
  small.creator = "vmcuda-stub seeds";
  {
    MemorySink s(small);
    save("empty", s);
  }
  {
    MemorySink s(small);
    ByteWriter w;
    w.put_u8(1);
    w.put_string("context");
    w.put_u32(0);
    w.put_bytes(pattern(5));
    w.put_u64(0x7f0000000000ull);
    w.put_i32(-1);
    s.put_record(1, 1, w.bytes());
    s.put_record(2, 2, {});
    save("records", s);
  }
  {
    MemorySink s(small);
    s.put_record(1, 1, pattern(20));
    s.put_blob(2, 7, pattern(300));
    s.put_blob(3, 8, {});
    s.put_record(4, 3, pattern(3));
    save("blobs", s);
  }
  {
    // A client's virtual memory records as suspend.cc writes them (object records, type 3:
    // a reservation, a physical allocation, a mapping with its access list), then the
    // allocation's bytes as a blob of their own (kVmmData, type 8) and the client's end.
    MemorySink s(small);
    auto object = [](uint8_t kind, uint64_t id, uint64_t parent, uint64_t handle) {
      ByteWriter w;
      w.put_u8(kind);
      w.put_u64(id);
      w.put_u64(parent);
      w.put_i32(0);
      w.put_u64(handle);
      return w;
    };
    ByteWriter res = object(21, 2, 0, 0x500000200000ull);
    res.put_u64(8ull << 21);
    s.put_record(3, 2, res.bytes());
    ByteWriter alloc = object(22, 3, 1, 1);
    alloc.put_u64(1ull << 21);
    alloc.put_u32(2);
    s.put_record(3, 3, alloc.bytes());
    ByteWriter map = object(23, 4, 2, 0x500000200000ull);
    map.put_u64(1ull << 21);
    map.put_u64(0);
    map.put_u64(3);
    map.put_u32(1);
    map.put_i32(0);
    map.put_u32(3);
    s.put_record(3, 4, map.bytes());
    s.put_blob(8, 3, pattern(700));
    s.put_record(6, 0, {});
    save("vmm", s);
  }
  {
    // IPC between a VM's programs as suspend.cc writes it (state version 9): an importer's
    // opened memory (object record of kind IpcMemory: token, its mapping's VA, the mapping's
    // and the allocation's bytes, opens), an event opened from another program (flags,
    // time, imported mark, token) and an exporter's kIpcExports record (type 9: count, then
    // kind, what, device, token per export), then the client's end.
    MemorySink s(small);
    auto object = [](uint8_t kind, uint64_t id, uint64_t parent, uint64_t handle) {
      ByteWriter w;
      w.put_u8(kind);
      w.put_u64(id);
      w.put_u64(parent);
      w.put_i32(0);
      w.put_u64(handle);
      return w;
    };
    ByteWriter mem = object(24, 2, 1, 0x508000000040ull);
    mem.put_u64(0x0123456789abcdefull);  // token
    mem.put_u64(0xfedcba9876543210ull);
    mem.put_u64(0x508000000000ull);
    mem.put_u64(2ull << 20);
    mem.put_u64(256);
    mem.put_u32(1);
    s.put_record(3, 2, mem.bytes());
    ByteWriter ev = object(8, 3, 1, 20);
    ev.put_u32(0x6);  // CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS
    ev.put_u64(0x7ff8000000000000ull);  // NaN: no time
    ev.put_u8(1);
    ev.put_u64(0x1111111111111111ull);
    ev.put_u64(0x2222222222222222ull);
    s.put_record(3, 3, ev.bytes());
    ByteWriter ex;
    ex.put_u32(3);
    for (uint8_t kind = 1; kind <= 3; ++kind) {
      ex.put_u8(kind);
      ex.put_u64(kind == 1 ? 0x500000000200ull : kind == 2 ? 10 : 0x7f0000000100ull);
      ex.put_i32(0);
      ex.put_u64(0x3333333333333333ull * kind);
      ex.put_u64(0x4444444444444444ull * kind);
    }
    s.put_record(9, 0, ex.bytes());
    s.put_record(6, 0, {});
    save("ipc", s);
  }
  {
    // A cuSPARSE handle as suspend.cc writes it (state version 10): an object record of kind
    // Cusparse (29) with its type (0: the handle) and its steps (seq, call number, the call's
    // wire arguments): cusparseCreate (0x2400) and cusparseSetPointerMode (0x2404).
    MemorySink s(small);
    ByteWriter h;
    h.put_u8(29);
    h.put_u64(2);
    h.put_u64(1);
    h.put_i32(0);
    h.put_u64(0x7000);
    h.put_i32(0);
    h.put_u32(2);
    h.put_u64(0);
    h.put_u32(0x2400);
    ByteWriter create;
    create.put_u64(0x7000);
    h.put_bytes(create.bytes());
    h.put_u64(1);
    h.put_u32(0x2404);
    ByteWriter mode;
    mode.put_u64(0x7000);
    mode.put_i32(1);
    mode.put_u32(0);
    h.put_bytes(mode.bytes());
    s.put_record(3, 2, h.bytes());
    s.put_record(6, 0, {});
    save("cusparse", s);
  }
  // Striped sets: FileSink's files, packed as the fuzzer reads them.
  for (unsigned stripes : {1u, 3u}) {
    char templ[] = "/tmp/state_file_fuzz_seeds.XXXXXX";
    if (!::mkdtemp(templ)) {
      std::perror("mkdtemp");
      return 1;
    }
    const std::string path = std::string(templ) + "/client.state";
    SinkOptions o = small;
    o.staging_bytes = 2048;  // chunks crossing the units; few enough records for the fuzzer's limit
    o.stripes = stripes;
    o.stripe_unit = 4096;
    {
      FileSink s(path, o);
      s.put_record(1, 1, pattern(20));
      s.put_blob(2, 7, pattern(2 * 4096 + 300));
      s.put_record(4, 3, pattern(3));
      std::string why;
      if (!s.finish(&why)) {
        std::fprintf(stderr, "state_file_fuzz_seeds: striped: %s\n", why.c_str());
        return 1;
      }
    }
    std::string packed = "VMSTRIPE";
    packed += char(stripes - 1);
    for (unsigned k = 0; k < stripes; ++k) {
      const std::string f = stripe_path(path, k);
      FILE* in = std::fopen(f.c_str(), "rb");
      std::string bytes;
      char buf[4096];
      for (size_t n; in && (n = std::fread(buf, 1, sizeof buf, in)) > 0;) bytes.append(buf, n);
      if (in) std::fclose(in);
      const uint32_t len = uint32_t(bytes.size());
      packed.append(reinterpret_cast<const char*>(&len), 4);
      packed += bytes;
    }
    remove_state_file(path);
    ::rmdir(templ);
    const std::string out = g_dir + "/seed-state-striped-" + std::to_string(stripes);
    FILE* f = std::fopen(out.c_str(), "wb");
    if (!f || std::fwrite(packed.data(), 1, packed.size(), f) != packed.size() || std::fclose(f) != 0) {
      std::perror(out.c_str());
      return 1;
    }
  }
  return 0;
}
