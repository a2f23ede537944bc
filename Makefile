# hearth's build. Plain GNU make: one binary, a handful of component
# libraries, no generated build system to install or learn (CMake was
# rejected: it adds a tool and a configure step for a tree this small).
#
#   make              development build in build/ (-O2 -g, warnings are errors)
#   make SAN=1        ASan + UBSan build in build-san/
#   make test         build, then run the whole suite (tests/run.sh)
#   make fuzz         libFuzzer targets (clang) in build-fuzz/
#   make check        everything CI runs: the suite on the plain and the
#                     sanitizer builds, then each fuzzer for FUZZ_SECONDS (40)
#
# Each component in src/ is a static library compiled against an "include
# view": build/inc/<component>/ holds links to only the components it may
# depend on, so a forbidden #include (say, engine including net) fails to build.

CC ?= cc
SAN ?= 0
ifeq ($(SAN),1)
BUILD ?= build-san
SANFLAGS = -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
OPT = -O1 -g
else
BUILD ?= build
SANFLAGS =
OPT = -O2 -g
endif

WARN = -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter -Wstrict-prototypes -Wvla -Wno-format-truncation -Wno-missing-field-initializers
CFLAGS_BASE = -std=c17 -D_GNU_SOURCE $(OPT) $(WARN) -pthread -MMD -MP -fno-strict-aliasing $(SANFLAGS) $(EXTRA_CFLAGS)
LDLIBS = -lcjson -lutf8proc -lpcre2-8 -lm -lpthread -ldl
LDFLAGS = -pthread $(SANFLAGS) $(EXTRA_LDFLAGS)

# Per-ISA kernel files are compiled for their ISA and only called after
# hearth_cpu() says the CPU has it.
ISA_avx2 = -mavx2 -mfma -mf16c
ISA_avx512 = -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16

COMPONENTS = base net text engine models api cli
DEPS_base = base
DEPS_net = base net
DEPS_text = base text
DEPS_engine = base engine
DEPS_models = base engine text models
DEPS_api = base net text engine models api
DEPS_cli = base net text engine models api cli
# Tests may reach every component (a unit test may even include a .c).
DEPS_tests = $(COMPONENTS)

VERSION := $(shell git describe --always --dirty 2>/dev/null || echo unknown)

srcs_of = $(shell find src/$(1) -name '*.c' 2>/dev/null | sort)
objs_of = $(patsubst src/%.c,$(BUILD)/obj/%.o,$(call srcs_of,$(1)))
LIBS = $(foreach c,$(filter-out cli,$(COMPONENTS)),$(BUILD)/lib$(c).a)
# Link order: dependents before their dependencies.
LINK_LIBS = $(BUILD)/libapi.a $(BUILD)/libmodels.a $(BUILD)/libengine.a $(BUILD)/libtext.a $(BUILD)/libnet.a $(BUILD)/libbase.a

.PHONY: all test fuzz clean check
.SECONDARY:
all: $(BUILD)/hearth $(BUILD)/tests.stamp

# include views
$(BUILD)/inc/%.stamp:
	@mkdir -p $(BUILD)/inc/$*
	@for d in $(DEPS_$*); do ln -sfn $(CURDIR)/src/$$d $(BUILD)/inc/$*/$$d; done
	@touch $@

define component_rules
$(BUILD)/obj/$(1)/%.o: src/$(1)/%.c $(BUILD)/inc/$(1).stamp
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CFLAGS_BASE) $$(if $$(findstring _avx512,$$*),$$(ISA_avx512),$$(if $$(findstring _avx2,$$*),$$(ISA_avx2))) -I$(BUILD)/inc/$(1) -DHEARTH_VERSION='"$(VERSION)"' -c $$< -o $$@
$(BUILD)/lib$(1).a: $(call objs_of,$(1))
	@mkdir -p $$(dir $$@)
	@rm -f $$@
	ar rcs $$@ $$^
