# vmcuda top-level entry points (CMake underneath). See README.md.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all build install debs test test-sanitizers test-asan test-tsan fuzz bench clean vm-demo

all: build

build:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)

# Installs the host's and the guest's files (cmake/install.cmake): make install [PREFIX=/usr/local]
# [DESTDIR=/staging] [COMPONENT=host|guest|dkms]; the systemd unit and /etc files follow PREFIX
# (/usr: /lib/systemd/system and /etc). Packages: make debs (scripts/build-debs.sh, into dist/).
PREFIX ?= /usr/local
COMPONENT ?=
install: build
	cmake --install $(BUILD) --prefix $(PREFIX) $(if $(COMPONENT),--component $(COMPONENT))

debs:
	scripts/build-debs.sh --build $(BUILD) --out dist

# The README's test command: everything CI runs. After the main build's tests: the
# channel tests under ASan+UBSan and TSan, then the frame decoder fuzzer (in turn:
# each uses all cores).
test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	$(MAKE) --no-print-directory test-asan
	$(MAKE) --no-print-directory test-tsan
	$(MAKE) --no-print-directory fuzz

# ---------------------------------------------------------- sanitizers, fuzzing
# Each in its own build dir, without the benchmarks. The sanitizer builds use the
# default compiler (g++) and build only the channel tests (vmrpc_tests), which
# ctest runs one test per process as in the main build (state a test's threads set
# up on first use is only raced on that way), with payloads capped to stay quick.
# One test at a time: the two-process tests allow a child a fixed time to connect,
# which two of them side by side under a sanitizer can overrun (~15 s in all).
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_FLAGS ?=
SAN_ENV = VMRPC_TEST_MAX_PAYLOAD_MIB=32
# Readable reports (package llvm-14); the runtimes fall back to addr2line without it.
SYMBOLIZER := $(firstword $(wildcard /usr/lib/llvm-14/bin/llvm-symbolizer /usr/bin/llvm-symbolizer))
SYM_ENV = $(if $(SYMBOLIZER),ASAN_SYMBOLIZER_PATH=$(SYMBOLIZER) TSAN_SYMBOLIZER_PATH=$(SYMBOLIZER) UBSAN_SYMBOLIZER_PATH=$(SYMBOLIZER))
# Worker processes map their region at a fixed address (vmrpc/include/vmrpc/knobs.h); the
# default, 0x600000000000, is ASan's allocator space and outside TSan's application memory.
ASAN_ENV = VMRPC_WORKER_MAP_ADDRESS=0x680000000000 ASAN_OPTIONS=detect_leaks=1:check_initialization_order=1:strict_init_order=1 \
           UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
TSAN_ENV = VMRPC_WORKER_MAP_ADDRESS=0x7e9000000000 TSAN_OPTIONS=second_deadlock_stack=1$(if $(wildcard tests/tsan.supp),:suppressions=$(CURDIR)/tests/tsan.supp)
# gcc 12's TSan runtime cannot start under the larger mmap randomisation of some
# newer kernels ("unexpected memory mapping"); without ASLR it always can.
NO_ASLR := $(shell setarch $$(uname -m) -R true 2>/dev/null && echo setarch $$(uname -m) -R)
# ctest -R matching exactly the tests vmrpc_tests lists (other test programs are not built there).
VMRPC_TESTS_RE = $$(./tests/vmrpc_tests --gtest_list_tests | awk '/^[^ ]/ {s = $$1} /^  / {printf "%s^%s%s$$", sep, s, $$1; sep = "|"}')

test-sanitizers: test-asan test-tsan

test-asan:
	cmake -S . -B $(ASAN_BUILD) -DVMCUDA_SANITIZE=address -DVMCUDA_BENCH=OFF $(CMAKE_FLAGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS) --target vmrpc_tests
	cd $(ASAN_BUILD) && $(SAN_ENV) $(ASAN_ENV) $(SYM_ENV) ctest --output-on-failure -R "$(VMRPC_TESTS_RE)"

# gcc warns that TSan does not model atomic_thread_fence (ordering.h's full_fence):
# those fences only order the sleep/wake handshake; the data itself is published by
# release/acquire pairs, which TSan does check.
test-tsan:
	cmake -S . -B $(TSAN_BUILD) -DVMCUDA_SANITIZE=thread -DVMCUDA_BENCH=OFF -DCMAKE_CXX_FLAGS=-Wno-tsan $(CMAKE_FLAGS)
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target vmrpc_tests
	cd $(TSAN_BUILD) && $(SAN_ENV) $(TSAN_ENV) $(SYM_ENV) $(NO_ASLR) ctest --output-on-failure -R "$(VMRPC_TESTS_RE)"

