# gpt - a small, exact GPT-2 runtime in C.
#
#   make            build ./gpt
#   make test       build, generate the test checkpoints, run every test
#   make asan       the same tests under AddressSanitizer + UBSan (build-asan/)
#   make bench      speed and memory numbers (prints, asserts nothing on time)
#   make install    PREFIX=/usr/local DESTDIR=
#   make clean
#
# Layout: src/*.c is the library (libgpt.a: it computes, never prints or
# exits); src/cli/*.c is the command line, one front-end linking it; tests/
# and tests/bench/ link it too.

CC       ?= cc
# A portable baseline: the binary runs on any x86-64 (and builds elsewhere).
# The fast paths (AVX2, AVX-512) are compiled per function for their ISA and
# chosen at run time (matmul.c, attention.c).
CFLAGS   ?= -O2
# cJSON and utf8proc for gpt; OpenBLAS for `make bench` alone, whose sgemm
# is the bound prefill is measured against (the kernels are gpt's own).
PKGS     := libcjson libutf8proc
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS))
PKG_LIBS   := $(shell pkg-config --libs $(PKGS))
BLAS_CFLAGS := $(shell pkg-config --cflags openblas)
BLAS_LIBS   := $(shell pkg-config --libs openblas)
ALL_CFLAGS  = $(CFLAGS) -std=c11 -Wall -Wextra -D_POSIX_C_SOURCE=200809L $(PKG_CFLAGS) -Isrc -MMD -MP
LDLIBS   += $(PKG_LIBS) -lpthread -lm

# The loops marked `#pragma omp simd` (GELU, softmax, layernorm, bias adds)
# are vectorised: -fopenmp-simd enables those pragmas alone, no OpenMP
# runtime. A reduction marked so may add in another order (float noise, far
# below the tests' tolerances). Our float code never reads the FP exception
# flags, so float operations may be treated as non-trapping, which the
# vectoriser needs for floorf. Nothing else changes: no -ffast-math, which
# would break NaN checks and GELU.
ALL_CFLAGS += -fopenmp-simd -fno-trapping-math
# No contraction of a * b + c into one fused multiply-add behind our back:
# the kernels fix their order of operations (and where they fuse, with
# fmaf or intrinsics) so that every ISA and every batch gives the same bits.
ALL_CFLAGS += -ffp-contract=off

# SANITIZE=address,undefined builds everything with those sanitizers.
# Any report ends the program (no recovering past undefined behaviour), so
# that a test that runs into one fails.
ifneq ($(SANITIZE),)
ALL_CFLAGS += -fsanitize=$(SANITIZE) -fno-sanitize-recover=all -fno-omit-frame-pointer -g
LDFLAGS    += -fsanitize=$(SANITIZE) -fno-sanitize-recover=all
endif

BUILD    ?= build
# Generated deterministic checkpoints (large; shared by the normal and asan builds).
CKPT_DIR ?= build/ckpt
PREFIX   ?= /usr/local

LIB_SRCS   := $(wildcard src/*.c)
LIB_OBJS   := $(LIB_SRCS:src/%.c=$(BUILD)/src/%.o)
LIB        := $(BUILD)/libgpt.a
CLI_SRCS   := $(wildcard src/cli/*.c)
CLI_OBJS   := $(CLI_SRCS:src/%.c=$(BUILD)/src/%.o)
TEST_SRCS  := $(wildcard tests/test_*.c)
TEST_BINS  := $(TEST_SRCS:tests/%.c=$(BUILD)/tests/%)
TOOL_BINS  := $(BUILD)/tests/gen_checkpoint
BENCH_SRCS := $(wildcard tests/bench/*.c)
BENCH_BINS := $(BENCH_SRCS:tests/bench/%.c=$(BUILD)/bench/%)

.PHONY: all test asan bench install clean checkpoints test-bins

ifeq ($(BUILD),build)
all: gpt
gpt: $(BUILD)/gpt
	cp $< $@
else
all: $(BUILD)/gpt
endif

$(LIB): $(LIB_OBJS)
	rm -f $@
	$(AR) rcs $@ $^

$(BUILD)/gpt: $(CLI_OBJS) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/src/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(BUILD)/tests/%.o: tests/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Itests -c -o $@ $<

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/bench/%.o: tests/bench/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(BLAS_CFLAGS) -Itests -c -o $@ $<

$(BUILD)/bench/%: $(BUILD)/bench/%.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(BLAS_LIBS) $(LDLIBS)

test-bins: all $(TEST_BINS) $(TOOL_BINS)

# The deterministic checkpoints of tests/fixtures/FORMULA.md, written by our
# own generator and verified against the published sha256 sums.
checkpoints: $(BUILD)/tests/gen_checkpoint
	BUILD=$(BUILD) CKPT_DIR=$(CKPT_DIR) sh tests/make_checkpoints.sh

test: test-bins checkpoints
	BUILD=$(BUILD) CKPT_DIR=$(CKPT_DIR) sh tests/run.sh

asan:
	$(MAKE) BUILD=build-asan SANITIZE=address,undefined CFLAGS="-O1" test

bench: $(BUILD)/gpt $(BENCH_BINS) checkpoints
	BUILD=$(BUILD) CKPT_DIR=$(CKPT_DIR) sh tests/bench/run.sh

install: $(BUILD)/gpt
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/gpt
	install -m 755 $(BUILD)/gpt $(DESTDIR)$(PREFIX)/bin/gpt
	install -m 644 models/vocab.json models/merges.txt $(DESTDIR)$(PREFIX)/share/gpt/

clean:
	rm -rf build build-asan gpt

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
