// The state stream: a suspended client's state (device memory contents, module images, the
// object list) as a sequence of checksummed records, kept in host memory (suspend) or in a
// state file (save/restore). DESIGN.md "Suspend/resume".
//
// Format (all integers little-endian, fixed width):
//   header   "VMCUDAST", u32 format version, u32 header bytes, u32 reserved (0),
//            u32 creator bytes, creator (e.g. "vmcuda-stub 0.3"), u64 XXH3 of the bytes before
//   records  {u32 type, u32 flags, u64 id, u64 payload bytes, u64 checksum} + payload; the
//            checksum is XXH3 of the payload seeded with XXH3 of the 24 bytes before it, so it
//            covers the record's own header too
//   blobs    large payloads (device memory, tens of GiB): a record with kFlagBlob whose
//            payload is the u64 total, then chunk records (type kChunkType, id = chunk index,
//            1..kChunkBytes each, own checksum) adding up to exactly the total: a reader
//            verifies chunk by chunk and never holds a whole blob
//   trailer  type kTrailerType, payload {u64 records before it, u64 stream bytes before it,
//            u64 fold of every record checksum}; it is the last byte of the stream, so a
//            truncated or extended stream is refused
// A reader bounds-checks every length against its Limits and the stream's size before use.
//
// A state file (FileSink(path), FileSource(path)) is a striped set of files, RAID-0 style,
// so that the copy threads write different inodes (one tmpfs or page-cache file takes one
// writer at a time): the stream is cut into units of `unit` bytes (4 MiB), unit i is stored
// in stripe i % S at byte kStripeHeaderBytes + (i / S) * unit. Stripe 0 is PATH, stripe k
// PATH.k (StripeLayout, stripe_path()). Each stripe file starts with a 4 KiB header:
//   "VMCUDAST", u32 version 2 (kStripedVersion), u32 header bytes (4096), u32 stripe index,
//   u32 stripe count S (1..kMaxStripes), u64 unit, u64 stream bytes, u64 set id (random,
//   one per save), u64 XXH3 of the 48 bytes before it; zeros to 4096
// so a reader knows S and the unit from stripe 0 before it reads anything else, and each
// stripe's exact size follows from them; a stripe of another save, of another owner, not a
// regular file, or missing is refused. A file whose first bytes are a version 1 stream
// header is a state file written before stripes (the whole file is the stream): still read.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <memory>
#include <pthread.h>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace vmcuda::host::state {

inline constexpr char kMagic[8] = {'V', 'M', 'C', 'U', 'D', 'A', 'S', 'T'};
inline constexpr uint32_t kFormatVersion = 1;
inline constexpr size_t kRecordHeaderBytes = 32;
inline constexpr size_t kChunkBytes = size_t{16} << 20;  // the largest chunk record payload
inline constexpr size_t kMaxCreatorBytes = 256;
// Record types from kFirstReservedType up are the stream's own; callers use the ones below.
inline constexpr uint32_t kFirstReservedType = 0xFFFFFF00u;
inline constexpr uint32_t kChunkType = 0xFFFFFF01u;
inline constexpr uint32_t kTrailerType = 0xFFFFFFFFu;
inline constexpr uint32_t kFlagBlob = 1u;

// The striped state file (above).
inline constexpr uint32_t kStripedVersion = 2;
inline constexpr size_t kStripeHeaderBytes = 4096;
inline constexpr unsigned kMaxStripes = 64;
inline constexpr size_t kDefaultStripeUnit = size_t{4} << 20;  // the suspend ring's slot: a chunk a stripe
inline constexpr size_t kMaxStripeUnit = size_t{256} << 20;

// Where the stream's bytes lie in a set of stripe files.
struct StripeLayout {
  uint64_t header = kStripeHeaderBytes;  // bytes before the data in each stripe file
  uint64_t unit = kDefaultStripeUnit;    // a multiple of 4096
  unsigned count = 1;
  unsigned stripe(uint64_t at) const { return unsigned(at / unit % count); }
  uint64_t file_offset(uint64_t at) const { return header + at / unit / count * unit + at % unit; }
  uint64_t run(uint64_t at) const { return unit - at % unit; }  // bytes from `at` in the same stripe
  // Stripe k's data bytes (and file bytes) in a stream of `stream_bytes`.
  uint64_t data_bytes(unsigned k, uint64_t stream_bytes) const {
    const uint64_t units = stream_bytes / unit, rest = stream_bytes % unit;
    return (units / count + (k < units % count ? 1 : 0)) * unit + (k == units % count ? rest : 0);
  }
  uint64_t file_bytes(unsigned k, uint64_t stream_bytes) const { return header + data_bytes(k, stream_bytes); }
};

