# SPDX-License-Identifier: Apache-2.0
# FastTier build: daemons, unit tests, fuzzers, and the test/run entry points.

DIR ?= $(CURDIR)/run
PORT ?= 51080
SANITIZER ?=
ifeq ($(SANITIZER),)
BUILD ?= build
else
BUILD ?= build/$(SANITIZER)
endif

CC ?= cc
CFLAGS ?= -O2 -g
WARN := -Wall -Wextra -Wstrict-prototypes -Wmissing-prototypes -Werror
# Include roots: common/ for shared modules ("base/log.h", "http/http.h"), the top for "cloud/backend.h";
# each program adds its own folder ("target.h", "core/lom.h", "s3/s3.h").
CPPFLAGS += -D_GNU_SOURCE -Icommon -I.
ALL_CFLAGS = -std=c11 $(WARN) $(CFLAGS) -pthread -MMD -MP
LDLIBS := -luring -lmicrohttpd -lcurl -lssl -lcrypto -ljansson -lxxhash -lisal -larchive -lmsgpackc -lpthread

ifeq ($(SANITIZER),address)
ALL_CFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
else ifeq ($(SANITIZER),undefined)
ALL_CFLAGS += -fsanitize=undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=undefined
else ifeq ($(SANITIZER),thread)
ALL_CFLAGS += -fsanitize=thread
LDFLAGS += -fsanitize=thread
endif

srcs = $(sort $(shell find $(1) -name '*.c'))
COMMON_SRC := $(call srcs,common)
CLOUD_SRC := $(call srcs,cloud)
PROXY_SRC := $(call srcs,proxy)
TARGET_SRC := $(call srcs,target)
LOADER_SRC := $(call srcs,loader)
CLI_SRC := $(call srcs,cli)
UNIT_SRC := $(sort $(wildcard tests/unit/test_*.c))
FUZZ_SRC := $(sort $(wildcard tests/fuzz/fuzz_*.c))

COMMON_OBJ := $(COMMON_SRC:%.c=$(BUILD)/obj/%.o)
CLOUD_OBJ := $(CLOUD_SRC:%.c=$(BUILD)/obj/%.o)
PROXY_OBJ := $(PROXY_SRC:%.c=$(BUILD)/obj/%.o)
TARGET_OBJ := $(TARGET_SRC:%.c=$(BUILD)/obj/%.o)
LOADER_OBJ := $(LOADER_SRC:%.c=$(BUILD)/obj/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz/%)
LIBFT := $(BUILD)/libft.a
LIBCLOUD := $(BUILD)/libftcloud.a
# Each program's objects but main, as archives the unit tests link against.
LIBPROXY := $(BUILD)/libftproxy.a
LIBTARGET := $(BUILD)/libfttarget.a
LIBLOADER := $(BUILD)/libftloader.a
TEST_LIBS := $(LIBPROXY) $(LIBTARGET) $(LIBLOADER) $(LIBCLOUD) $(LIBFT)
BINS := $(BUILD)/bin/ft-proxy $(BUILD)/bin/ft-target
ifneq ($(LOADER_SRC),)
BINS += $(BUILD)/bin/ft-loader
endif
BINS += $(BUILD)/bin/ft

PYTHON := /usr/bin/python3
PYTEST_ARGS ?=

.PHONY: all deps build run test test-unit test-integration test-asan fuzz fuzz-ci clean format-check format bench install \
	check-layers test-tsan $(FUZZ_CI_RUNS)

all: $(BINS)
build: all

# Debian packages, then the npm-pinned backend emulators the integration suite starts.
deps:
	@scripts/deps.sh
	@scripts/peers-deps.sh

$(BUILD)/obj/proxy/%.o: CPPFLAGS += -Iproxy
$(BUILD)/obj/target/%.o: CPPFLAGS += -Itarget
$(BUILD)/obj/loader/%.o: CPPFLAGS += -Iloader
$(BUILD)/obj/cli/%.o: CPPFLAGS += -Icli

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -c -o $@ $<