endef
$(foreach c,$(COMPONENTS),$(eval $(call component_rules,$(c))))

$(BUILD)/hearth: $(call objs_of,cli) $(LIBS)
	$(CC) $(LDFLAGS) -o $@ $(call objs_of,cli) $(LINK_LIBS) $(LDLIBS)

# unit tests: tests/unit/<component>/test_*.c, one binary each
TEST_SRCS = $(shell find tests/unit -name 'test_*.c' | sort)
TEST_BINS = $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(TEST_SRCS))
$(BUILD)/tests/%: tests/unit/%.c tests/harness.h $(LIBS) $(BUILD)/inc/tests.stamp
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -I$(BUILD)/inc/tests -Itests -Isrc -o $@ $< $(LINK_LIBS) $(LDFLAGS) $(LDLIBS)
$(BUILD)/tests.stamp: $(TEST_BINS)
	@touch $@

test: all
	BUILD=$(BUILD) tests/run.sh

FUZZ_SECONDS ?= 40
check:
	$(MAKE) -j2 all
	$(MAKE) -j2 all SAN=1
	$(MAKE) -j2 fuzz
	BUILDS="build build-san" FUZZ_SECONDS=$(FUZZ_SECONDS) tests/run.sh

# libFuzzer targets: tests/fuzz/fuzz_*.c, built with clang against the
# sources, compiled once into one archive with coverage instrumentation
# (fuzzer-no-link) and linked into each target (each used to compile every
# source again: ~1 minute per target on 2 cores). As before, every file gets
# the AVX-512 flags.
FUZZ_SRCS = $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BUILD = build-fuzz
FUZZ_BINS = $(patsubst tests/fuzz/%.c,$(FUZZ_BUILD)/%,$(FUZZ_SRCS))
FUZZ_LIB_SRCS = $(foreach c,base net text engine models api,$(call srcs_of,$(c)))
FUZZ_LIB_OBJS = $(patsubst src/%.c,$(FUZZ_BUILD)/obj/%.o,$(FUZZ_LIB_SRCS))
FUZZ_CFLAGS = -std=c17 -D_GNU_SOURCE -g -O1 -I$(FUZZ_BUILD)/inc/tests -Isrc $(ISA_avx512) -DHEARTH_VERSION='"fuzz"'
fuzz: $(FUZZ_BINS)
$(FUZZ_BUILD)/inc.stamp:
	@mkdir -p $(FUZZ_BUILD)/inc/tests
	@for d in $(COMPONENTS); do ln -sfn $(CURDIR)/src/$$d $(FUZZ_BUILD)/inc/tests/$$d; done
	@touch $@
$(FUZZ_BUILD)/obj/%.o: src/%.c $(FUZZ_BUILD)/inc.stamp
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link,address,undefined -MMD -MP -c $< -o $@
$(FUZZ_BUILD)/libsrc.a: $(FUZZ_LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^
$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_BUILD)/libsrc.a
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer,address,undefined -o $@ $< $(FUZZ_BUILD)/libsrc.a $(LDLIBS)

clean:
	rm -rf build build-san build-fuzz

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
-include $(shell find $(FUZZ_BUILD)/obj -name '*.d' 2>/dev/null)

# benchmark programs: bench/bench_*.c, built by `make bench` (not by all)
BENCH_SRCS = $(wildcard bench/bench_*.c)
BENCH_BINS = $(patsubst bench/%.c,$(BUILD)/bench/%,$(BENCH_SRCS))
$(BUILD)/bench/%: bench/%.c $(LIBS) $(BUILD)/inc/tests.stamp
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -I$(BUILD)/inc/tests -o $@ $< $(LINK_LIBS) $(LDFLAGS) $(LDLIBS) $(BENCH_LIBS_$*)
# bench_blas compares against OpenBLAS (libopenblas-dev), which hearth itself does not link
BENCH_LIBS_bench_blas = -lopenblas
.PHONY: bench
bench: $(BENCH_BINS)