// Stripe k's file of the state file `path`: PATH for 0, PATH.k for the others.
std::string stripe_path(const std::string& path, unsigned k);
// Removes the state file `path`: every stripe and .partial file a save may have left (tools
// that remove one client's state; a saved VM's directory goes as a whole).
void remove_state_file(const std::string& path);

// Called at chunk granularity (and for each record) so a CLI can show bytes, rate and time
// left. total_bytes is 0 where it is not known (a sink without expected_bytes).
using Progress = std::function<void(uint64_t done_bytes, uint64_t total_bytes)>;

// Where staging buffers come from: pinned memory (cuMemHostAlloc) lets a GPU copy straight
// into them. Both or neither; default: aligned_alloc with 4 KiB alignment.
struct StagingAllocator {
  std::function<void*(size_t bytes)> alloc;
  std::function<void(void*)> free;
};

// Threads that run jobs (copies and checksums of state chunks) and report them finished in
// the order they were queued: Sink::commit_copy (suspend: a pinned ring into the sink's
// buffers) and the resume's ring (chunks of a Source into a pinned ring, Source::copy_chunk)
// use them. Their stacks come from a StagingAllocator, not from the C library: it keeps freed
// thread stacks mapped, in the top-down area where the driver reserves a context's address
// ranges, and a context created later (the resume's) would place module data elsewhere
// (measured on the H100: 480 MiB lower).
class CopyThreads {
 public:
  // Up to `threads` threads (fewer where they cannot start; 0: run() works inline). An
  // empty allocator: aligned_alloc.
  CopyThreads(unsigned threads, StagingAllocator stacks = {});
  CopyThreads(const CopyThreads&) = delete;
  CopyThreads& operator=(const CopyThreads&) = delete;
  ~CopyThreads();  // runs what is queued, then joins
  size_t size() const { return threads_.size(); }
  // Queues `job` (runs it here with no threads); returns its ticket: 1, 2, ...
  uint64_t run(std::function<void()> job);
  // Returns once the job with `ticket` and every one before it finished.
  void wait(uint64_t ticket);
  // Whether they have, without waiting.
  bool finished(uint64_t ticket);

 private:
  static constexpr size_t kStackBytes = size_t{1} << 20;
  void work();
  StagingAllocator stacks_;
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<std::pair<uint64_t, std::function<void()>>> queue_;
  std::set<uint64_t> done_out_of_order_;
  uint64_t next_ticket_ = 1;
  uint64_t done_below_ = 1;  // every ticket below it finished
  bool stop_ = false;
  std::vector<pthread_t> threads_;
  std::vector<void*> thread_stacks_;
};