$(LIBFT): $(COMMON_OBJ)
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

$(LIBCLOUD): $(CLOUD_OBJ)
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

$(LIBPROXY): $(filter-out %/main.o,$(PROXY_OBJ))
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

$(LIBTARGET): $(filter-out %/main.o,$(TARGET_OBJ))
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

$(LIBLOADER): $(filter-out %/main.o,$(LOADER_OBJ))
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

$(BUILD)/bin/ft-proxy: $(PROXY_OBJ) $(LIBCLOUD) $(LIBFT)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -pthread -o $@ $(PROXY_OBJ) $(LIBCLOUD) $(LIBFT) $(LDLIBS)

$(BUILD)/bin/ft-target: $(TARGET_OBJ) $(LIBCLOUD) $(LIBFT)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -pthread -o $@ $(TARGET_OBJ) $(LIBCLOUD) $(LIBFT) $(LDLIBS)

$(BUILD)/bin/ft-loader: $(LOADER_OBJ) $(LIBFT)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -pthread -o $@ $(LOADER_OBJ) $(LIBFT) $(LDLIBS) -lm

# The command-line client: libcurl, jansson and, of common/, only the URL redaction of its messages.
CLI_COMMON_OBJ := $(BUILD)/obj/common/base/redact.o
$(BUILD)/bin/ft: $(CLI_OBJ) $(CLI_COMMON_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -pthread -o $@ $(CLI_OBJ) $(CLI_COMMON_OBJ) -lcurl -ljansson -lpthread

$(BUILD)/tests/%: tests/unit/%.c $(TEST_LIBS)
	@mkdir -p $(dir $@) $(BUILD)/obj/tests/unit
	$(CC) $(CPPFLAGS) -Itarget -Iproxy -Iloader $(ALL_CFLAGS) -MF $(BUILD)/obj/tests/unit/$*.d $(LDFLAGS) -o $@ $< \
	  $(TEST_LIBS) -lcmocka $(LDLIBS) -lm

# libFuzzer harnesses: clang, ASan+UBSan, linked against the common and cloud sources, plus the program sources
# FUZZ_EXTRA_<fuzzer> names (the module under test). Each source is compiled once into $(BUILD)/fuzz/obj with
# libFuzzer's coverage (fuzzer-no-link) and shared by every harness (compiling them per harness took minutes).
FUZZ_EXTRA_fuzz_lom := target/core/lom.c
FUZZ_EXTRA_fuzz_aws_chunked := proxy/s3/chunked.c proxy/s3/sigv4.c
FUZZ_EXTRA_fuzz_shard_walk := target/shard/tar.c target/shard/zip.c
FUZZ_EXTRA_fuzz_sigv4 := proxy/s3/sigv4.c
FUZZ_EXTRA_fuzz_template := proxy/template.c
FUZZ_EXTRA_fuzz_job_lists := proxy/textlist.c
FUZZ_CFLAGS := -Itarget -Iproxy -std=c11 -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=undefined
fuzz_obj = $(1:%.c=$(BUILD)/fuzz/obj/%.o)
.PRECIOUS: $(BUILD)/fuzz/obj/%.o
$(BUILD)/fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	clang $(CPPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c -o $@ $<
.SECONDEXPANSION:
$(BUILD)/fuzz/%: tests/fuzz/%.c $(call fuzz_obj,$(COMMON_SRC) $(CLOUD_SRC)) $$(call fuzz_obj,$$(FUZZ_EXTRA_$$*))
	@mkdir -p $(dir $@)
	clang $(CPPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(filter %.o,$^) $(LDLIBS)

run: deps all
	scripts/ft-cluster run --dir $(DIR) --port $(PORT) --bin $(BUILD)/bin

# Integration test files run side by side on TEST_JOBS pytest workers (each test starts its own daemons on free
# loopback ports; a file's tests stay on one worker, so a module's shared cluster is started once). TEST_JOBS=1: serial.
TEST_JOBS ?= 2
PYTEST_PAR := $(if $(filter-out 1,$(TEST_JOBS)),-n $(TEST_JOBS) --dist loadfile)

test: check-layers deps all $(UNIT_BIN)
	@scripts/run-tests.sh $(BUILD) $(PYTEST_PAR) $(PYTEST_ARGS)

# Includes point only where the layering allows (scripts/check-layers.py lists the rules and the exceptions).
check-layers:
	@$(PYTHON) scripts/check-layers.py

# The unit test binaries alone, side by side (they mostly wait), with their totals.
test-unit: all $(UNIT_BIN)
	@scripts/run-tests.sh $(BUILD) --units-only

test-integration: all
	FT_BIN=$(CURDIR)/$(BUILD)/bin $(PYTHON) -m pytest -q tests/integration $(PYTEST_PAR) $(PYTEST_ARGS)

# The integration suite once under ASan+UBSan (a separate build tree), but test_k8s.py: it renders and lints the
# manifests, and the daemons only read their config there (--check-config), which the rest of the suite does.
test-asan:
	$(MAKE) SANITIZER=address test-integration PYTEST_ARGS="$(PYTEST_ARGS) --ignore=tests/integration/test_k8s.py"

# ThreadSanitizer (build/thread/): the unit tests, then the integration files that drive concurrent requests through
# the daemons' loop threads, worker pool, the S3 relay's splice, remote-bucket metadata changes, cached copies evicted
# while read, GetBatch's window and fetchers on the fan-out threads, and S3 reads and listings of remote buckets
# (proxy/s3/listmark.c's table), AIStore's API (the proxy's background bucket summaries); a ThreadSanitizer report
# in a daemon's log fails the test (tests/integration/conftest.py).
TSAN_TESTS := tests/integration/test_concurrency.py tests/integration/test_http.py tests/integration/test_s3_relay.py \
	tests/integration/test_s3_relay_faults.py tests/integration/test_coldget.py tests/integration/test_batch.py \
	tests/integration/test_open_file_cache.py tests/integration/test_lru.py tests/integration/test_remote_refetch.py \
	tests/integration/test_s3_remote.py tests/integration/test_aistore_wire.py
test-tsan:
	$(MAKE) SANITIZER=thread test-unit
	FT_BIN=$(CURDIR)/build/thread/bin $(PYTHON) -m pytest -q -rfEs $(TSAN_TESTS) $(PYTEST_PAR) $(PYTEST_ARGS)

# Side-by-side benchmarks against nginx and wrk; writes docs/benchmarks.md.
bench: deps all
	scripts/bench-deps.sh
	$(PYTHON) bench/run.py --build $(BUILD)

fuzz: $(FUZZ_BIN)

# Each fuzzer for a bounded time (FUZZ_SECONDS), from its seed corpus.
FUZZ_SECONDS ?= 60
# Each fuzzer is its own goal, so `make -j2 fuzz-ci` runs two at a time.
FUZZ_CI_RUNS := $(FUZZ_BIN:%=%.ci-run)
fuzz-ci: $(FUZZ_CI_RUNS)
$(FUZZ_CI_RUNS): %.ci-run: %
	@n=$$(basename $<); mkdir -p $(BUILD)/fuzz/corpus-$$n; \
	  echo "== $$n for $(FUZZ_SECONDS)s"; \
	  $< -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 $(BUILD)/fuzz/corpus-$$n tests/fuzz/seeds/$$n

format-check:
	@scripts/whitespace-check.py
	@scripts/format-check.sh

format:
	@scripts/format-check.sh --fix

# The daemons, the loader and ft into $(DESTDIR)$(PREFIX)/bin, ft's bash completion beside the system's others.
PREFIX ?= /usr/local
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/bash-completion/completions
	install -m 0755 $(BINS) $(DESTDIR)$(PREFIX)/bin/
	install -m 0644 cli/ft.bash-completion $(DESTDIR)$(PREFIX)/share/bash-completion/completions/ft

clean:
	rm -rf build

-include $(shell find $(BUILD)/obj $(BUILD)/fuzz/obj -name '*.d' 2>/dev/null)
