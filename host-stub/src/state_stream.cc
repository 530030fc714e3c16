// The state stream (state_stream.h): framing, checksums, the memory and file sinks and
// sources, and the metadata byte coder.
#include "state_stream.h"

#include <fcntl.h>
#include <liburing.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <pthread.h>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "vmrpc/fd.h"

// Header-only xxhash (Debian libxxhash-dev): nothing to link, nothing for GPU hosts to install.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace vmcuda::host::state {
namespace {

constexpr size_t kFixedHeaderBytes = 24;  // magic, version, header bytes, reserved, creator bytes
constexpr size_t kTrailerPayloadBytes = 24;
constexpr size_t kBlobPayloadBytes = 8;
constexpr size_t kSkipPieceBytes = size_t{1} << 20;
constexpr uint64_t kReadaheadBytes = uint64_t{4} * kChunkBytes;
// Copies that checksum as they go do it piece by piece: the copy reads what the hash just
// brought into the cache.
constexpr size_t kCopyPieceBytes = size_t{256} << 10;

void store_u32(std::byte* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = std::byte(v >> (8 * i));
}
void store_u64(std::byte* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = std::byte(v >> (8 * i));
}
uint32_t load_u32(const std::byte* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t(p[i]) << (8 * i);
  return v;
}
uint64_t load_u64(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(p[i]) << (8 * i);
  return v;
}

uint64_t hash(std::span<const std::byte> bytes, uint64_t seed = 0) {
  return XXH3_64bits_withSeed(bytes.data(), bytes.size(), seed);
}

// A record's checksum covers its header fields: the payload's hash is seeded with theirs.
uint64_t header_seed(const std::byte* header) { return hash({header, 24}); }

// The trailer's checksum over the records: each record's checksum folded in, in order.
uint64_t fold(uint64_t acc, uint64_t record_checksum) {
  std::byte le[8];
  store_u64(le, record_checksum);
  return hash(le, acc);
}

void encode_record_header(std::byte* out, uint32_t type, uint32_t flags, uint64_t id,
                          std::span<const std::byte> payload, uint64_t* checksum) {
  store_u32(out, type);
  store_u32(out + 4, flags);
  store_u64(out + 8, id);
  store_u64(out + 16, payload.size());
  *checksum = hash(payload, header_seed(out));
  store_u64(out + 24, *checksum);
}

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
  return buf;
}

std::string errno_text(int err) { return std::strerror(err); }

void* default_alloc(size_t bytes) {
  constexpr size_t kAlign = 4096;  // page aligned: DMA and O_DIRECT friendly
  return std::aligned_alloc(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
}

}  // namespace

// ---------------------------------------------------------------------------- CopyThreads

CopyThreads::CopyThreads(unsigned threads, StagingAllocator stacks) : stacks_(std::move(stacks)) {
  if (!stacks_.alloc || !stacks_.free) stacks_ = {default_alloc, [](void* p) { std::free(p); }};
  for (unsigned i = 0; i < threads; ++i) {
    void* stack = stacks_.alloc(kStackBytes);
    if (!stack) break;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstack(&attr, stack, kStackBytes);
    pthread_t t;
    const int rc = pthread_create(
        &t, &attr, [](void* self) -> void* { static_cast<CopyThreads*>(self)->work(); return nullptr; }, this);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
      stacks_.free(stack);
      break;
    }
    threads_.push_back(t);
    thread_stacks_.push_back(stack);
  }
}