struct SinkOptions {
  std::string creator = "vmcuda-stub";
  StagingAllocator allocator;
  Progress progress;
  uint64_t expected_bytes = 0;  // for progress only: the total it reports
  // FileSink: the ring of staging buffers the producer fills while earlier ones are written.
  size_t staging_buffers = 4;
  size_t staging_bytes = kChunkBytes;  // the largest acquire()
  // Threads for commit_copy(): chunks checksummed in parallel and copied into the sink's
  // buffers (MemorySink) or written at their offsets in the file (FileSink). 0: commit_copy
  // works inline.
  unsigned copy_threads = 0;
  // FileSink: how commit_copy()'s chunks reach the file, each at its own offset, several at
  // once. kAuto (a file the sink creates; a borrowed fd: kPwrite): on tmpfs, kPwrite into
  // several stripes (each thread mostly writes a file of its own) or kMapped into one (a
  // write() to a tmpfs file holds the file's lock while it copies: one writer at a time,
  // 3-4 GB/s); elsewhere kDirect where the file system takes O_DIRECT, else kPwrite.
  // kMapped: the file is mapped in windows and the copy threads copy into the mapping, each
  // page allocated first by MADV_POPULATE_WRITE, so a full file system is an error, never a
  // SIGBUS (kernels without it: kPwrite; another process truncating the .partial file, mode
  // 0600 and the stub's, would still raise one). kDirect: each chunk's whole 4 KiB blocks are
  // written with O_DIRECT (the file preallocated to expected_bytes, so that ext4 and XFS
  // take them in parallel), its partial first and last blocks buffered. kPwrite: pwritev
  // from the source (buffered writes to one file: one at a time on most file systems).
  enum class FileWrites { kAuto, kMapped, kDirect, kPwrite };
  FileWrites file_writes = FileWrites::kAuto;
  // kMapped: the file is mapped this much at a time (a multiple of 4096); the address range
  // covers expected_bytes and 4 windows more, chunks past it are written with pwritev.
  size_t map_window_bytes = size_t{256} << 20;
  // FileSink(path): stripe files (state file format above). 0: one per copy thread (at least
  // 1, at most kMaxStripes), so that each thread mostly writes a file of its own.
  unsigned stripes = 0;
  size_t stripe_unit = kDefaultStripeUnit;  // a multiple of 4096, up to kMaxStripeUnit
};

// Writes a stream. Single producer. Errors are sticky: after the first failure every call
// returns false (acquire an empty span) and finish() reports that first failure.
class Sink {
 public:
  Sink(const Sink&) = delete;
  Sink& operator=(const Sink&) = delete;
  virtual ~Sink();

  // A small record (metadata), copied.
  bool put_record(uint32_t type, uint64_t id, std::span<const std::byte> payload);

  // A blob of exactly total_bytes, given as chunks: acquire(n) (n <= staging_bytes and <= what
  // is left of the blob) returns a staging buffer; fill it (e.g. a DtoH copy) and commit() it
  // or a prefix of it; one acquired buffer at a time. end_blob() checks the total arrived.
  bool begin_blob(uint32_t type, uint64_t id, uint64_t total_bytes);
  std::span<std::byte> acquire(size_t bytes);
  bool commit(std::span<std::byte> filled);
  bool end_blob();
  // begin_blob + chunks copied from `bytes` + end_blob.
  bool put_blob(uint32_t type, uint64_t id, std::span<const std::byte> bytes);
  // A chunk of the open blob whose bytes lie elsewhere (a pinned ring a DMA filled): copied
  // into a buffer of the sink's and checksummed on one of options.copy_threads threads, so
  // that copies, checksums and the producer's next DMA overlap. Chunks keep their order in
  // the stream. `source` must stay unchanged until wait_copy() of the returned ticket (or
  // of a later one) returns. Returns 0 on failure. Not with an acquired buffer open.
  uint64_t commit_copy(std::span<const std::byte> source);
  // Returns once the chunk with `ticket`, and every one before it, is in the stream.
  bool wait_copy(uint64_t ticket);

