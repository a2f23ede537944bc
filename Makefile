# hearth's build. Plain GNU make: one binary, a handful of component
# libraries, no generated build system to install or learn (CMake was
# rejected: it adds a tool and a configure step for a tree this small).
#
#   make              development build in build/ (-O2 -g, warnings are errors)
#   make SAN=1        ASan + UBSan build in build-san/
#   make test         build, then run the whole suite (tests/run.sh)
#   make fuzz         libFuzzer targets (clang) in build-fuzz/
#   make check        everything CI runs: the suite on the plain and the
#                     sanitizer builds (the two side by side), then each
#                     fuzzer for FUZZ_SECONDS (20)
#   make CUDA=1       the CUDA build in build-cuda/: src/**/*.cu through nvcc
#                     for CUDA_ARCH (90, Hopper), linked so that the binary runs
#                     on a GPU machine that lacks hearth's Debian libraries
#                     (scripts/gpu-pack.sh packs it for a visit there)
#   make CUDA=1 check-cuda   the GPU suites against build-cuda/, on the GPU
#                     machine (no rebuild: build here, run there)
#
# Each component in src/ is a static library compiled against an "include
# view": build/inc/<component>/ holds links to only the components it may
# depend on, so a forbidden #include (say, engine including net) fails to build.

CC ?= cc
SAN ?= 0
CUDA ?= 0
# CUDA=1: nvcc compiles every .cu of a component into its library, and every
# .c sees HEARTH_CUDA (which empties engine/gpu_none.c). Without it no .cu
# file and no CUDA header is seen. The binary links the CUDA runtime
# statically (cudart_static, which NVIDIA's licence lets a program carry),
# utf8proc and PCRE2 statically, and cJSON (Debian ships no static cJSON)
# from lib/ beside the binary through an $$ORIGIN rpath.
ifeq ($(CUDA),1)
NVCC ?= nvcc
NVCC_PATH := $(shell command -v $(NVCC) 2>/dev/null)
ifeq ($(NVCC_PATH),)
$(error make CUDA=1 needs nvcc, the CUDA toolkit's compiler (13.x), and '$(NVCC)' is not on the PATH: install the toolkit, add its bin/ to PATH or set NVCC=/path/to/nvcc (plain `make` needs no CUDA))
endif
CUDA_HOME ?= $(patsubst %/bin/,%,$(dir $(NVCC_PATH)))
CUDA_ARCH ?= 90
BUILD ?= build-cuda$(if $(filter 1,$(SAN)),-san)
CUDA_DEFS = -DHEARTH_CUDA=1 -DHEARTH_CUDA_ARCH=$(CUDA_ARCH)
NVCCFLAGS = -std=c++17 -O2 -g -lineinfo -MMD -MP $(CUDA_DEFS) \
            -gencode arch=compute_$(CUDA_ARCH),code=[sm_$(CUDA_ARCH),compute_$(CUDA_ARCH)] \
            -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror,-Wno-unused-parameter,-fno-strict-aliasing
CJSON_SO := $(shell $(CC) -print-file-name=libcjson.so.1)
LIB_LDLIBS = -Wl,-Bstatic -lutf8proc -lpcre2-8 -lprotobuf-c -Wl,-Bdynamic -lcjson
CUDA_LDLIBS = -L$(CUDA_HOME)/lib64 -lcudart_static -lrt -lstdc++
# $$ORIGIN/lib for build-cuda/hearth, $$ORIGIN/../../lib for build-cuda/tests/<component>/test_*
CUDA_LDFLAGS = -Wl,-rpath,'$$ORIGIN/lib:$$ORIGIN/../../lib'
endif
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
CFLAGS_BASE = -std=c17 -D_GNU_SOURCE $(OPT) $(WARN) -pthread -MMD -MP -fno-strict-aliasing $(SANFLAGS) $(CUDA_DEFS) $(EXTRA_CFLAGS)
LIB_LDLIBS ?= -lcjson -lutf8proc -lpcre2-8 -lprotobuf-c
LDLIBS = $(LIB_LDLIBS) $(CUDA_LDLIBS) -lm -lpthread -ldl
LDFLAGS = -pthread $(SANFLAGS) $(CUDA_LDFLAGS) $(EXTRA_LDFLAGS)

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
cus_of = $(if $(filter 1,$(CUDA)),$(shell find src/$(1) -name '*.cu' 2>/dev/null | sort))
objs_of = $(patsubst src/%.c,$(BUILD)/obj/%.o,$(call srcs_of,$(1))) $(patsubst src/%.cu,$(BUILD)/obj/%.cu.o,$(call cus_of,$(1)))
LIBS = $(foreach c,$(filter-out cli,$(COMPONENTS)),$(BUILD)/lib$(c).a)
# Link order: dependents before their dependencies.
LINK_LIBS = $(BUILD)/libapi.a $(BUILD)/libmodels.a $(BUILD)/libengine.a $(BUILD)/libtext.a $(BUILD)/libnet.a $(BUILD)/libbase.a

.PHONY: all test fuzz clean check check-cuda
.SECONDARY:
all: $(BUILD)/hearth $(BUILD)/tests.stamp $(if $(filter 1,$(CUDA)),$(BUILD)/lib/libcjson.so.1)

# include views
# models sees engine's headers but none of its backends (cpu/, cuda/): a walk
# reaches a device only through engine/dev.h, so `#include "engine/cpu/..."`
# from src/models fails to build. The models view is rebuilt when src/engine gains or loses a file (the
# directory's mtime) or this Makefile changes.
$(BUILD)/inc/models.stamp: src/engine Makefile
$(BUILD)/inc/%.stamp:
	@mkdir -p $(BUILD)/inc/$*
	@for d in $(DEPS_$*); do \
	    v=$(BUILD)/inc/$*/$$d; \
	    if [ "$*" = models ] && [ "$$d" = engine ]; then \
	        if [ -L $$v ]; then rm -f $$v; else rm -rf $$v; fi; \
	        mkdir -p $$v; \
	        for f in $(CURDIR)/src/engine/*.h; do ln -sfn $$f $$v/; done; \
	    else ln -sfn $(CURDIR)/src/$$d $$v; fi; \
	done
	@touch $@

define component_rules
$(BUILD)/obj/$(1)/%.o: src/$(1)/%.c $(BUILD)/inc/$(1).stamp
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CFLAGS_BASE) $$(if $$(findstring _avx512,$$*),$$(ISA_avx512),$$(if $$(findstring _avx2,$$*),$$(ISA_avx2))) -I$(BUILD)/inc/$(1) $$(GEN_INC_$(1)) -DHEARTH_VERSION='"$(VERSION)"' -c $$< -o $$@
$(BUILD)/obj/$(1)/%.cu.o: src/$(1)/%.cu $(BUILD)/inc/$(1).stamp
	@mkdir -p $$(dir $$@)
	$$(NVCC) $$(NVCCFLAGS) -I$(BUILD)/inc/$(1) -c $$< -o $$@
$(BUILD)/lib$(1).a: $(filter-out $(BUILD)/obj/cli/main.o,$(call objs_of,$(1)))
	@mkdir -p $$(dir $$@)
	@rm -f $$@
	ar rcs $$@ $$^
endef
$(foreach c,$(COMPONENTS),$(eval $(call component_rules,$(c))))

# Generated code: protoc-c (Debian's protobuf-c-compiler) turns a
# component's .proto into C at build time, into $(BUILD)/gen/<component>/,
# seen as "<component>/x.pb-c.h" through -I$(BUILD)/gen. Today only
# models/onnx.proto (hearth's subset of ONNX's schema). Generated code is
# never committed: the schema is the source. It compiles under the project's
# own flags (checked with protoc-c 1.4.1), so it gets no relaxed set. Every
# object of the component, and every test, waits for the header (order-only:
# a clean clone generates before it compiles anything that includes it).
PROTO_models = src/models/onnx.proto
gen_c_of = $(patsubst src/%.proto,$(2)/gen/%.pb-c.c,$(PROTO_$(1)))
gen_h_of = $(patsubst src/%.proto,$(2)/gen/%.pb-c.h,$(PROTO_$(1)))
gen_objs_of = $(patsubst src/%.proto,$(2)/obj/gen/%.pb-c.o,$(PROTO_$(1)))
GEN_CFLAGS = -I$(BUILD)/gen
# only models (and tests) see generated headers
GEN_INC_models = $(GEN_CFLAGS)
# protoc-c writes x.pb-c.c and x.pb-c.h together (one run: a grouped target)
define proto_rules
$(2)/gen/%.pb-c.c $(2)/gen/%.pb-c.h &: src/%.proto
	@mkdir -p $$(dir $$@)
	protoc-c --proto_path=src/$$(dir $$*) --c_out=$(2)/gen/$$(dir $$*) $$<
endef
$(eval $(call proto_rules,models,$(BUILD)))
$(BUILD)/obj/gen/%.pb-c.o: $(BUILD)/gen/%.pb-c.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(GEN_CFLAGS) -c $< -o $@
$(BUILD)/libmodels.a: $(call gen_objs_of,models,$(BUILD))
$(call objs_of,models): | $(call gen_h_of,models,$(BUILD))

$(BUILD)/hearth: $(call objs_of,cli) $(LIBS)
	$(CC) $(LDFLAGS) -o $@ $(call objs_of,cli) $(LINK_LIBS) $(LDLIBS)

# unit tests: tests/unit/<component>/test_*.c, one binary each
TEST_SRCS = $(shell find tests/unit -name 'test_*.c' | sort)
TEST_BINS = $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(TEST_SRCS))
# The cli tests also link libcli.a: the subcommands' objects without main.o
# (hearth itself links the objects, main.o included, and no libcli.a).
TEST_LIBS_cli = $(BUILD)/libcli.a
$(filter $(BUILD)/tests/cli/%,$(TEST_BINS)): $(BUILD)/libcli.a
$(BUILD)/tests/%: tests/unit/%.c tests/harness.h $(LIBS) $(BUILD)/inc/tests.stamp
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(GEN_CFLAGS) -I$(BUILD)/inc/tests -Itests -Isrc -o $@ $< $(TEST_LIBS_$(firstword $(subst /, ,$*))) $(LINK_LIBS) $(LDFLAGS) $(LDLIBS)
$(BUILD)/tests.stamp: $(TEST_BINS)
	@touch $@

test: all
	BUILD=$(BUILD) tests/run.sh

# The CUDA build's own copy of cJSON, found through the binaries' rpath.
$(BUILD)/lib/libcjson.so.1:
	@mkdir -p $(dir $@)
	cp -L $(CJSON_SO) $@

# On the GPU machine, over binaries built here and carried there (that machine
# lacks hearth's Debian headers, so nothing is rebuilt): the suites whose name
# says gpu and the op tests (every device in the registry), with a GPU required.
check-cuda:
	@[ "$(CUDA)" = 1 ] || { echo "check-cuda: run it as make CUDA=1 check-cuda"; exit 2; }
	@[ -x $(BUILD)/hearth ] || { echo "check-cuda: $(BUILD)/hearth is missing: build it with make CUDA=1 (or scripts/gpu-pack.sh)"; exit 2; }
	BUILDS=$(BUILD) HEARTH_REQUIRE_GPU=1 tests/run.sh 'gpu|dev_ops'

# 20 s a target in check: CI's whole run (a fresh 2-core machine) reached
# 20 minutes with 40; longer runs are `make fuzz` and the targets by hand
FUZZ_SECONDS ?= 20
check:
	$(MAKE) -j2 all
	$(MAKE) -j2 all SAN=1
	$(MAKE) -j2 fuzz
	BUILDS="build build-san" BUILDS_AT_ONCE=1 FUZZ_SECONDS=$(FUZZ_SECONDS) tests/run.sh

# libFuzzer targets: tests/fuzz/fuzz_*.c, built with clang against the
# sources, compiled once into one archive with coverage instrumentation
# (fuzzer-no-link) and linked into each target (each used to compile every
# source again: ~1 minute per target on 2 cores). Per-ISA kernel files get
# their ISA's flags, as in the main build, and nothing else does: with the
# AVX-512 flags on every file, every target died of an illegal instruction
# at its first input on a CPU without AVX-512 (an AMD EPYC, 2026-12-06).
FUZZ_SRCS = $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BUILD = build-fuzz
FUZZ_BINS = $(patsubst tests/fuzz/%.c,$(FUZZ_BUILD)/%,$(FUZZ_SRCS))
FUZZ_LIB_SRCS = $(foreach c,base net text engine models api,$(call srcs_of,$(c)))
FUZZ_LIB_OBJS = $(patsubst src/%.c,$(FUZZ_BUILD)/obj/%.o,$(FUZZ_LIB_SRCS)) $(call gen_objs_of,models,$(FUZZ_BUILD))
FUZZ_CFLAGS = -std=c17 -D_GNU_SOURCE -g -O1 -I$(FUZZ_BUILD)/inc/tests -I$(FUZZ_BUILD)/gen -Isrc -DHEARTH_VERSION='"fuzz"'
fuzz_isa = $(if $(findstring _avx512,$(1)),$(ISA_avx512),$(if $(findstring _avx2,$(1)),$(ISA_avx2)))
fuzz: $(FUZZ_BINS)
$(FUZZ_BUILD)/inc.stamp:
	@mkdir -p $(FUZZ_BUILD)/inc/tests
	@for d in $(COMPONENTS); do ln -sfn $(CURDIR)/src/$$d $(FUZZ_BUILD)/inc/tests/$$d; done
	@touch $@
$(FUZZ_BUILD)/obj/%.o: src/%.c $(FUZZ_BUILD)/inc.stamp
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) $(call fuzz_isa,$*) -fsanitize=fuzzer-no-link,address,undefined -MMD -MP -c $< -o $@
ifneq ($(BUILD),$(FUZZ_BUILD))
$(eval $(call proto_rules,models,$(FUZZ_BUILD)))
endif
$(FUZZ_BUILD)/obj/gen/%.pb-c.o: $(FUZZ_BUILD)/gen/%.pb-c.c
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link,address,undefined -MMD -MP -c $< -o $@
$(patsubst src/%.c,$(FUZZ_BUILD)/obj/%.o,$(call srcs_of,models)): | $(call gen_h_of,models,$(FUZZ_BUILD))
$(FUZZ_BUILD)/libsrc.a: $(FUZZ_LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^
$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_BUILD)/libsrc.a
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer,address,undefined -o $@ $< $(FUZZ_BUILD)/libsrc.a $(LDLIBS)

clean:
	rm -rf build build-san build-fuzz build-cuda build-cuda-san

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