# libFuzzer on what the host reads from a guest (tests/fuzz/): clang, its own build
# dir, a fresh seed corpus each run (generated, plus inputs checked in under
# tests/fuzz/corpus/, e.g. past crashes), FUZZ_SECONDS of fuzzing in one process (add
# FUZZ_FLAGS=-fork=N for N); a crash, leak, timeout or broken invariant fails it and
# leaves the input in $(FUZZ_BUILD)/fuzz-artifacts/ (replay: frame_decoder_fuzz FILE).
# Then the same for the stub's call handlers (session_fuzz, on the test executor; its
# checked-in inputs under tests/fuzz/corpus-session/, artifacts named session-*; replay:
# session_fuzz FILE) and for the state file reader (state_file_fuzz; tests/fuzz/corpus-state/,
# artifacts state-*) and for the host endpoint's life (endpoint_fuzz: connections, slots,
# holds and restores with garbage in the control words; tests/fuzz/corpus-endpoint/, artifacts
# endpoint-*): FUZZ_SECONDS each, four minutes in all by default.
fuzz:
	cmake -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DVMCUDA_FUZZ=ON \
	  -DVMCUDA_BENCH=OFF $(CMAKE_FLAGS)
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target frame_decoder_fuzz frame_decoder_fuzz_seeds \
	  session_fuzz session_fuzz_seeds state_file_fuzz state_file_fuzz_seeds endpoint_fuzz
	rm -rf $(FUZZ_BUILD)/fuzz-corpus $(FUZZ_BUILD)/fuzz-corpus-session $(FUZZ_BUILD)/fuzz-corpus-state \
	  $(FUZZ_BUILD)/fuzz-corpus-endpoint
	mkdir -p $(FUZZ_BUILD)/fuzz-corpus $(FUZZ_BUILD)/fuzz-corpus-session $(FUZZ_BUILD)/fuzz-corpus-state \
	  $(FUZZ_BUILD)/fuzz-corpus-endpoint $(FUZZ_BUILD)/fuzz-artifacts
	$(FUZZ_BUILD)/tests/fuzz/frame_decoder_fuzz_seeds $(FUZZ_BUILD)/fuzz-corpus
	if [ -d tests/fuzz/corpus ]; then cp -r tests/fuzz/corpus/. $(FUZZ_BUILD)/fuzz-corpus/; fi
	cd $(FUZZ_BUILD) && $(SYM_ENV) ./tests/fuzz/frame_decoder_fuzz -max_total_time=$(FUZZ_SECONDS) \
	  -max_len=70000 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=fuzz-artifacts/ \
	  $(FUZZ_FLAGS) fuzz-corpus
	$(FUZZ_BUILD)/tests/fuzz/session_fuzz_seeds $(FUZZ_BUILD)/fuzz-corpus-session
	if [ -d tests/fuzz/corpus-session ]; then cp -r tests/fuzz/corpus-session/. $(FUZZ_BUILD)/fuzz-corpus-session/; fi
	cd $(FUZZ_BUILD) && $(SYM_ENV) ./tests/fuzz/session_fuzz -max_total_time=$(FUZZ_SECONDS) \
	  -max_len=8192 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=fuzz-artifacts/session- \
	  $(FUZZ_FLAGS) fuzz-corpus-session
	$(FUZZ_BUILD)/tests/fuzz/state_file_fuzz_seeds $(FUZZ_BUILD)/fuzz-corpus-state
	if [ -d tests/fuzz/corpus-state ]; then cp -r tests/fuzz/corpus-state/. $(FUZZ_BUILD)/fuzz-corpus-state/; fi
	cd $(FUZZ_BUILD) && $(SYM_ENV) ./tests/fuzz/state_file_fuzz -max_total_time=$(FUZZ_SECONDS) \
	  -max_len=49152 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=fuzz-artifacts/state- \
	  $(FUZZ_FLAGS) fuzz-corpus-state
	cp -r tests/fuzz/corpus-endpoint/. $(FUZZ_BUILD)/fuzz-corpus-endpoint/
	cd $(FUZZ_BUILD) && $(SYM_ENV) ./tests/fuzz/endpoint_fuzz -max_total_time=$(FUZZ_SECONDS) \
	  -max_len=512 -timeout=30 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=fuzz-artifacts/endpoint- \
	  $(FUZZ_FLAGS) fuzz-corpus-endpoint

# The channel benchmark on this machine (docs/benchmarks.md); GPU benchmarks: scripts/gpu-bench.sh.
bench: build
	$(BUILD)/bench/vmrpc_bench

clean:
	rm -rf build build-*

# The main job: CUDA programs inside a QEMU guest (guest-lib over /dev/vmcuda0 and
# ivshmem) against vmcuda-stub on this host: the real GPU where the NVIDIA driver is,
# the test executor standing in for one elsewhere. Outputs are those of native runs.
VM_DEMO_PROGRAMS ?= device_query vector_add streams_events
vm-demo: build
	@if ldconfig -p | grep -q libcuda.so.1; then \
	  scripts/vmcuda-vm-run.sh --build $(BUILD) $(VM_DEMO_PROGRAMS) && where="this host's GPU (the NVIDIA driver)"; \
	else \
	  echo "vm-demo: no NVIDIA driver here: the stub runs on the test executor"; \
	  scripts/vmcuda-vm-run.sh --build $(BUILD) --test-stub $(VM_DEMO_PROGRAMS) && \
	    where="the test executor (no GPU here: it stands in for one)"; \
	fi && \
	echo "vm-demo: $(VM_DEMO_PROGRAMS) ran unmodified inside a QEMU guest, through vmcuda's libcudart.so.13 and" && \
	echo "  the guest driver (/dev/vmcuda0, ivshmem), served by vmcuda-stub on this host on $$where." && \
	echo "  Next: attach a real VM (libvirt): docs/attaching-a-vm.md; packages: make debs; a program on this host: $(BUILD)/host-stub/vmcuda-run -- ./app"