  // Writes the trailer and makes the stream durable (FileSink: fsync, rename). False with
  // the reason on any failure, this one's or an earlier call's.
  bool finish(std::string* why);

  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }
  uint64_t bytes_written() const { return stream_bytes_; }  // stream bytes produced so far

 protected:
  explicit Sink(SinkOptions options);
  // Room in front of the payload of a staging buffer for the chunk's record header.
  static constexpr size_t kStagingHeaderRoom = 4096;

  // A buffer with kStagingHeaderRoom + payload_bytes bytes; nullptr after fail().
  virtual std::byte* get_staging(size_t payload_bytes) = 0;
  // Hands back a buffer from get_staging with `stream_bytes` (within it; empty: nothing to
  // write) as the next bytes of the stream.
  virtual bool put_staging(std::byte* buffer, std::span<const std::byte> stream_bytes) = 0;
  // The next bytes of the stream, copied before it returns.
  virtual bool put_copy(std::span<const std::byte> bytes) = 0;
  // After the trailer: make it all durable.
  virtual bool complete() = 0;
  // commit_copy()'s chunks written where they belong by the copy threads themselves (a
  // FileSink) instead of copied into staging buffers put back in order: reserve_chunk() (the
  // producer) claims the next `bytes` of the stream and says where they go; place_chunk()
  // (any thread, several at once) writes the record header and the payload there, the
  // payload hashed as it goes (copy_hashing); chunk_done() (the producer, in stream order)
  // once it is written.
  virtual bool places_chunks() const { return false; }
  virtual bool reserve_chunk(size_t bytes, uint64_t* at);
  virtual bool place_chunk(uint64_t at, std::byte* header, std::span<const std::byte> payload, uint64_t* checksum,
                           std::string* error) const;
  virtual void chunk_done(size_t bytes);
  // Copies `n` bytes from src to dest (dest null: hashes only) piece by piece, each piece
  // hashed (XXH3 seeded with `seed`) just before its copy reads it from the cache; returns the hash.
  static uint64_t copy_hashing(std::byte* dest, const std::byte* src, size_t n, uint64_t seed);
  // A chunk record's header (type, flags, index, bytes) and its checksum seed.
  static uint64_t chunk_header(std::byte* header, uint64_t index, size_t bytes);
  static void set_checksum(std::byte* header, uint64_t checksum);
  // Joins commit_copy()'s threads (a derived destructor: before what they use goes).
  void stop_copies();

  bool fail(std::string message);  // records the first failure; returns false
  void report_progress(uint64_t done_bytes);
  const SinkOptions& options() const { return options_; }
  void* staging_alloc(size_t bytes);
  void staging_free(void* p);

 private:
  bool ensure_header();
  bool emit_record(uint32_t type, uint32_t flags, uint64_t id, std::span<const std::byte> payload);
  bool drain_copies() { return wait_copy(next_ticket_ - 1); }
  struct CopyPool;
  bool check_user_type(uint32_t type, const char* what);

  SinkOptions options_;
  std::string error_;
  bool header_written_ = false;
  bool finished_ = false;
  uint64_t stream_bytes_ = 0;
  uint64_t records_ = 0;
  uint64_t checksum_fold_ = 0;
  // The open blob, if any.
  bool in_blob_ = false;
  uint32_t blob_type_ = 0;
  uint64_t blob_id_ = 0, blob_total_ = 0, blob_done_ = 0, blob_chunks_ = 0;
  std::byte* acquired_ = nullptr;  // staging buffer handed out, not yet committed
  size_t acquired_bytes_ = 0;
  // commit_copy()'s threads: declared last, so they stop before anything they use goes.
  uint64_t next_ticket_ = 1;
  std::unique_ptr<CopyPool> copies_;
};

// A finished stream in host memory: the staging buffers a MemorySink was given, kept as they
// were filled (no copy), and its small records. Shared by MemorySources reading it.
class MemoryStream {
 public:
  // The bytes at `bytes`, not owned: they must outlive every reader.
  static std::shared_ptr<const MemoryStream> borrow(std::span<const std::byte> bytes);
  MemoryStream(const MemoryStream&) = delete;
  MemoryStream& operator=(const MemoryStream&) = delete;
  ~MemoryStream();

  uint64_t size() const { return size_; }
  // Copies [offset, offset + dest.size()); false where that is not all inside the stream.
  bool read(uint64_t offset, std::span<std::byte> dest) const;
  // The bytes in place where they lie in one buffer, else an empty span.
  std::span<const std::byte> view(uint64_t offset, size_t bytes) const;
  std::vector<std::byte> flatten() const;  // one copy of the whole stream (tests, tools)

 private:
  friend class MemorySink;
  MemoryStream() = default;
  struct Segment {
    uint64_t offset = 0;  // in the stream
    const std::byte* data = nullptr;
    size_t bytes = 0;
    void* staging = nullptr;      // a staging buffer holding data, freed with free_
    std::vector<std::byte> copy;  // or the copied small records holding it (or neither: borrowed)
  };
  std::vector<Segment> segments_;
  uint64_t size_ = 0;
  std::function<void(void*)> free_;
};

// Keeps the stream in host memory (suspend). Chunks stay in the staging buffers they were
// filled in, so a restore can copy them to the GPU from there.
class MemorySink final : public Sink {
 public:
  explicit MemorySink(SinkOptions options = {});
  ~MemorySink() override;
  // After a successful finish(): the stream (the sink keeps nothing); nullptr before.
  std::shared_ptr<const MemoryStream> take_stream();