CopyThreads::~CopyThreads() {
  {
    std::lock_guard l(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (pthread_t t : threads_) pthread_join(t, nullptr);
  for (void* stack : thread_stacks_) stacks_.free(stack);
}

uint64_t CopyThreads::run(std::function<void()> job) {
  if (threads_.empty()) {
    job();
    std::lock_guard l(mu_);
    done_below_ = ++next_ticket_;
    return next_ticket_ - 1;
  }
  uint64_t ticket;
  {
    std::lock_guard l(mu_);
    ticket = next_ticket_++;
    queue_.emplace_back(ticket, std::move(job));
  }
  work_cv_.notify_one();
  return ticket;
}

void CopyThreads::wait(uint64_t ticket) {
  std::unique_lock l(mu_);
  done_cv_.wait(l, [&] { return done_below_ > ticket; });
}

bool CopyThreads::finished(uint64_t ticket) {
  std::lock_guard l(mu_);
  return done_below_ > ticket;
}

void CopyThreads::work() {
  for (;;) {
    std::pair<uint64_t, std::function<void()>> job;
    {
      std::unique_lock l(mu_);
      work_cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    job.second();
    job.second = nullptr;  // what it holds goes before it counts as finished
    {
      std::lock_guard l(mu_);
      done_out_of_order_.insert(job.first);
      while (!done_out_of_order_.empty() && *done_out_of_order_.begin() == done_below_) {
        done_out_of_order_.erase(done_out_of_order_.begin());
        ++done_below_;
      }
    }
    done_cv_.notify_all();
  }
}

// ------------------------------------------------------------------------------------ Sink

Sink::Sink(SinkOptions options) : options_(std::move(options)) {
  if (!options_.allocator.alloc != !options_.allocator.free)
    fail("state sink: the staging allocator needs both alloc and free (or neither)");
  if (!options_.allocator.alloc) {
    options_.allocator.alloc = default_alloc;
    options_.allocator.free = [](void* p) { std::free(p); };
  }
  if (options_.staging_bytes == 0 || options_.staging_bytes > kChunkBytes)
    fail("state sink: staging_bytes " + std::to_string(options_.staging_bytes) + " must be 1.." +
         std::to_string(kChunkBytes));
  if (options_.staging_buffers == 0) fail("state sink: staging_buffers must be at least 1");
  if (options_.creator.size() > kMaxCreatorBytes)
    fail("state sink: creator string of " + std::to_string(options_.creator.size()) +
         " bytes is over " + std::to_string(kMaxCreatorBytes));
}

// commit_copy()'s threads and the chunks in flight, oldest first.
struct Sink::CopyPool {
  struct Job {
    uint64_t ticket = 0;       // the sink's
    uint64_t run_ticket = 0;   // the threads'
    std::byte* buffer = nullptr;  // the sink's staging buffer; the payload at kStagingHeaderRoom
    bool placed = false;          // or written at `at` by place_chunk()
    uint64_t at = 0;
    const std::byte* source = nullptr;
    size_t bytes = 0;
    uint64_t chunk_index = 0;
    uint64_t checksum = 0;
    bool ok = true;
    std::string error;  // place_chunk()'s, read once the ticket finished
  };
  std::deque<std::unique_ptr<Job>> inflight;  // not yet in the stream, in stream order (the producer's)
  CopyThreads threads;  // after inflight: joined before the jobs they run go

  CopyPool(unsigned n, const StagingAllocator& a) : threads(n, a) {}
  // The chunk's record header and payload into its staging buffer.
  static void copy_and_hash(Job& j) {
    std::byte* payload = j.buffer + kStagingHeaderRoom;
    std::byte* header = payload - kRecordHeaderBytes;
    j.checksum = copy_hashing(payload, j.source, j.bytes, chunk_header(header, j.chunk_index, j.bytes));
    set_checksum(header, j.checksum);
  }
  static void place(const Sink* sink, Job& j) {
    std::byte header[kRecordHeaderBytes];
    chunk_header(header, j.chunk_index, j.bytes);
    j.ok = sink->place_chunk(j.at, header, {j.source, j.bytes}, &j.checksum, &j.error);
  }
};

uint64_t Sink::chunk_header(std::byte* header, uint64_t index, size_t bytes) {
  store_u32(header, kChunkType);
  store_u32(header + 4, 0);
  store_u64(header + 8, index);
  store_u64(header + 16, bytes);
  return header_seed(header);
}

void Sink::set_checksum(std::byte* header, uint64_t checksum) { store_u64(header + 24, checksum); }

uint64_t Sink::copy_hashing(std::byte* dest, const std::byte* src, size_t n, uint64_t seed) {
  // INITSTATE: reset_withSeed skips making the secret where the stack's stale state has
  // the same seed, and chunks with equal headers (chunk 0 of equal-size blobs) have.
  XXH3_state_t state;
  XXH3_INITSTATE(&state);
  XXH3_64bits_reset_withSeed(&state, seed);
  for (size_t at = 0; at < n; at += kCopyPieceBytes) {
    const size_t piece = std::min(kCopyPieceBytes, n - at);
    XXH3_64bits_update(&state, src + at, piece);
    if (dest) std::memcpy(dest + at, src + at, piece);
  }
  return XXH3_64bits_digest(&state);
}

bool Sink::reserve_chunk(size_t, uint64_t*) { return fail("state sink: this sink does not place chunks"); }
bool Sink::place_chunk(uint64_t, std::byte*, std::span<const std::byte>, uint64_t*, std::string* error) const {
  *error = "state sink: this sink does not place chunks";
  return false;
}
void Sink::chunk_done(size_t) {}

void Sink::stop_copies() { copies_.reset(); }

Sink::~Sink() = default;  // copies_ first: no thread touches a buffer after this

uint64_t Sink::commit_copy(std::span<const std::byte> source) {
  if (failed()) return 0;
  if (acquired_) return fail("state sink: commit_copy() with an acquired buffer open"), 0;
  const size_t n = source.size();
  if (!in_blob_) return fail("state sink: commit_copy() outside a blob (call begin_blob() first)"), 0;
  if (n == 0 || n > options_.staging_bytes || n > blob_total_ - blob_done_)
    return fail("state sink: commit_copy() of " + std::to_string(n) + " bytes: must be 1.." +
                std::to_string(std::min<uint64_t>(options_.staging_bytes, blob_total_ - blob_done_))),
           0;
  auto job = std::make_unique<CopyPool::Job>();
  job->placed = places_chunks();
  if (job->placed) {
    if (!reserve_chunk(kRecordHeaderBytes + n, &job->at)) return 0;
  } else {
    job->buffer = get_staging(n);
    if (!job->buffer) return 0;
  }
  job->ticket = next_ticket_++;
  job->source = source.data();
  job->bytes = n;
  job->chunk_index = blob_chunks_++;
  blob_done_ += n;
  const uint64_t ticket = job->ticket;
  auto copy_here = [&]() -> uint64_t {
    if (job->placed) {
      CopyPool::place(this, *job);
      if (!job->ok) return fail(job->error), 0;
    } else {
      CopyPool::copy_and_hash(*job);
    }
    ++records_;
    checksum_fold_ = fold(checksum_fold_, job->checksum);
    stream_bytes_ += kRecordHeaderBytes + n;
    if (job->placed) return chunk_done(kRecordHeaderBytes + n), ticket;
    std::byte* buffer = job->buffer;
    const bool ok = put_staging(buffer, {buffer + kStagingHeaderRoom - kRecordHeaderBytes, kRecordHeaderBytes + n});
    return ok ? ticket : 0;
  };
  if (options_.copy_threads == 0) return copy_here();
  if (!copies_) copies_ = std::make_unique<CopyPool>(options_.copy_threads, options_.allocator);
  if (copies_->threads.size() == 0) return copy_here();  // no thread could start
  CopyPool::Job* j = job.get();
  if (j->placed)
    j->run_ticket = copies_->threads.run([this, j] { CopyPool::place(this, *j); });
  else
    j->run_ticket = copies_->threads.run([j] { CopyPool::copy_and_hash(*j); });
  copies_->inflight.push_back(std::move(job));
  return ticket;
}

bool Sink::wait_copy(uint64_t ticket) {
  if (!copies_) return !failed();
  for (;;) {
    if (copies_->inflight.empty() || copies_->inflight.front()->ticket > ticket) break;
    std::unique_ptr<CopyPool::Job> j = std::move(copies_->inflight.front());
    copies_->inflight.pop_front();
    copies_->threads.wait(j->run_ticket);
    if (!j->placed && failed()) put_staging(j->buffer, {});
    if (failed()) continue;
    if (!j->ok) {
      fail(j->error);
      continue;
    }
    ++records_;
    checksum_fold_ = fold(checksum_fold_, j->checksum);
    stream_bytes_ += kRecordHeaderBytes + j->bytes;
    if (j->placed) {
      chunk_done(kRecordHeaderBytes + j->bytes);
      continue;
    }
    std::byte* header = j->buffer + kStagingHeaderRoom - kRecordHeaderBytes;
    put_staging(j->buffer, {header, kRecordHeaderBytes + j->bytes});
  }
  return !failed();
}

bool Sink::fail(std::string message) {
  if (error_.empty()) error_ = std::move(message);
  return false;
}

void Sink::report_progress(uint64_t done_bytes) {
  if (options_.progress) options_.progress(done_bytes, options_.expected_bytes);
}

void* Sink::staging_alloc(size_t bytes) { return options_.allocator.alloc(bytes); }
void Sink::staging_free(void* p) {
  if (p) options_.allocator.free(p);
}

bool Sink::ensure_header() {
  if (header_written_) return true;
  header_written_ = true;
  const std::string& creator = options_.creator;
  std::vector<std::byte> h(kFixedHeaderBytes + creator.size() + 8);
  std::memcpy(h.data(), kMagic, sizeof kMagic);
  store_u32(&h[8], kFormatVersion);
  store_u32(&h[12], uint32_t(h.size()));
  store_u32(&h[16], 0);
  store_u32(&h[20], uint32_t(creator.size()));
  std::memcpy(&h[kFixedHeaderBytes], creator.data(), creator.size());
  store_u64(&h[h.size() - 8], hash({h.data(), h.size() - 8}));
  stream_bytes_ += h.size();
  return put_copy(h);
}

bool Sink::emit_record(uint32_t type, uint32_t flags, uint64_t id, std::span<const std::byte> payload) {
  if (!drain_copies()) return false;
  std::byte header[kRecordHeaderBytes];
  uint64_t checksum = 0;
  encode_record_header(header, type, flags, id, payload, &checksum);
  if (type != kTrailerType) {
    ++records_;
    checksum_fold_ = fold(checksum_fold_, checksum);
  }
  stream_bytes_ += sizeof header + payload.size();
  return put_copy(header) && (payload.empty() || put_copy(payload));
}

bool Sink::check_user_type(uint32_t type, const char* what) {
  if (finished_) return fail(std::string("state sink: ") + what + " after finish()");
  if (type >= kFirstReservedType)
    return fail(std::string("state sink: ") + what + ": record type " + hex(type) +
                " is reserved for the stream's framing (use types below " + hex(kFirstReservedType) + ")");
  if (in_blob_)
    return fail(std::string("state sink: ") + what + " inside blob type " + hex(blob_type_) + " id " +
                std::to_string(blob_id_) + " (call end_blob() first)");
  return ensure_header();
}

bool Sink::put_record(uint32_t type, uint64_t id, std::span<const std::byte> payload) {
  if (failed() || !check_user_type(type, "put_record")) return false;
  return emit_record(type, 0, id, payload);
}

bool Sink::begin_blob(uint32_t type, uint64_t id, uint64_t total_bytes) {
  if (failed() || !check_user_type(type, "begin_blob")) return false;
  std::byte total[kBlobPayloadBytes];
  store_u64(total, total_bytes);
  if (!emit_record(type, kFlagBlob, id, total)) return false;
  in_blob_ = true;
  blob_type_ = type;
  blob_id_ = id;
  blob_total_ = total_bytes;
  blob_done_ = 0;
  blob_chunks_ = 0;
  return true;
}

std::span<std::byte> Sink::acquire(size_t bytes) {
  if (failed()) return {};
  std::string blob = "blob type " + hex(blob_type_) + " id " + std::to_string(blob_id_);
  if (!in_blob_) return fail("state sink: acquire() outside a blob (call begin_blob() first)"), std::span<std::byte>{};
  if (acquired_) return fail("state sink: acquire() twice without commit() (" + blob + ")"), std::span<std::byte>{};
  if (bytes == 0 || bytes > options_.staging_bytes || bytes > blob_total_ - blob_done_)
    return fail("state sink: acquire(" + std::to_string(bytes) + ") for " + blob + ": must be 1.." +
                std::to_string(std::min<uint64_t>(options_.staging_bytes, blob_total_ - blob_done_)) +
                " (the staging size and what is left of the blob)"),
           std::span<std::byte>{};
  std::byte* buffer = get_staging(bytes);
  if (!buffer) return {};
  acquired_ = buffer;
  acquired_bytes_ = bytes;
  return {buffer + kStagingHeaderRoom, bytes};
}

bool Sink::commit(std::span<std::byte> filled) {
  if (failed()) return false;
  if (!acquired_) return fail("state sink: commit() without acquire()");
  if (!drain_copies()) return false;
  std::byte* buffer = std::exchange(acquired_, nullptr);
  std::byte* payload = buffer + kStagingHeaderRoom;
  if (filled.size() > acquired_bytes_ || (!filled.empty() && filled.data() != payload)) {
    put_staging(buffer, {});
    return fail("state sink: commit() of a span that is not a prefix of the acquired buffer");
  }
  if (filled.empty()) return put_staging(buffer, {});
  std::byte* header = payload - kRecordHeaderBytes;
  uint64_t checksum = 0;
  encode_record_header(header, kChunkType, 0, blob_chunks_, filled, &checksum);
  ++records_;
  checksum_fold_ = fold(checksum_fold_, checksum);
  ++blob_chunks_;
  blob_done_ += filled.size();
  stream_bytes_ += kRecordHeaderBytes + filled.size();
  return put_staging(buffer, {header, kRecordHeaderBytes + filled.size()});
}

bool Sink::end_blob() {
  if (failed()) return false;
  if (!in_blob_) return fail("state sink: end_blob() without begin_blob()");
  if (acquired_) return fail("state sink: end_blob() with an acquired buffer not committed");
  if (!drain_copies()) return false;
  if (blob_done_ != blob_total_)
    return fail("state sink: blob type " + hex(blob_type_) + " id " + std::to_string(blob_id_) + " ended after " +
                std::to_string(blob_done_) + " of its " + std::to_string(blob_total_) + " bytes");
  in_blob_ = false;
  return true;
}

bool Sink::put_blob(uint32_t type, uint64_t id, std::span<const std::byte> bytes) {
  if (!begin_blob(type, id, bytes.size())) return false;
  while (!bytes.empty()) {
    size_t n = std::min(bytes.size(), options_.staging_bytes);
    std::span<std::byte> buffer = acquire(n);
    if (buffer.empty()) return false;
    std::memcpy(buffer.data(), bytes.data(), n);
    if (!commit(buffer)) return false;
    bytes = bytes.subspan(n);
  }
  return end_blob();
}

bool Sink::finish(std::string* why) {
  auto failed_with = [&] {
    if (why) *why = error_;
    return false;
  };
  if (failed()) return failed_with();
  if (finished_) return fail("state sink: finish() twice"), failed_with();
  if (in_blob_) {
    fail("state sink: finish() inside blob type " + hex(blob_type_) + " id " + std::to_string(blob_id_));
    return failed_with();
  }
  if (!ensure_header()) return failed_with();
  std::byte trailer[kTrailerPayloadBytes];
  store_u64(trailer, records_);
  store_u64(trailer + 8, stream_bytes_);
  store_u64(trailer + 16, checksum_fold_);
  if (!emit_record(kTrailerType, 0, 0, trailer) || !complete()) {
    fail("state sink: finishing the stream failed");  // a derived class's fail() names the cause
    return failed_with();
  }
  finished_ = true;
  if (why) why->clear();
  return true;
}

// ---------------------------------------------------------------------------- MemoryStream

std::shared_ptr<const MemoryStream> MemoryStream::borrow(std::span<const std::byte> bytes) {
  std::shared_ptr<MemoryStream> s(new MemoryStream);
  if (!bytes.empty()) s->segments_.push_back({0, bytes.data(), bytes.size(), nullptr, {}});
  s->size_ = bytes.size();
  return s;
}

MemoryStream::~MemoryStream() {
  for (Segment& s : segments_)
    if (s.staging) free_(s.staging);
}

bool MemoryStream::read(uint64_t offset, std::span<std::byte> dest) const {
  if (offset > size_ || dest.size() > size_ - offset) return false;
  // The first segment that ends after `offset`.
  auto it = std::upper_bound(segments_.begin(), segments_.end(), offset,
                             [](uint64_t off, const Segment& s) { return off < s.offset + s.bytes; });
  size_t done = 0;
  for (; done < dest.size() && it != segments_.end(); ++it) {
    uint64_t within = offset + done - it->offset;
    size_t n = std::min<uint64_t>(dest.size() - done, it->bytes - within);
    std::memcpy(dest.data() + done, it->data + within, n);
    done += n;
  }
  return done == dest.size();
}

std::span<const std::byte> MemoryStream::view(uint64_t offset, size_t bytes) const {
  auto it = std::upper_bound(segments_.begin(), segments_.end(), offset,
                             [](uint64_t off, const Segment& s) { return off < s.offset + s.bytes; });
  if (it == segments_.end() || offset < it->offset) return {};
  uint64_t within = offset - it->offset;
  if (bytes > it->bytes - within) return {};
  return {it->data + within, bytes};
}

std::vector<std::byte> MemoryStream::flatten() const {
  std::vector<std::byte> out(size_);
  read(0, out);
  return out;
}

// ------------------------------------------------------------------------------ MemorySink

MemorySink::MemorySink(SinkOptions options) : Sink(std::move(options)), stream_(new MemoryStream) {
  stream_->free_ = this->options().allocator.free;
}

MemorySink::~MemorySink() { staging_free(outstanding_); }

std::shared_ptr<const MemoryStream> MemorySink::take_stream() {
  if (!done_) return nullptr;
  return std::move(stream_);
}

std::byte* MemorySink::get_staging(size_t payload_bytes) {
  void* p = staging_alloc(kStagingHeaderRoom + payload_bytes);
  if (!p) {
    fail("cannot allocate " + std::to_string(kStagingHeaderRoom + payload_bytes) +
         " bytes of host memory for the suspended state: free host memory or save to a file");
    return nullptr;
  }
  outstanding_ = p;
  return static_cast<std::byte*>(p);
}

void MemorySink::close_small_segment() {
  if (small_.empty()) return;
  MemoryStream::Segment s;
  s.offset = stream_->size_ - small_.size();
  s.data = small_.data();
  s.bytes = small_.size();
  s.copy = std::move(small_);  // the vector's buffer moves with it: data stays valid
  stream_->segments_.push_back(std::move(s));
  small_ = {};
}

bool MemorySink::put_staging(std::byte* buffer, std::span<const std::byte> stream_bytes) {
  outstanding_ = nullptr;
  if (stream_bytes.empty()) {
    staging_free(buffer);
    return true;
  }
  close_small_segment();
  MemoryStream::Segment s;
  s.offset = stream_->size_;
  s.data = stream_bytes.data();
  s.bytes = stream_bytes.size();
  s.staging = buffer;
  stream_->segments_.push_back(std::move(s));
  stream_->size_ += stream_bytes.size();
  report_progress(stream_->size_);
  return true;
}

bool MemorySink::put_copy(std::span<const std::byte> bytes) {
  small_.insert(small_.end(), bytes.begin(), bytes.end());
  stream_->size_ += bytes.size();
  return true;
}

bool MemorySink::complete() {
  close_small_segment();
  report_progress(stream_->size_);
  done_ = true;
  return true;
}

// ------------------------------------------------------------------------- stripe files

std::string stripe_path(const std::string& path, unsigned k) { return k == 0 ? path : path + "." + std::to_string(k); }

void remove_state_file(const std::string& path) {
  for (unsigned k = 0; k < kMaxStripes; ++k) {
    ::unlink(stripe_path(path, k).c_str());
    ::unlink((stripe_path(path, k) + ".partial").c_str());
  }
}

namespace {

constexpr size_t kStripeHeaderFields = 48;  // before the checksum

struct StripeHeader {
  uint32_t index = 0, count = 0;
  uint64_t unit = 0, stream_bytes = 0, set_id = 0;
};

void encode_stripe_header(std::byte* out, const StripeHeader& h) {
  std::memset(out, 0, kStripeHeaderBytes);
  std::memcpy(out, kMagic, sizeof kMagic);
  store_u32(out + 8, kStripedVersion);
  store_u32(out + 12, uint32_t(kStripeHeaderBytes));
  store_u32(out + 16, h.index);
  store_u32(out + 20, h.count);
  store_u64(out + 24, h.unit);
  store_u64(out + 32, h.stream_bytes);
  store_u64(out + 40, h.set_id);
  store_u64(out + kStripeHeaderFields, hash({out, kStripeHeaderFields}));
}

// `raw`: a stripe file's first kStripeHeaderBytes. False with *why where they are not a
// sound stripe header (the caller compares it with the set's).
bool decode_stripe_header(const std::byte* raw, StripeHeader* h, std::string* why) {
  if (std::memcmp(raw, kMagic, sizeof kMagic) != 0 || load_u32(raw + 8) != kStripedVersion) {
    *why = "not a stripe of a vmcuda state file (no version 2 header)";
    return false;
  }
  const uint64_t stored = load_u64(raw + kStripeHeaderFields), computed = hash({raw, kStripeHeaderFields});
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
  if (stored != computed) {
    *why = "corrupt stripe header: checksum mismatch (stored " + hex(stored) + ", computed " + hex(computed) + ")";
    return false;
  }
#else
  (void)stored, (void)computed;
#endif
  const uint32_t header_bytes = load_u32(raw + 12);
  h->index = load_u32(raw + 16);
  h->count = load_u32(raw + 20);
  h->unit = load_u64(raw + 24);
  h->stream_bytes = load_u64(raw + 32);
  h->set_id = load_u64(raw + 40);
  if (header_bytes != kStripeHeaderBytes) {
    *why = "corrupt stripe header: " + std::to_string(header_bytes) + " header bytes (" +
           std::to_string(kStripeHeaderBytes) + " expected)";
    return false;
  }
  if (h->count == 0 || h->count > kMaxStripes || h->index >= h->count) {
    *why = "corrupt stripe header: stripe " + std::to_string(h->index) + " of " + std::to_string(h->count) +
           " (1.." + std::to_string(kMaxStripes) + " stripes)";
    return false;
  }
  if (h->unit == 0 || h->unit % 4096 != 0 || h->unit > kMaxStripeUnit) {
    *why = "corrupt stripe header: a stripe unit of " + std::to_string(h->unit) + " bytes (a multiple of 4096 up to " +
           std::to_string(kMaxStripeUnit) + ")";
    return false;
  }
  return true;
}

uint64_t new_set_id() {
  uint64_t id = 0;
  if (::getrandom(&id, sizeof id, 0) != sizeof id)
    id = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()) ^ (uint64_t(::getpid()) << 32);
  return id;
}

}  // namespace

// -------------------------------------------------------------------------------- FileSink

struct FileSink::Impl {
  struct Slot {
    std::byte* buffer = nullptr;
    bool held = false;    // handed to the producer (or the open copy buffer)
    unsigned pieces = 0;  // writes in flight (one per stripe unit it covers)
    uint64_t at = 0;      // in the stream
    const std::byte* data = nullptr;
    size_t bytes = 0;  // to write (copy buffer: filled so far)
    size_t done = 0;   // of them, written
  };
  struct Stripe {
    std::string path, partial;  // path empty: a borrowed fd
    vmrpc::UniqueFd owned_fd;
    int fd = -1;
    vmrpc::UniqueFd direct_fd;  // kDirect: the file opened with O_DIRECT
    uint64_t file_size = 0;     // as grown ahead of the stream (windows, preallocation); cut in complete()
    bool created = false;       // its .partial is ours to remove
  };

  FileSink* sink;
  std::string path;  // empty: writing a borrowed fd
  std::vector<Stripe> stripes;
  StripeLayout layout;
  uint64_t set_id = 0;
  bool finished = false;
  uint64_t produced = 0;   // stream bytes handed to writes (or the copy buffer)
  uint64_t completed = 0;  // stream bytes written
  size_t slot_capacity = 0;
  std::vector<Slot> slots;
  size_t next_slot = 0;
  int copy_slot = -1;
  size_t in_flight = 0;  // io_uring writes
  static constexpr unsigned kRingEntries = 64;
  io_uring ring{};
  bool ring_ready = false;
  // commit_copy()'s chunks: written by the copy threads at their offsets.
  bool mapped = false;      // into windows of a mapping (else direct or pwritev)
  std::byte* va = nullptr;  // an address range for stream offsets [0, va_bytes)
  size_t va_bytes = 0;
  uint64_t mapped_from = 0, mapped_to = 0;  // the windows mapped now (stream offsets)
  bool direct = false;
  mutable std::atomic<bool> direct_refused{false};  // a write said EINVAL: buffered from then on
  mutable std::mutex bounce_mu;
  mutable std::vector<std::pair<void*, size_t>> bounce_free;  // aligned buffers for direct writes
  static constexpr uint64_t kBlock = 4096;
  std::deque<uint64_t> chunk_ends;  // of the chunks reserved and not yet written, in order
  uint64_t retired_to = 0;          // every chunk before this stream offset is written

  uint64_t window_bytes = 0;  // options.map_window_bytes, whole units

  explicit Impl(FileSink* s) : sink(s) {}

  // Where kAuto maps: tmpfs, and a kernel with MADV_POPULATE_WRITE (5.14).
  static bool populate_works() {
    void* p = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return false;
    const bool ok = ::madvise(p, 4096, MADV_POPULATE_WRITE) == 0;
    ::munmap(p, 4096);
    return ok;
  }

  // The stripes' .partial files, created (O_TRUNC: a .partial left by a crashed save is
  // garbage; the files under the final names are not touched; O_RDWR: the mapped writes
  // need it).
  bool create(const std::string& p, const SinkOptions& o) {
    unsigned count = o.stripes ? o.stripes : std::max(1u, o.copy_threads);
    if (o.stripes > kMaxStripes)
      return sink->fail("state sink: " + std::to_string(o.stripes) + " stripes; at most " + std::to_string(kMaxStripes));
    count = std::min(count, kMaxStripes);
    if (o.stripe_unit == 0 || o.stripe_unit % 4096 != 0 || o.stripe_unit > kMaxStripeUnit)
      return sink->fail("state sink: stripe_unit " + std::to_string(o.stripe_unit) + " is not a multiple of 4096 up to " +
                        std::to_string(kMaxStripeUnit));
    layout = {kStripeHeaderBytes, o.stripe_unit, count};
    set_id = new_set_id();
    path = p;
    stripes.resize(count);
    for (unsigned k = 0; k < count; ++k) {
      Stripe& s = stripes[k];
      s.path = stripe_path(p, k);
      s.partial = s.path + ".partial";
      s.owned_fd.reset(::open(s.partial.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
      if (!s.owned_fd)
        return sink->fail("cannot create " + s.partial + ": " + errno_text(errno) +
                          " (is the directory there and writable?)");
      s.created = true;
      s.fd = s.owned_fd.get();
    }
    return true;
  }

  void choose_chunk_writes(const SinkOptions& o) {
    using W = SinkOptions::FileWrites;
    if (path.empty()) return;  // a borrowed fd: pwritev (nothing after the stream is cut or reopened)
    bool map = o.file_writes == W::kMapped;
    if (o.file_writes == W::kAuto) {
      struct statfs fs{};
      if (::fstatfs(stripes[0].fd, &fs) == 0 && fs.f_type == TMPFS_MAGIC) {
        // One file: the mapping (a write() holds the file's lock while it copies). Several:
        // pwritev, each thread mostly into a file of its own (measured on the H100 host,
        // threads writing their own tmpfs files: 19 GB/s with 8, 24 with 16), and no
        // mapping to change under the copying threads.
        if (stripes.size() > 1) return;
        map = true;
      }
    }
    if (map && populate_works()) return set_up_mapping(o);
    if (o.file_writes == W::kAuto || o.file_writes == W::kDirect) set_up_direct(o);
  }

  void set_up_direct(const SinkOptions& o) {
    for (Stripe& s : stripes) {
      vmrpc::UniqueFd d(::open(s.partial.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC));
      if (!d) {  // no O_DIRECT here (tmpfs on older kernels, some FUSE): pwritev
        for (Stripe& t : stripes) t.direct_fd.reset();
        return;
      }
      s.direct_fd = std::move(d);
    }
    direct = true;
    // Whole-block writes inside the file's size and allocated blocks run in parallel (ext4 and
    // XFS take the file's lock shared for them; past the end, one at a time). Cut to the
    // stream's end in complete(). No room for it is not yet a failure: the writes say.
    if (!o.expected_bytes) return;
    for (unsigned k = 0; k < stripes.size(); ++k) {
      Stripe& s = stripes[k];
      const uint64_t want = layout.file_bytes(k, o.expected_bytes + (uint64_t{64} << 20));
      if (::fallocate(s.fd, 0, 0, off_t(want)) == 0 || (errno != ENOSPC && ::ftruncate(s.fd, off_t(want)) == 0))
        s.file_size = want;
    }
  }

  void set_up_mapping(const SinkOptions& o) {
    if (o.map_window_bytes == 0 || o.map_window_bytes % 4096 != 0) {
      sink->fail("state sink: map_window_bytes " + std::to_string(o.map_window_bytes) + " is not a multiple of 4096");
      return;
    }
    // Windows of whole stripe units: each unit is mapped from its stripe's file, so the
    // windows are the stream as one range and the copy threads copy into it as into one file.
    window_bytes = (o.map_window_bytes + layout.unit - 1) / layout.unit * layout.unit;
    // Address space for the whole stream (only windows of it are mapped at a time): what the
    // producer expects and a margin; chunks beyond it are written with pwritev.
    const uint64_t want = o.expected_bytes + (o.expected_bytes >> 3) + 4 * window_bytes;
    va_bytes = size_t((want + window_bytes - 1) / window_bytes * window_bytes);
    void* p = ::mmap(nullptr, va_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return;
    va = static_cast<std::byte*>(p);
    mapped = true;
  }

  // Windows up to mapped_to cover `end` once this returns true; false without a failure:
  // `end` lies beyond the address range (that chunk is written with pwritev).
  bool map_to(uint64_t end) {
    if (mapped_to >= end) return true;
    const uint64_t target = (end + window_bytes - 1) / window_bytes * window_bytes;
    if (target > va_bytes) return false;
    // A page of the mapping past the end of its file would fault: each stripe grows ahead of
    // the windows (sparse: tmpfs allocates a page when it is written); complete() cuts it to
    // the stream's end.
    for (unsigned k = 0; k < stripes.size(); ++k) {
      Stripe& s = stripes[k];
      const uint64_t need = layout.file_bytes(k, target);
      if (s.file_size >= need) continue;
      if (::ftruncate(s.fd, off_t(need)) != 0) {
        const int err = errno;
        sink->fail(write_error_text(s, s.file_size, err));
        return false;
      }
      s.file_size = need;
    }
    for (; mapped_to < target; mapped_to += layout.unit)
      if (::mmap(va + mapped_to, layout.unit, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                 stripes[layout.stripe(mapped_to)].fd, off_t(layout.file_offset(mapped_to))) == MAP_FAILED) {
        const Stripe& s = stripes[layout.stripe(mapped_to)];
        sink->fail("cannot map " + s.partial + " at byte offset " + std::to_string(layout.file_offset(mapped_to)) +
                   ": " + errno_text(errno));
        return false;
      }
    return true;
  }
  // Windows below `offset` go (their chunks are all written): the mapping stays small.
  void unmap_below(uint64_t offset) {
    while (mapped_from + window_bytes <= std::min(offset, mapped_to)) {
      ::mmap(va + mapped_from, window_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
      mapped_from += window_bytes;
    }
  }
  void unmap_all() {
    if (!va) return;
    ::munmap(va, va_bytes);
    va = nullptr;
    mapped = false;
  }

  void write_error(uint64_t at, int err) const { sink->fail(write_error_text_at(at, err)); }
  // `at`: a stream offset.
  std::string write_error_text_at(uint64_t at, int err) const {
    return write_error_text(stripes[layout.stripe(at)], layout.file_offset(at), err);
  }
  static std::string write_error_text(const Stripe& s, uint64_t file_offset, int err) {
    if (err == ENOSPC || err == EDQUOT)
      return "no space left on device writing " + s.partial + " (at byte offset " + std::to_string(file_offset) +
             "): free some space or save to another filesystem";
    return "cannot write " + s.partial + " at byte offset " + std::to_string(file_offset) + ": " + errno_text(err);
  }

  // The stream's bytes [at, at + n) into their stripes, buffered or (whole blocks only)
  // with O_DIRECT; false with *error.
  bool write_stream(uint64_t at, const std::byte* p, uint64_t n, bool use_direct, std::string* error) const {
    for (uint64_t done = 0; done < n;) {
      const uint64_t here = at + done, piece = std::min(n - done, layout.run(here));
      const Stripe& s = stripes[layout.stripe(here)];
      const uint64_t file_at = layout.file_offset(here);
      int err = 0;
      bool buffered = !use_direct || !s.direct_fd || direct_refused.load(std::memory_order_relaxed);
      if (!buffered) {
        err = pwrite_all(s.direct_fd.get(), p + done, piece, file_at);
        if (err == EINVAL) direct_refused = buffered = true;  // the device wants another alignment: buffered from now on
      }
      if (buffered) err = pwrite_all(s.fd, p + done, piece, file_at);
      if (err) {
        *error = write_error_text(s, file_at, err);
        return false;
      }
      done += piece;
    }
    return true;
  }

  // On a copy thread.
  bool place(uint64_t at, std::byte* header, std::span<const std::byte> payload, uint64_t* checksum,
             std::string* error) const {
    const uint64_t seed = header_seed(header);
    const uint64_t end = at + kRecordHeaderBytes + payload.size();
    if (mapped && end <= va_bytes) {  // reserve_chunk() mapped it, and nothing before it is unmapped yet
      // Page by page: allocated (MADV_POPULATE_WRITE: a full tmpfs is an error here, where
      // a plain store would raise SIGBUS), then hashed and copied while in the cache.
      std::byte* dest = va + at + kRecordHeaderBytes;
      XXH3_state_t state;
      XXH3_INITSTATE(&state);
      XXH3_64bits_reset_withSeed(&state, seed);
      for (size_t done = 0; done < payload.size();) {
        const size_t piece = std::min(kCopyPieceBytes, payload.size() - done);
        const uintptr_t lo = reinterpret_cast<uintptr_t>(dest + done - (done == 0 ? kRecordHeaderBytes : 0)) & ~uintptr_t{4095};
        const uintptr_t hi = (reinterpret_cast<uintptr_t>(dest + done + piece) + 4095) & ~uintptr_t{4095};
        if (::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_POPULATE_WRITE) != 0) {
          const int err = errno;
          *error = populate_error(at + kRecordHeaderBytes + done, err);
          return false;
        }
        XXH3_64bits_update(&state, payload.data() + done, piece);
        std::memcpy(dest + done, payload.data() + done, piece);
        done += piece;
      }
      *checksum = XXH3_64bits_digest(&state);
      set_checksum(header, *checksum);
      std::memcpy(va + at, header, kRecordHeaderBytes);  // its page was populated with the first piece
      return true;
    }
    if (direct && !direct_refused.load(std::memory_order_relaxed)) {
      // Laid out in a block-aligned buffer as in the stream: the chunk's whole blocks go with
      // O_DIRECT (a unit is whole blocks, so they stay whole in the stripes), its partial first
      // and last blocks (shared with the records around it, all written buffered) with pwrite.
      const uint64_t base = at / kBlock * kBlock, a = (at + kBlock - 1) / kBlock * kBlock, b = end / kBlock * kBlock;
      if (b > a) {
        const size_t cap = size_t((end + kBlock - 1) / kBlock * kBlock - base);
        void* buf = take_bounce(cap);
        if (!buf) {
          *error = "cannot allocate " + std::to_string(cap) + " bytes for writing " + stripes[0].partial +
                   ": free host memory";
          return false;
        }
        std::byte* rec = static_cast<std::byte*>(buf) + (at - base);
        *checksum = copy_hashing(rec + kRecordHeaderBytes, payload.data(), payload.size(), seed);
        set_checksum(header, *checksum);
        std::memcpy(rec, header, kRecordHeaderBytes);
        bool ok = write_stream(a, static_cast<std::byte*>(buf) + (a - base), b - a, true, error);
        if (ok && a > at) ok = write_stream(at, rec, a - at, false, error);
        if (ok && end > b) ok = write_stream(b, rec + (b - at), end - b, false, error);
        give_bounce(buf, cap);
        return ok;
      }
    }
    *checksum = copy_hashing(nullptr, payload.data(), payload.size(), seed);
    set_checksum(header, *checksum);
    return write_stream(at, header, kRecordHeaderBytes, false, error) &&
           write_stream(at + kRecordHeaderBytes, payload.data(), payload.size(), false, error);
  }
  // 0 or the errno of the write that failed.
  static int pwrite_all(int to, const std::byte* p, uint64_t n, uint64_t at) {
    for (uint64_t done = 0; done < n;) {
      const ssize_t w = ::pwrite(to, p + done, size_t(n - done), off_t(at + done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return w < 0 ? errno : EIO;
      done += uint64_t(w);
    }
    return 0;
  }
  void* take_bounce(size_t bytes) const {
    {
      std::lock_guard l(bounce_mu);
      for (auto it = bounce_free.begin(); it != bounce_free.end(); ++it)
        if (it->second >= bytes) {
          void* p = it->first;
          bounce_free.erase(it);
          return p;
        }
    }
    return std::aligned_alloc(kBlock, bytes);
  }
  void give_bounce(void* p, size_t bytes) const {
    std::lock_guard l(bounce_mu);
    bounce_free.emplace_back(p, bytes);
  }
  // `at`: a stream offset.
  std::string populate_error(uint64_t at, int err) const {
    // The kernel says EFAULT where the fault would have raised SIGBUS: on tmpfs, no room.
    struct statvfs v{};
    if (err == EFAULT &&
        (::fstatvfs(stripes[0].fd, &v) != 0 || uint64_t(v.f_bavail) * v.f_frsize < kChunkBytes + kRecordHeaderBytes))
      err = ENOSPC;
    if (err == ENOMEM)
      return "out of memory writing " + stripes[layout.stripe(at)].partial + " (at byte offset " +
             std::to_string(layout.file_offset(at)) + "): free host memory or save to another filesystem";
    return write_error_text_at(at, err);
  }

  bool set_up(const SinkOptions& o) {
    slot_capacity = kStagingHeaderRoom + o.staging_bytes;
    slots.resize(o.staging_buffers);
    for (Slot& s : slots) {
      s.buffer = static_cast<std::byte*>(sink->staging_alloc(slot_capacity));
      if (!s.buffer)
        return sink->fail("cannot allocate " + std::to_string(o.staging_buffers) + " staging buffers of " +
                          std::to_string(slot_capacity) + " bytes for writing " + stripes[0].partial +
                          ": free host memory or lower staging_buffers/staging_bytes");
    }
    // Where io_uring is unavailable (old kernel, seccomp) the writes are plain pwrites.
    ring_ready = io_uring_queue_init(kRingEntries, &ring, 0) == 0;
    return true;
  }

  ~Impl() {
    while (in_flight) reap();  // the kernel may still read the buffers
    unmap_all();
    for (auto& [p, n] : bounce_free) std::free(p);
    if (ring_ready) io_uring_queue_exit(&ring);
    for (Slot& s : slots) sink->staging_free(s.buffer);
    if (!path.empty() && !finished)
      for (Stripe& s : stripes) {
        s.direct_fd.reset();
        s.owned_fd.reset();
        if (s.created) ::unlink(s.partial.c_str());
      }
  }

  // A piece of a slot's bytes written (or not: err).
  void piece_done(Slot& s, uint64_t n, int err, uint64_t at) {
    if (err) return write_error(at, err);
    s.done += n;
    if (s.done == s.bytes) {
      completed += s.bytes;
      sink->report_progress(completed);
    }
  }

  // The slot's bytes, a write per stripe unit they cover.
  void submit(size_t index) {
    Slot& s = slots[index];
    s.done = 0;
    for (uint64_t p = 0; p < s.bytes && !sink->failed();) {
      const uint64_t n = std::min<uint64_t>(s.bytes - p, layout.run(s.at + p));
      submit_piece(index, p, n);
      p += n;
    }
  }
  void submit_piece(size_t index, uint64_t p, uint64_t n) {
    Slot& s = slots[index];
    const uint64_t at = s.at + p;
    const int fd = stripes[layout.stripe(at)].fd;
    if (!ring_ready) return piece_done(s, n, pwrite_all(fd, s.data + p, n, layout.file_offset(at)), at);
    while (in_flight >= kRingEntries) reap();
    if (sink->failed()) return;
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);  // each is submitted at once: null only if that breaks
    if (!sqe) return write_error(at, EBUSY);
    io_uring_prep_write(sqe, fd, s.data + p, unsigned(n), layout.file_offset(at));
    io_uring_sqe_set_data64(sqe, uint64_t(index) << 32 | p);
    ++in_flight;
    ++s.pieces;
    const int rc = io_uring_submit(&ring);
    if (rc < 0) {
      // Not queued: nothing will complete for it.
      --in_flight;
      --s.pieces;
      write_error(at, -rc);
    }
  }

  // Waits for one write to complete.
  void reap() {
    io_uring_cqe* cqe = nullptr;
    int rc;
    while ((rc = io_uring_wait_cqe(&ring, &cqe)) == -EINTR) {
    }
    if (rc < 0) {
      // The ring itself broke: nothing more will complete.
      sink->fail("io_uring wait while writing " + stripes[0].partial + ": " + errno_text(-rc));
      in_flight = 0;
      for (Slot& s : slots) s.pieces = 0;
      return;
    }
    const uint64_t data = io_uring_cqe_get_data64(cqe);
    const int result = cqe->res;
    io_uring_cqe_seen(&ring, cqe);
    --in_flight;
    Slot& s = slots[size_t(data >> 32)];
    --s.pieces;
    const uint64_t p = data & 0xFFFFFFFFu, at = s.at + p, n = std::min<uint64_t>(s.bytes - p, layout.run(at));
    if (result <= 0) return piece_done(s, n, result < 0 ? -result : EIO, at);
    // A short write: the rest at once (rare).
    const int err = uint64_t(result) < n ? pwrite_all(stripes[layout.stripe(at)].fd, s.data + p + result,
                                                      n - uint64_t(result), layout.file_offset(at) + uint64_t(result))
                                         : 0;
    piece_done(s, n, err, at);
  }

  // The next slot of the ring once its earlier writes completed; -1 after a failure.
  int take_slot() {
    size_t index = next_slot;
    next_slot = (next_slot + 1) % slots.size();
    while (slots[index].pieces) reap();
    if (sink->failed()) return -1;
    slots[index].held = true;
    return int(index);
  }

  void flush_copy() {
    if (copy_slot < 0) return;
    Slot& s = slots[size_t(std::exchange(copy_slot, -1))];
    s.held = false;
    if (s.bytes > 0 && !sink->failed()) submit(size_t(&s - slots.data()));
  }

  // After the trailer: each stripe cut to its size, its header written, synced, renamed
  // (stripe 0 last); stripes of an earlier save beyond this one's count removed.
  bool complete_set() {
    const uint64_t stream = produced;
    std::vector<std::byte> header(kStripeHeaderBytes);
    for (unsigned k = 0; k < stripes.size(); ++k) {
      Stripe& s = stripes[k];
      const uint64_t size = layout.file_bytes(k, stream);
      if (::ftruncate(s.fd, off_t(size)) != 0)
        return sink->fail("cannot truncate " + s.partial + " to " + std::to_string(size) + " bytes: " + errno_text(errno));
      encode_stripe_header(header.data(), {k, unsigned(stripes.size()), layout.unit, stream, set_id});
      if (const int err = pwrite_all(s.fd, header.data(), header.size(), 0)) return sink->fail(write_error_text(s, 0, err));
    }
    // One after the other, on this thread: a thread started here would leave its stack
    // cached in the area where a later context's module data goes (CopyThreads says why).
    // The kernel's flusher threads write the stripes back meanwhile anyway.
    for (Stripe& s : stripes)
      if (::fsync(s.fd) != 0) return sink->fail("cannot fsync " + s.partial + ": " + errno_text(errno));
    for (Stripe& s : stripes)
      if (::close(s.owned_fd.release()) != 0) return sink->fail("cannot close " + s.partial + ": " + errno_text(errno));
    for (unsigned k = unsigned(stripes.size()); k-- > 0;) {
      Stripe& s = stripes[k];
      if (::rename(s.partial.c_str(), s.path.c_str()) != 0)
        return sink->fail("cannot rename " + s.partial + " to " + s.path + ": " + errno_text(errno));
      s.created = false;  // under its final name now
    }
    finished = true;
    for (unsigned k = unsigned(stripes.size()); k < kMaxStripes; ++k) ::unlink(stripe_path(path, k).c_str());
    // The renames are durable once the directory is synced.
    std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/') + 1);
    vmrpc::UniqueFd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dir_fd || ::fsync(dir_fd.get()) != 0)
      return sink->fail("saved " + path + " but cannot fsync its directory " + dir + ": " + errno_text(errno) +
                        " (the rename may not survive a crash)");
    return true;
  }
};

FileSink::FileSink(std::string path, SinkOptions options) : Sink(std::move(options)), impl_(new Impl(this)) {
  if (failed()) return;
  if (impl_->create(path, this->options()) && impl_->set_up(this->options())) impl_->choose_chunk_writes(this->options());
}

FileSink::FileSink(int fd, SinkOptions options) : Sink(std::move(options)), impl_(new Impl(this)) {
  Impl::Stripe s;
  s.partial = "state file (fd " + std::to_string(fd) + ")";
  s.fd = fd;
  impl_->stripes.push_back(std::move(s));
  if (failed()) return;
  off_t at = ::lseek(fd, 0, SEEK_CUR);
  if (at < 0) {
    fail(impl_->stripes[0].partial + " is not seekable (" + errno_text(errno) +
         "): pass a regular file; pipes and sockets are not supported");
    return;
  }
  impl_->layout = {uint64_t(at), kDefaultStripeUnit, 1};  // one stripe: the stream from `at` on
  if (impl_->set_up(this->options())) impl_->choose_chunk_writes(this->options());
}

FileSink::~FileSink() { stop_copies(); }

const char* FileSink::chunk_writes() const {
  return impl_->mapped ? "mapped" : impl_->direct && !impl_->direct_refused ? "direct" : "pwritev";
}  // the copy threads write through impl_

unsigned FileSink::stripes() const { return unsigned(impl_->stripes.size()); }

bool FileSink::reserve_chunk(size_t bytes, uint64_t* at) {
  Impl& m = *impl_;
  m.flush_copy();  // the small records before it
  if (failed()) return false;
  *at = m.produced;
  m.produced += bytes;
  m.chunk_ends.push_back(*at + bytes);
  if (m.mapped) {
    m.unmap_below(m.retired_to);
    if (!m.map_to(*at + bytes) && failed()) return false;  // else beyond the range: pwritev
  }
  return true;
}

bool FileSink::place_chunk(uint64_t at, std::byte* header, std::span<const std::byte> payload, uint64_t* checksum,
                           std::string* error) const {
  return impl_->place(at, header, payload, checksum, error);
}

void FileSink::chunk_done(size_t bytes) {
  Impl& m = *impl_;
  if (!m.chunk_ends.empty()) {
    m.retired_to = m.chunk_ends.front();
    m.chunk_ends.pop_front();
  }
  m.completed += bytes;
  report_progress(m.completed);
}

std::byte* FileSink::get_staging(size_t payload_bytes) {
  (void)payload_bytes;
  impl_->flush_copy();
  int index = impl_->take_slot();
  return index < 0 ? nullptr : impl_->slots[size_t(index)].buffer;
}

bool FileSink::put_staging(std::byte* buffer, std::span<const std::byte> stream_bytes) {
  auto it = std::find_if(impl_->slots.begin(), impl_->slots.end(), [&](const Impl::Slot& s) { return s.buffer == buffer; });
  if (it == impl_->slots.end()) return fail("state sink: put_staging() of a buffer not from this sink");
  it->held = false;
  if (stream_bytes.empty() || failed()) return !failed();
  it->at = impl_->produced;
  it->data = stream_bytes.data();
  it->bytes = stream_bytes.size();
  impl_->produced += stream_bytes.size();
  impl_->submit(size_t(it - impl_->slots.begin()));
  return !failed();
}

bool FileSink::put_copy(std::span<const std::byte> bytes) {
  Impl& m = *impl_;
  while (!bytes.empty()) {
    if (failed()) return false;
    if (m.copy_slot < 0) {
      m.copy_slot = m.take_slot();
      if (m.copy_slot < 0) return false;
      Impl::Slot& s = m.slots[size_t(m.copy_slot)];
      s.at = m.produced;
      s.data = s.buffer;
      s.bytes = 0;
      s.done = 0;
    }
    Impl::Slot& s = m.slots[size_t(m.copy_slot)];
    size_t n = std::min(bytes.size(), m.slot_capacity - s.bytes);
    std::memcpy(s.buffer + s.bytes, bytes.data(), n);
    s.bytes += n;
    m.produced += n;
    bytes = bytes.subspan(n);
    if (s.bytes == m.slot_capacity) m.flush_copy();
  }
  return !failed();
}

bool FileSink::complete() {
  Impl& m = *impl_;
  m.flush_copy();
  while (m.in_flight) m.reap();
  if (failed()) return false;
  m.unmap_all();
  for (Impl::Stripe& s : m.stripes) s.direct_fd.reset();
  if (m.path.empty()) {  // a borrowed fd: the bare stream, synced
    if (::fsync(m.stripes[0].fd) != 0) return fail("cannot fsync " + m.stripes[0].partial + ": " + errno_text(errno));
    return true;
  }
  return m.complete_set();
}

// ---------------------------------------------------------------------------------- Source

Source::Source(std::string name, Limits limits, Progress progress)
    : name_(std::move(name)), limits_(limits), progress_(std::move(progress)) {}

Source::~Source() = default;

std::span<const std::byte> Source::view_at(uint64_t, size_t) { return {}; }

void Source::set_open_error(std::string message) {
  error_ = std::move(message);
  state_ = State::kFailed;
}

bool Source::fail(std::string* why, std::string message) {
  if (state_ != State::kFailed) {
    error_ = name_ + ": " + message;
    state_ = State::kFailed;
  }
  if (why) *why = error_;
  return false;
}

bool Source::fail_record(std::string* why, uint64_t index, uint64_t offset, const std::string& message) {
  return fail(why, "record " + std::to_string(index) + " at byte offset " + std::to_string(offset) + ": " + message);
}

bool Source::verify(const std::string& what_record, uint64_t index, uint64_t offset, uint64_t expected,
                    uint64_t actual, std::string* why) {
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
  // The fuzzer explores what lies behind the checksums (unit tests cover mismatches).
  (void)what_record, (void)index, (void)offset, (void)expected, (void)actual, (void)why;
  return true;
#else
  if (expected == actual) return true;
  return fail_record(why, index, offset,
                     what_record + ": checksum mismatch (stored " + hex(expected) + ", computed " + hex(actual) +
                         "): the data is corrupt; use another copy of the state");
#endif
}

bool Source::read_header(std::string* why) {
  const uint64_t size = this->size();
  std::byte fixed[kFixedHeaderBytes];
  const size_t have = size_t(std::min<uint64_t>(size, sizeof fixed));
  if (have < sizeof kMagic) return fail(why, "not a vmcuda state file (" + std::to_string(size) + " bytes)");
  if (!read_at(0, {fixed, have}, why)) return fail(why, *why);
  if (std::memcmp(fixed, kMagic, sizeof kMagic) != 0)
    return fail(why, "not a vmcuda state file (it does not start with VMCUDAST)");
  if (have < 12) return fail(why, "truncated in its header (" + std::to_string(size) + " bytes)");
  version_ = load_u32(fixed + 8);
  if (version_ != kFormatVersion)
    return fail(why, "state file format version " + std::to_string(version_) + "; this vmcuda-stub reads version " +
                         std::to_string(kFormatVersion));
  if (have < kFixedHeaderBytes) return fail(why, "truncated in its header (" + std::to_string(size) + " bytes)");
  const uint32_t header_bytes = load_u32(fixed + 12), reserved = load_u32(fixed + 16),
                 creator_bytes = load_u32(fixed + 20);
  if (creator_bytes > kMaxCreatorBytes)
    return fail(why, "corrupt header: creator string of " + std::to_string(creator_bytes) + " bytes (at most " +
                         std::to_string(kMaxCreatorBytes) + ")");
  if (header_bytes != kFixedHeaderBytes + creator_bytes + 8 || reserved != 0)
    return fail(why, "corrupt header: " + std::to_string(header_bytes) + " header bytes with a " +
                         std::to_string(creator_bytes) + "-byte creator, reserved field " + hex(reserved));
  if (header_bytes > size) return fail(why, "truncated in its header (" + std::to_string(size) + " bytes)");
  if (size > limits_.max_total_bytes)
    return fail(why, "stream of " + std::to_string(size) + " bytes is over this reader's limit of " +
                         std::to_string(limits_.max_total_bytes) + " bytes");
  std::vector<std::byte> header(header_bytes);
  if (!read_at(0, header, why)) return fail(why, *why);
  uint64_t stored = load_u64(&header[header_bytes - 8]);
  uint64_t computed = hash({header.data(), header_bytes - size_t{8}});
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
  if (stored != computed)
    return fail(why, "corrupt header: checksum mismatch (stored " + hex(stored) + ", computed " + hex(computed) + ")");
#else
  (void)stored, (void)computed;
#endif
  creator_.assign(reinterpret_cast<const char*>(&header[kFixedHeaderBytes]), creator_bytes);
  offset_ = header_bytes;
  state_ = State::kBetween;
  return true;
}

bool Source::next(RecordHeader* out, std::string* why) {
  if (state_ == State::kFailed) return fail(why, "");
  if (state_ == State::kDone) {
    if (why) why->clear();
    return false;
  }
  if (state_ == State::kStart && !read_header(why)) return false;
  if (!skip_rest(why)) return false;

  const uint64_t index = records_, at = offset_, left = size() - offset_;
  if (index >= limits_.max_records)
    return fail_record(why, index, at, "more records than this reader's limit of " + std::to_string(limits_.max_records));
  if (left < kRecordHeaderBytes)
    return fail_record(why, index, at,
                       left == 0 ? "the stream ends without its trailer: truncated"
                                 : "only " + std::to_string(left) + " bytes left for a record header: truncated");
  std::byte raw[kRecordHeaderBytes];
  if (!read_at(at, raw, why)) return fail_record(why, index, at, *why);
  RecordHeader h;
  h.type = load_u32(raw);
  h.flags = load_u32(raw + 4);
  h.id = load_u64(raw + 8);
  h.payload_bytes = load_u64(raw + 16);
  h.index = index;
  h.offset = at;
  const uint64_t checksum = load_u64(raw + 24), seed = header_seed(raw);
  const uint64_t payload_left = left - kRecordHeaderBytes;
  const std::string what = "record type " + hex(h.type) + " id " + std::to_string(h.id);

  if (h.type == kTrailerType) {
    if (h.payload_bytes != kTrailerPayloadBytes || h.flags != 0)
      return fail_record(why, index, at, "corrupt trailer: " + std::to_string(h.payload_bytes) + " payload bytes, flags " + hex(h.flags));
    if (payload_left < kTrailerPayloadBytes) return fail_record(why, index, at, "the trailer is cut short: truncated");
    std::byte t[kTrailerPayloadBytes];
    if (!read_at(at + kRecordHeaderBytes, t, why)) return fail_record(why, index, at, *why);
    if (!verify("trailer", index, at, checksum, hash(t, seed), why)) return false;
    const uint64_t count = load_u64(t), bytes = load_u64(t + 8), records_fold = load_u64(t + 16);
    if (count != records_ || bytes != at)
      return fail_record(why, index, at, "the trailer counts " + std::to_string(count) + " records in " + std::to_string(bytes) +
                                             " bytes; the stream has " + std::to_string(records_) + " in " +
                                             std::to_string(at) + ": records lost or added");
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
    if (records_fold != checksum_fold_)
      return fail_record(why, index, at, "the trailer's checksum over the records does not match: records replaced");
#else
    (void)records_fold;
#endif
    if (payload_left > kTrailerPayloadBytes)
      return fail_record(why, index, at, std::to_string(payload_left - kTrailerPayloadBytes) +
                                             " bytes after the trailer: not one complete stream");
    offset_ = size();
    state_ = State::kDone;
    if (progress_) progress_(offset_, size());
    if (why) why->clear();
    return false;
  }
  if (h.type == kChunkType) return fail_record(why, index, at, "a chunk record outside a blob");
  if (h.type >= kFirstReservedType)
    return fail_record(why, index, at, "record type " + hex(h.type) + " is reserved and unknown to this reader");
  if (h.flags & ~kFlagBlob) return fail_record(why, index, at, what + ": unknown flags " + hex(h.flags));

  if (h.is_blob()) {
    if (h.payload_bytes != kBlobPayloadBytes)
      return fail_record(why, index, at, what + ": a blob header with " + std::to_string(h.payload_bytes) + " payload bytes, not 8");
    if (payload_left < kBlobPayloadBytes) return fail_record(why, index, at, what + ": blob header cut short: truncated");
    std::byte total[kBlobPayloadBytes];
    if (!read_at(at + kRecordHeaderBytes, total, why)) return fail_record(why, index, at, *why);
    if (!verify(what + " (blob header)", index, at, checksum, hash(total, seed), why)) return false;
    h.payload_bytes = load_u64(total);
    // Every chunk brings a header too, so the blob's bytes alone must fit what is left.
    if (h.payload_bytes > payload_left - kBlobPayloadBytes)
      return fail_record(why, index, at, what + ": a blob of " + std::to_string(h.payload_bytes) + " bytes; only " +
                                             std::to_string(payload_left - kBlobPayloadBytes) + " bytes are left: truncated");
    offset_ = at + kRecordHeaderBytes + kBlobPayloadBytes;
    blob_left_ = h.payload_bytes;
    blob_chunks_ = 0;
    state_ = State::kBlob;
  } else {
    if (h.payload_bytes > limits_.max_record_bytes)
      return fail_record(why, index, at, what + ": payload of " + std::to_string(h.payload_bytes) +
                                             " bytes is over this reader's limit of " + std::to_string(limits_.max_record_bytes));
    if (h.payload_bytes > payload_left)
      return fail_record(why, index, at, what + ": payload of " + std::to_string(h.payload_bytes) + " bytes; only " +
                                             std::to_string(payload_left) + " bytes are left: truncated");
    offset_ = at + kRecordHeaderBytes;
    current_seed_ = seed;
    state_ = State::kPayload;
  }
  ++records_;
  checksum_fold_ = fold(checksum_fold_, checksum);
  current_ = h;
  current_checksum_ = checksum;
  *out = h;
  return true;
}

bool Source::read_payload(std::vector<std::byte>* payload, std::string* why) {
  if (state_ == State::kFailed) return fail(why, "");
  if (state_ != State::kPayload)
    return fail(why, "read_payload(): the current record is not a small record with its payload unread");
  const RecordHeader& h = current_;
  payload->resize(size_t(h.payload_bytes));  // bounded by max_record_bytes and the size in next()
  if (!read_at(offset_, *payload, why)) return fail_record(why, h.index, h.offset, *why);
  if (!verify("record type " + hex(h.type) + " id " + std::to_string(h.id), h.index, h.offset, current_checksum_,
              hash(*payload, current_seed_), why))
    return false;
  offset_ += h.payload_bytes;
  state_ = State::kBetween;
  if (progress_) progress_(offset_, size());
  return true;
}

bool Source::skip_rest(std::string* why) {
  if (state_ == State::kPayload) {
    // Read and verified all the same: a skipped record must not hide corruption.
    const RecordHeader& h = current_;
    XXH3_state_t hs;
    XXH3_INITSTATE(&hs);
    XXH3_64bits_reset_withSeed(&hs, current_seed_);
    scratch_.resize(size_t(std::min<uint64_t>(h.payload_bytes, kSkipPieceBytes)));
    for (uint64_t done = 0; done < h.payload_bytes;) {
      size_t n = size_t(std::min<uint64_t>(h.payload_bytes - done, scratch_.size()));
      if (!read_at(offset_ + done, {scratch_.data(), n}, why)) return fail_record(why, h.index, h.offset, *why);
      XXH3_64bits_update(&hs, scratch_.data(), n);
      done += n;
    }
    if (!verify("record type " + hex(h.type) + " id " + std::to_string(h.id), h.index, h.offset, current_checksum_,
                XXH3_64bits_digest(&hs), why))
      return false;
    offset_ += h.payload_bytes;
    state_ = State::kBetween;
  }
  if (state_ == State::kBlob) {
    std::span<const std::byte> chunk;
    do {
      if (!read_chunk_view(&chunk, why)) return false;
    } while (!chunk.empty());
  }
  return true;
}

bool Source::chunk_header(uint64_t* bytes, std::string* why) {
  const RecordHeader& blob = current_;
  const std::string what = "chunk " + std::to_string(blob_chunks_) + " of blob type " + hex(blob.type) + " id " +
                           std::to_string(blob.id) + " (record " + std::to_string(blob.index) + ")";
  const uint64_t index = records_, at = offset_, left = size() - offset_;
  if (index >= limits_.max_records)
    return fail_record(why, index, at, "more records than this reader's limit of " + std::to_string(limits_.max_records));
  if (left < kRecordHeaderBytes) return fail_record(why, index, at, what + ": the stream ends: truncated");
  std::byte raw[kRecordHeaderBytes];
  if (!read_at(at, raw, why)) return fail_record(why, index, at, *why);
  const uint32_t type = load_u32(raw), flags = load_u32(raw + 4);
  const uint64_t id = load_u64(raw + 8), n = load_u64(raw + 16);
  if (type != kChunkType)
    return fail_record(why, index, at, what + " expected; found record type " + hex(type) + " with " +
                                           std::to_string(blob_left_) + " bytes of the blob missing");
  if (flags != 0 || id != blob_chunks_)
    return fail_record(why, index, at, what + ": flags " + hex(flags) + ", chunk number " + std::to_string(id) + ": corrupt or out of order");
  if (n == 0 || n > kChunkBytes || n > blob_left_)
    return fail_record(why, index, at, what + ": " + std::to_string(n) + " bytes (1.." + std::to_string(kChunkBytes) +
                                           ", " + std::to_string(blob_left_) + " left in the blob)");
  if (n > left - kRecordHeaderBytes)
    return fail_record(why, index, at, what + ": " + std::to_string(n) + " bytes; only " +
                                           std::to_string(left - kRecordHeaderBytes) + " are left: truncated");
  chunk_checksum_ = load_u64(raw + 24);
  chunk_seed_ = header_seed(raw);
  *bytes = n;
  return true;
}

bool Source::finish_chunk(std::span<const std::byte> payload, std::string* why) {
  const RecordHeader& blob = current_;
  if (!verify("chunk " + std::to_string(blob_chunks_) + " of blob type " + hex(blob.type) + " id " + std::to_string(blob.id),
              records_, offset_, chunk_checksum_, hash(payload, chunk_seed_), why))
    return false;
  ++records_;
  checksum_fold_ = fold(checksum_fold_, chunk_checksum_);
  offset_ += kRecordHeaderBytes + payload.size();
  blob_left_ -= payload.size();
  ++blob_chunks_;
  if (progress_) progress_(offset_, size());
  return true;
}

bool Source::read_chunk(std::span<std::byte> dest, size_t* got, std::string* why) {
  *got = 0;
  if (state_ == State::kFailed) return fail(why, "");
  if (state_ != State::kBlob) return fail(why, "read_chunk(): the current record is not a blob");
  if (blob_left_ == 0) {
    state_ = State::kBetween;
    return true;
  }
  uint64_t n = 0;
  if (!chunk_header(&n, why)) return false;
  if (n > dest.size())
    return fail_record(why, records_, offset_, "a chunk of " + std::to_string(n) + " bytes does not fit the " +
                                                   std::to_string(dest.size()) + "-byte buffer (pass kChunkBytes)");
  std::span<std::byte> payload = dest.first(size_t(n));
  if (!read_at(offset_ + kRecordHeaderBytes, payload, why)) return fail_record(why, records_, offset_, *why);
  if (!finish_chunk(payload, why)) return false;
  *got = payload.size();
  return true;
}

bool Source::read_chunk_view(std::span<const std::byte>* chunk, std::string* why) {
  *chunk = {};
  if (state_ == State::kFailed) return fail(why, "");
  if (state_ != State::kBlob) return fail(why, "read_chunk_view(): the current record is not a blob");
  if (blob_left_ == 0) {
    state_ = State::kBetween;
    return true;
  }
  uint64_t n = 0;
  if (!chunk_header(&n, why)) return false;
  std::span<const std::byte> payload = view_at(offset_ + kRecordHeaderBytes, size_t(n));
  if (payload.empty()) {
    scratch_.resize(size_t(n));  // at most kChunkBytes
    if (!read_at(offset_ + kRecordHeaderBytes, scratch_, why)) return fail_record(why, records_, offset_, *why);
    payload = scratch_;
  }
  if (!finish_chunk(payload, why)) return false;
  *chunk = payload;
  return true;
}

bool Source::next_chunk(Chunk* chunk, std::string* why) {
  *chunk = {};
  if (state_ == State::kFailed) return fail(why, "");
  if (state_ != State::kBlob) return fail(why, "next_chunk(): the current record is not a blob");
  if (!concurrent_reads()) return fail(why, "next_chunk(): this source is not read by several threads");
  if (blob_left_ == 0) {
    state_ = State::kBetween;
    return true;
  }
  uint64_t n = 0;
  if (!chunk_header(&n, why)) return false;
  chunk->offset = offset_ + kRecordHeaderBytes;
  chunk->bytes = size_t(n);
  chunk->checksum = chunk_checksum_;
  chunk->seed = chunk_seed_;
  chunk->record = records_;
  chunk->record_offset = offset_;
  chunk->number = blob_chunks_;
  chunk->blob_type = current_.type;
  chunk->blob_id = current_.id;
  // Counted as read: its payload is verified by copy_chunk() (the trailer's fold is over the
  // stored checksums, which copy_chunk() holds the payloads to).
  ++records_;
  checksum_fold_ = fold(checksum_fold_, chunk_checksum_);
  offset_ += kRecordHeaderBytes + n;
  blob_left_ -= n;
  ++blob_chunks_;
  if (progress_) progress_(offset_, size());
  return true;
}

bool Source::copy_chunk(const Chunk& c, std::span<std::byte> dest, std::string* why) const {
  const std::string what = "chunk " + std::to_string(c.number) + " of blob type " + hex(c.blob_type) + " id " +
                           std::to_string(c.blob_id);
  auto failed = [&](const std::string& message) {
    if (why)
      *why = name_ + ": record " + std::to_string(c.record) + " at byte offset " + std::to_string(c.record_offset) +
             ": " + message;
    return false;
  };
  if (dest.size() < c.bytes)
    return failed(what + " of " + std::to_string(c.bytes) + " bytes does not fit the " + std::to_string(dest.size()) +
                  "-byte buffer");
  dest = dest.first(c.bytes);
  std::string err;
  XXH3_state_t state;
  XXH3_INITSTATE(&state);
  XXH3_64bits_reset_withSeed(&state, c.seed);
  // Piece by piece, each hashed while it is in the cache: a memory source's bytes hashed and
  // copied from where they lie, a file's read and then hashed (a second pass over the whole
  // chunk would read it from memory again).
  for (size_t at = 0; at < c.bytes; at += kCopyPieceBytes) {
    const size_t n = std::min(kCopyPieceBytes, c.bytes - at);
    std::span<const std::byte> in_place;
    if (!read_concurrent(c.offset + at, dest.subspan(at, n), &in_place, &err)) return failed(err);
    if (in_place.size() == n) {
      XXH3_64bits_update(&state, in_place.data(), n);
      std::memcpy(dest.data() + at, in_place.data(), n);
    } else {
      XXH3_64bits_update(&state, dest.data() + at, n);
    }
  }
  const uint64_t computed = XXH3_64bits_digest(&state);
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
  (void)computed;
  return true;
#else
  if (computed == c.checksum) return true;
  return failed(what + ": checksum mismatch (stored " + hex(c.checksum) + ", computed " + hex(computed) +
                "): the data is corrupt; use another copy of the state");
#endif
}

void Source::reject(const std::string& message) {
  if (state_ == State::kFailed) return;
  error_ = message;
  state_ = State::kFailed;
}

bool Source::read_concurrent(uint64_t, std::span<std::byte>, std::span<const std::byte>*, std::string* why) const {
  if (why) *why = "this source is not read by several threads";
  return false;
}

// ---------------------------------------------------------------------------- MemorySource

MemorySource::MemorySource(std::shared_ptr<const MemoryStream> stream, Limits limits, Progress progress)
    : Source("state in host memory", limits, std::move(progress)), stream_(std::move(stream)) {
  if (!stream_) set_open_error(name() + ": no stream (the suspend did not finish)");
}

uint64_t MemorySource::size() const { return stream_ ? stream_->size() : 0; }

bool MemorySource::read_at(uint64_t offset, std::span<std::byte> dest, std::string* why) {
  if (stream_->read(offset, dest)) return true;
  if (why) *why = "reading " + std::to_string(dest.size()) + " bytes at byte offset " + std::to_string(offset) + ": past the end";
  return false;
}

std::span<const std::byte> MemorySource::view_at(uint64_t offset, size_t bytes) { return stream_->view(offset, bytes); }

bool MemorySource::read_concurrent(uint64_t offset, std::span<std::byte> dest, std::span<const std::byte>* in_place,
                                   std::string* why) const {
  // The stream is immutable: any number of threads read it at once.
  *in_place = stream_->view(offset, dest.size());
  if (in_place->size() == dest.size() || stream_->read(offset, dest)) return true;
  if (why) *why = "reading " + std::to_string(dest.size()) + " bytes at byte offset " + std::to_string(offset) + ": past the end";
  return false;
}

// ------------------------------------------------------------------------------ FileSource

namespace {
// Opens a stripe for reading: no symlink followed, no FIFO waited on. -1 with *why (the
// path first) where it cannot.
int open_stripe_file(const std::string& path, bool first, std::string* why) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd >= 0) return fd;
  const int err = errno;
  if (err == ENOENT && !first)
    *why = path + " is missing: the save is incomplete or its files were not all copied; restore from a complete copy";
  else if (err == ELOOP)
    *why = path + " is a symbolic link: refused (a state file's stripes are regular files the stub wrote)";
  else
    *why = path + ": cannot open: " + errno_text(err);
  return -1;
}
}  // namespace

FileSource::FileSource(const std::string& path, Limits limits, Progress progress)
    : Source("state file " + path, limits, std::move(progress)) {
  std::string why;
  const int fd = open_stripe_file(path, true, &why);
  if (fd < 0) {
    set_open_error("state file " + why);
    return;
  }
  open_set(fd, [&](unsigned k, std::string* w) { return open_stripe_file(stripe_path(path, k), false, w); });
}

FileSource::FileSource(int fd, std::string name, Limits limits, Progress progress)
    : FileSource(std::span<const int>(&fd, 1), std::move(name), limits, std::move(progress)) {}

FileSource::FileSource(std::span<const int> fds, std::string name, Limits limits, Progress progress)
    : Source("state file " + name, limits, std::move(progress)) {
  auto dup = [&](unsigned k, std::string* why) {
    if (k >= fds.size()) {
      *why = "stripe " + std::to_string(k) + " is missing (" + std::to_string(fds.size()) + " given)";
      return -1;
    }
    const int fd = ::fcntl(fds[k], F_DUPFD_CLOEXEC, 0);
    if (fd < 0) *why = "cannot dup fd " + std::to_string(fds[k]) + ": " + errno_text(errno);
    return fd;
  };
  std::string why;
  const int fd0 = fds.empty() ? -1 : dup(0, &why);
  if (fd0 < 0) {
    set_open_error(this->name() + ": " + (fds.empty() ? "no file given" : why));
    return;
  }
  open_set(fd0, dup);
}

FileSource::~FileSource() {
  for (Stripe& s : stripes_)
    if (s.fd >= 0) ::close(s.fd);
}

void FileSource::open_set(int fd0, const OpenStripe& open_stripe) {
  stripes_.push_back({fd0, 0, name().substr(std::strlen("state file "))});
  struct stat st0{};
  if (::fstat(fd0, &st0) != 0) return set_open_error(name() + ": cannot stat: " + errno_text(errno));
  if (!S_ISREG(st0.st_mode)) return set_open_error(name() + ": not a regular file");
  stripes_[0].size = uint64_t(st0.st_size);
  std::byte raw[kStripeHeaderBytes];
  const size_t have = size_t(std::min<uint64_t>(stripes_[0].size, sizeof raw));
  std::string why;
  if (have && !pread_all(stripes_[0], 0, {raw, have}, &why)) return set_open_error(name() + ": " + why);
  const bool ours = have >= 12 && std::memcmp(raw, kMagic, sizeof kMagic) == 0;
  const uint32_t version = ours ? load_u32(raw + 8) : 0;
  if (!ours || version == kFormatVersion) {
    // A single file written before stripes (or not a state file at all: the stream's parser says).
    layout_ = {0, kDefaultStripeUnit, 1};
    size_ = stripes_[0].size;
    ::posix_fadvise(fd0, 0, 0, POSIX_FADV_SEQUENTIAL);
    return;
  }
  if (version != kStripedVersion)
    return set_open_error(name() + ": state file format version " + std::to_string(version) +
                          "; this vmcuda-stub reads versions " + std::to_string(kFormatVersion) + " (a single file) and " +
                          std::to_string(kStripedVersion) + " (a striped set)");
  if (have < kStripeHeaderBytes)
    return set_open_error(name() + ": truncated in its stripe header (" + std::to_string(stripes_[0].size) + " bytes)");
  StripeHeader h;
  if (!decode_stripe_header(raw, &h, &why)) return set_open_error(name() + ": " + why);
  if (h.index != 0) return set_open_error(name() + ": its header says stripe " + std::to_string(h.index) + ", not 0");
  layout_ = {kStripeHeaderBytes, h.unit, h.count};
  if (h.stream_bytes > ~uint64_t{0} - (uint64_t{kMaxStripes} << 32))  // the sizes below cannot overflow
    return set_open_error(name() + ": corrupt stripe header: a stream of " + std::to_string(h.stream_bytes) + " bytes");
  size_ = h.stream_bytes;
  if (!check_stripe(0, raw, h.set_id, h.stream_bytes, &why)) return set_open_error(name() + ": " + why);
  for (unsigned k = 1; k < h.count; ++k) {
    const int fd = open_stripe(k, &why);
    if (fd < 0) return set_open_error(name() + ": stripe " + std::to_string(k) + " of " + std::to_string(h.count) + ": " + why);
    stripes_.push_back({fd, 0, stripe_path(stripes_[0].name, k)});
    Stripe& s = stripes_.back();
    struct stat st{};
    if (::fstat(fd, &st) != 0) return set_open_error(name() + ": cannot stat " + s.name + ": " + errno_text(errno));
    if (!S_ISREG(st.st_mode)) return set_open_error(name() + ": " + s.name + " is not a regular file: refused");
    if (st.st_uid != st0.st_uid)
      return set_open_error(name() + ": " + s.name + " is owned by uid " + std::to_string(st.st_uid) + ", stripe 0 by uid " +
                            std::to_string(st0.st_uid) + ": refused (not this save's)");
    s.size = uint64_t(st.st_size);
    if (s.size < kStripeHeaderBytes)
      return set_open_error(name() + ": " + s.name + " has " + std::to_string(s.size) + " bytes, no stripe header: truncated");
    if (!pread_all(s, 0, raw, &why)) return set_open_error(name() + ": " + why);
    if (!check_stripe(k, raw, h.set_id, h.stream_bytes, &why)) return set_open_error(name() + ": " + why);
  }
  for (const Stripe& s : stripes_) ::posix_fadvise(s.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
}

bool FileSource::check_stripe(unsigned k, const std::byte* raw, uint64_t set_id, uint64_t stream_bytes,
                              std::string* why) const {
  const Stripe& s = stripes_[k];
  StripeHeader h;
  if (!decode_stripe_header(raw, &h, why)) {
    *why = s.name + ": " + *why;
    return false;
  }
  if (h.index != k || h.count != layout_.count || h.unit != layout_.unit || h.stream_bytes != stream_bytes ||
      h.set_id != set_id) {
    *why = s.name + " is stripe " + std::to_string(h.index) + " of " + std::to_string(h.count) + " of set " + hex(h.set_id) +
           " (" + std::to_string(h.stream_bytes) + " bytes in units of " + std::to_string(h.unit) + "), not stripe " +
           std::to_string(k) + " of " + std::to_string(layout_.count) + " of set " + hex(set_id) + " (" +
           std::to_string(stream_bytes) + " in units of " + std::to_string(layout_.unit) +
           "): a stripe of another save; restore from a complete copy";
    return false;
  }
  const uint64_t want = layout_.file_bytes(k, stream_bytes);
  if (s.size != want) {
    *why = s.name + " has " + std::to_string(s.size) + " bytes; stripe " + std::to_string(k) + " of this set has " +
           std::to_string(want) + (s.size < want ? ": truncated" : ": bytes added");
    return false;
  }
  return true;
}

bool FileSource::read_at(uint64_t offset, std::span<std::byte> dest, std::string* why) {
  // Ask the kernel for the next chunks while the consumer copies this one to the GPU.
  const uint64_t want = std::min(size_, offset + dest.size() + kReadaheadBytes);
  if (want > advised_to_ + kChunkBytes || want == size_) {
    for (uint64_t at = std::max(advised_to_, offset); at < want;) {
      const uint64_t n = std::min(want - at, layout_.run(at));
      ::posix_fadvise(stripes_[layout_.stripe(at)].fd, off_t(layout_.file_offset(at)), off_t(n), POSIX_FADV_WILLNEED);
      at += n;
    }
    advised_to_ = std::max(advised_to_, want);
  }
  return read_stream(offset, dest, why);
}

bool FileSource::read_concurrent(uint64_t offset, std::span<std::byte> dest, std::span<const std::byte>* in_place,
                                 std::string* why) const {
  *in_place = {};
  if (offset > size_ || dest.size() > size_ - offset) {
    if (why) *why = "reading " + std::to_string(dest.size()) + " bytes at byte offset " + std::to_string(offset) + ": past the end";
    return false;
  }
  return read_stream(offset, dest, why);  // the readahead follows next_chunk()'s header reads
}

bool FileSource::read_stream(uint64_t offset, std::span<std::byte> dest, std::string* why) const {
  if (offset > size_ || dest.size() > size_ - offset) {
    if (why) *why = "reading " + std::to_string(dest.size()) + " bytes at byte offset " + std::to_string(offset) + ": past the end";
    return false;
  }
  for (size_t done = 0; done < dest.size();) {
    const uint64_t at = offset + done;
    const size_t n = size_t(std::min<uint64_t>(dest.size() - done, layout_.run(at)));
    if (!pread_all(stripes_[layout_.stripe(at)], layout_.file_offset(at), dest.subspan(done, n), why)) return false;
    done += n;
  }
  return true;
}

bool FileSource::pread_all(const Stripe& s, uint64_t offset, std::span<std::byte> dest, std::string* why) const {
  const std::string which = stripes_.size() > 1 ? " " + s.name : "";
  size_t done = 0;
  while (done < dest.size()) {
    ssize_t n = ::pread(s.fd, dest.data() + done, dest.size() - done, off_t(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      if (why) *why = "cannot read" + which + " at byte offset " + std::to_string(offset + done) + ": " + errno_text(errno);
      return false;
    }
    if (n == 0) {
      if (why) *why = "the file" + which + " ends at byte " + std::to_string(offset + done) + " (it shrank while being read)";
      return false;
    }
    done += size_t(n);
  }
  return true;
}

// ------------------------------------------------------------------------ ByteWriter/Reader

void ByteWriter::put_u8(uint8_t v) { bytes_.push_back(std::byte(v)); }
void ByteWriter::put_u32(uint32_t v) {
  std::byte b[4];
  store_u32(b, v);
  bytes_.insert(bytes_.end(), b, b + 4);
}
void ByteWriter::put_u64(uint64_t v) {
  std::byte b[8];
  store_u64(b, v);
  bytes_.insert(bytes_.end(), b, b + 8);
}
void ByteWriter::put_i32(int32_t v) { put_u32(uint32_t(v)); }
void ByteWriter::put_bytes(std::span<const std::byte> bytes) {
  put_u32(uint32_t(bytes.size()));  // metadata fields: larger data goes into blobs
  bytes_.insert(bytes_.end(), bytes.begin(), bytes.end());
}
void ByteWriter::put_string(std::string_view s) { put_bytes(std::as_bytes(std::span(s.data(), s.size()))); }

bool ByteReader::fail(std::string message) {
  if (error_.empty()) error_ = "offset " + std::to_string(pos_) + ": " + std::move(message);
  return false;
}

bool ByteReader::take(void* out, size_t n, const char* what) {
  if (!ok()) return false;
  if (n > remaining())
    return fail(std::string(what) + " needs " + std::to_string(n) + " bytes, " + std::to_string(remaining()) + " remain");
  std::memcpy(out, bytes_.data() + pos_, n);
  pos_ += n;
  return true;
}

bool ByteReader::get_u8(uint8_t* v) {
  *v = 0;
  return take(v, 1, "u8");
}
bool ByteReader::get_u32(uint32_t* v) {
  std::byte b[4];
  *v = 0;
  if (!take(b, 4, "u32")) return false;
  *v = load_u32(b);
  return true;
}
bool ByteReader::get_u64(uint64_t* v) {
  std::byte b[8];
  *v = 0;
  if (!take(b, 8, "u64")) return false;
  *v = load_u64(b);
  return true;
}
bool ByteReader::get_i32(int32_t* v) {
  uint32_t u = 0;
  bool ok = get_u32(&u);
  *v = int32_t(u);
  return ok;
}
bool ByteReader::get_bytes(std::vector<std::byte>* bytes, size_t max_bytes) {
  bytes->clear();
  uint32_t n = 0;
  if (!get_u32(&n)) return false;
  if (n > max_bytes) return fail("length " + std::to_string(n) + " is over the limit of " + std::to_string(max_bytes));
  if (n > remaining()) return fail("length " + std::to_string(n) + " runs past the end (" + std::to_string(remaining()) + " bytes remain)");
  bytes->assign(bytes_.begin() + pos_, bytes_.begin() + pos_ + n);
  pos_ += n;
  return true;
}
bool ByteReader::get_string(std::string* s, size_t max_bytes) {
  s->clear();
  uint32_t n = 0;
  if (!get_u32(&n)) return false;
  if (n > max_bytes) return fail("string length " + std::to_string(n) + " is over the limit of " + std::to_string(max_bytes));
  if (n > remaining()) return fail("string length " + std::to_string(n) + " runs past the end (" + std::to_string(remaining()) + " bytes remain)");
  s->assign(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
  pos_ += n;
  return true;
}
bool ByteReader::expect_end() {
  if (!ok()) return false;
  if (remaining() != 0) return fail(std::to_string(remaining()) + " unread bytes at the end");
  return true;
}

}  // namespace vmcuda::host::state