 private:
  std::byte* get_staging(size_t payload_bytes) override;
  bool put_staging(std::byte* buffer, std::span<const std::byte> stream_bytes) override;
  bool put_copy(std::span<const std::byte> bytes) override;
  bool complete() override;
  void close_small_segment();

  std::shared_ptr<MemoryStream> stream_;
  std::vector<std::byte> small_;  // small records not yet a segment
  void* outstanding_ = nullptr;   // the staging buffer handed out, not yet put back
  bool done_ = false;
};

// Writes the stream to a state file (a striped set, above) or an fd. Small records and
// acquire()/commit() chunks go through a ring of options.staging_buffers buffers written in
// order with liburing (plain pwrite where io_uring is unavailable), a write per stripe unit:
// the producer fills one while earlier ones are written, and a buffer is reused only after
// its writes completed. commit_copy() chunks are written by the copy threads, each at its
// offset, in parallel (options.file_writes). finish() fsyncs.
class FileSink final : public Sink {
 public:
  // Writes each stripe as "<its name>.partial" (mode 0600: it holds guest memory) and renames
  // them in finish(), stripe 0 last, so a failed save never leaves a partial file under
  // `path` nor replaces a good one; without a successful finish() the destructor removes the
  // .partial files. Stripes of an earlier save beyond this one's count are removed.
  explicit FileSink(std::string path, SinkOptions options = {});
  // Writes the bare stream (no stripes, no header) into `fd` (borrowed; seekable: a regular
  // file or block device) from its current offset; no rename, nothing removed on failure.
  // finish() fsyncs it.
  explicit FileSink(int fd, SinkOptions options = {});
  ~FileSink() override;
  // How commit_copy()'s chunks are written: "mapped", "direct" or "pwritev" (options.file_writes).
  const char* chunk_writes() const;
  unsigned stripes() const;  // the stripe files written (1 for an fd)

 private:
  struct Impl;
  std::byte* get_staging(size_t payload_bytes) override;
  bool put_staging(std::byte* buffer, std::span<const std::byte> stream_bytes) override;
  bool put_copy(std::span<const std::byte> bytes) override;
  bool complete() override;
  bool places_chunks() const override { return true; }
  bool reserve_chunk(size_t bytes, uint64_t* at) override;
  bool place_chunk(uint64_t at, std::byte* header, std::span<const std::byte> payload, uint64_t* checksum,
                   std::string* error) const override;
  void chunk_done(size_t bytes) override;
  std::unique_ptr<Impl> impl_;
};

// What a reader accepts; anything over a limit is refused with a message saying which.
struct Limits {
  uint64_t max_record_bytes = uint64_t{256} << 20;  // a small record's payload
  uint64_t max_total_bytes = uint64_t{1} << 40;     // the whole stream
  uint64_t max_records = uint64_t{1} << 26;         // chunks count as records
};

struct RecordHeader {
  uint32_t type = 0;
  uint32_t flags = 0;
  uint64_t id = 0;
  uint64_t payload_bytes = 0;  // a record: its payload; a blob: its total
  uint64_t index = 0;          // the record's index in the stream (chunks count)
  uint64_t offset = 0;         // the byte offset of its header
  bool is_blob() const { return flags & kFlagBlob; }
};

// Reads and verifies a stream; memory and file share this parser over read_at(). Nothing is
// trusted before it is checked: a corrupt, truncated or hostile stream fails with a message
// naming the record index and byte offset, never reads out of bounds or allocates more than
// the limits allow.
class Source {
 public:
  Source(const Source&) = delete;
  Source& operator=(const Source&) = delete;
  virtual ~Source();

  // The next record (a blob's chunks are not records here: read them with read_chunk).
  // Unread payloads and chunks of the previous record are read and verified first. False at
  // the end of the stream, after the trailer checked out: then done() is true and *why is
  // empty; false on failure with *why.
  bool next(RecordHeader* header, std::string* why);
  bool done() const { return state_ == State::kDone; }

  // The current small record's payload, verified.
  bool read_payload(std::vector<std::byte>* payload, std::string* why);
  // The current blob's next chunk into `dest` (kChunkBytes always fits), verified before it
  // returns; *got == 0 when the blob is complete.
  bool read_chunk(std::span<std::byte> dest, size_t* got, std::string* why);
  // The same without a copy where the source can (memory); else into a buffer of its own,
  // valid until the next call. Empty when the blob is complete.
  bool read_chunk_view(std::span<const std::byte>* chunk, std::string* why);

  // The same in two steps, so that the payloads are read, verified and copied on several
  // threads (the resume's ring): next_chunk() checks the current blob's next chunk's framing
  // and describes it (chunk->bytes == 0 when the blob is complete) without reading its
  // payload; copy_chunk() reads, verifies and copies one, on any thread, several at once.
  // A chunk handed out is not verified until its copy_chunk() returned true: whoever gets a
  // failure passes it to reject() (the source fails from then on). Only where
  // concurrent_reads() (memory and file sources).
  struct Chunk {
    uint64_t offset = 0;  // its payload's byte offset in the stream
    size_t bytes = 0;
    uint64_t checksum = 0, seed = 0;
    uint64_t record = 0, record_offset = 0;  // its record index and header offset, for messages
    uint64_t number = 0, blob_type = 0, blob_id = 0;
  };
  bool next_chunk(Chunk* chunk, std::string* why);
  bool copy_chunk(const Chunk& chunk, std::span<std::byte> dest, std::string* why) const;
  void reject(const std::string& message);
  virtual bool concurrent_reads() const { return false; }

  // After the first next(): the header's fields.
  uint32_t format_version() const { return version_; }
  const std::string& creator() const { return creator_; }
  const std::string& name() const { return name_; }

 protected:
  Source(std::string name, Limits limits, Progress progress);
  virtual uint64_t size() const = 0;
  // Exactly dest.size() bytes at `offset` (checked to lie within size()), else false + *why.
  virtual bool read_at(uint64_t offset, std::span<std::byte> dest, std::string* why) = 0;
  // The bytes in place, or an empty span where the source cannot (the default).
  virtual std::span<const std::byte> view_at(uint64_t offset, size_t bytes);
  // For copy_chunk(), from any thread: the bytes at `offset` in place (*in_place, memory)
  // or copied into `dest` (its size is the count), else false + *why.
  virtual bool read_concurrent(uint64_t offset, std::span<std::byte> dest, std::span<const std::byte>* in_place,
                               std::string* why) const;
  // A failure found before parsing (open, stat), reported by the first call.
  void set_open_error(std::string message);

 private:
  enum class State { kStart, kBetween, kPayload, kBlob, kDone, kFailed };
  bool fail(std::string* why, std::string message);
  bool fail_record(std::string* why, uint64_t index, uint64_t offset, const std::string& message);
  bool read_header(std::string* why);
  bool skip_rest(std::string* why);
  // The next chunk's header, checked; its payload (*bytes) lies after it at offset_.
  bool chunk_header(uint64_t* bytes, std::string* why);
  bool finish_chunk(std::span<const std::byte> payload, std::string* why);
  bool verify(const std::string& what_record, uint64_t index, uint64_t offset, uint64_t expected,
              uint64_t actual, std::string* why);

  std::string name_;
  Limits limits_;
  Progress progress_;
  State state_ = State::kStart;
  std::string error_;
  uint32_t version_ = 0;
  std::string creator_;
  uint64_t offset_ = 0;   // the next unread byte
  uint64_t records_ = 0;  // records read so far (the next one's index)
  uint64_t checksum_fold_ = 0;
  RecordHeader current_;  // the record next() returned
  uint64_t current_checksum_ = 0, current_seed_ = 0;
  uint64_t chunk_checksum_ = 0, chunk_seed_ = 0;  // the chunk chunk_header() read
  uint64_t blob_left_ = 0, blob_chunks_ = 0;
  std::vector<std::byte> scratch_;
};

class MemorySource final : public Source {
 public:
  explicit MemorySource(std::shared_ptr<const MemoryStream> stream, Limits limits = {},
                        Progress progress = {});

 private:
  uint64_t size() const override;
  bool read_at(uint64_t offset, std::span<std::byte> dest, std::string* why) override;
  std::span<const std::byte> view_at(uint64_t offset, size_t bytes) override;
  bool concurrent_reads() const override { return true; }
  bool read_concurrent(uint64_t offset, std::span<std::byte> dest, std::span<const std::byte>* in_place,
                       std::string* why) const override;
  std::shared_ptr<const MemoryStream> stream_;
};

// Reads a state file (a striped set, or a single file of version 1) with pread, asking the
// kernel to read ahead of the consumer (POSIX_FADV_SEQUENTIAL, WILLNEED on the next chunks).
// It does not mmap: a file that shrinks under a mapping would fault; a short read is an
// error message instead. The set is checked before anything else is read: every stripe
// there, a regular file (not a symlink) of stripe 0's owner, of the size the header implies,
// with the same set id.
class FileSource final : public Source {
 public:
  explicit FileSource(const std::string& path, Limits limits = {}, Progress progress = {});
  // Borrowed fds (dup'ed), each read from offset 0; `name` for messages. One fd: a version 1
  // file or a set of one stripe; several: stripe k is stripe_fds[k] (a set that names more
  // stripes than given is missing some; those over its count are not read).
  FileSource(int fd, std::string name, Limits limits = {}, Progress progress = {});
  FileSource(std::span<const int> stripe_fds, std::string name, Limits limits = {}, Progress progress = {});
  ~FileSource() override;
  unsigned stripes() const { return unsigned(stripes_.size()); }

 private:
  struct Stripe {
    int fd = -1;
    uint64_t size = 0;
    std::string name;  // for messages
  };
  // Stripe k's fd (ours to close), or -1 with *why.
  using OpenStripe = std::function<int(unsigned k, std::string* why)>;
  void open_set(int fd0, const OpenStripe& open_stripe);
  bool check_stripe(unsigned k, const std::byte* raw, uint64_t set_id, uint64_t stream_bytes, std::string* why) const;
  uint64_t size() const override { return size_; }
  bool read_at(uint64_t offset, std::span<std::byte> dest, std::string* why) override;
  bool concurrent_reads() const override { return true; }
  bool read_concurrent(uint64_t offset, std::span<std::byte> dest, std::span<const std::byte>* in_place,
                       std::string* why) const override;
  // The stream's bytes at `offset`, from the stripes they lie in.
  bool read_stream(uint64_t offset, std::span<std::byte> dest, std::string* why) const;
  bool pread_all(const Stripe& s, uint64_t offset, std::span<std::byte> dest, std::string* why) const;
  std::vector<Stripe> stripes_;
  StripeLayout layout_;
  uint64_t size_ = 0;        // the stream's bytes
  uint64_t advised_to_ = 0;  // readahead asked for up to here (stream offset)
};

// Metadata payloads: little-endian fixed-width fields; bytes and strings carry a u32 length.
class ByteWriter {
 public:
  void put_u8(uint8_t v);
  void put_u32(uint32_t v);
  void put_u64(uint64_t v);
  void put_i32(int32_t v);
  void put_bytes(std::span<const std::byte> bytes);
  void put_string(std::string_view s);
  std::span<const std::byte> bytes() const { return bytes_; }
  std::vector<std::byte> take() { return std::move(bytes_); }

 private:
  std::vector<std::byte> bytes_;
};

// Reads what a ByteWriter wrote. Never reads outside its span: a get that does not fit fails
// (false, output zeroed), records the first failure with its offset, and every later get
// fails too; so a parser may check ok() once at the end.
class ByteReader {
 public:
  explicit ByteReader(std::span<const std::byte> bytes) : bytes_(bytes) {}
  bool get_u8(uint8_t* v);
  bool get_u32(uint32_t* v);
  bool get_u64(uint64_t* v);
  bool get_i32(int32_t* v);
  // Lengths over max_bytes are refused before anything is allocated.
  bool get_bytes(std::vector<std::byte>* bytes, size_t max_bytes);
  bool get_string(std::string* s, size_t max_bytes);
  // Fails unless everything was read (a trailing field this reader does not know).
  bool expect_end();

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  size_t offset() const { return pos_; }
  size_t remaining() const { return bytes_.size() - pos_; }

 private:
  bool take(void* out, size_t n, const char* what);
  bool fail(std::string message);
  std::span<const std::byte> bytes_;
  size_t pos_ = 0;
  std::string error_;
};

}  // namespace vmcuda::host::state
