# gpt - a small, exact GPT-2 runtime in C.
#
#   make            build ./gpt
#   make test       build, generate the test checkpoints, run every test
#   make check      the source checks alone (tests/check_*.sh)
#   make asan       the same tests but those under AddressSanitizer + UBSan (build-asan/)
#   make test-scale two gpt serve behind haproxy (tests/scale/haproxy.sh)
#   make bench      speed and memory numbers (prints, asserts nothing on time)
#   make bench-bins the bench programs only (to run one of them by hand)
#   make compile_commands.json   the compile commands, for editors (clangd)
#   make install    PREFIX=/usr/local DESTDIR=  (gpt, libgpt.so, gpt.h, gpt.pc, python/gpt)
#   make clean
#
# Layout (docs/architecture.md): the library (libgpt.a: it computes, never
# prints or exits) is the pipeline at the top of src/ and the layers under it,
# src/base/, src/model/ and src/kernels/; the front-ends linking it are
# src/front/ (what they share), src/cli/ (the command) and src/serve/ (gpt
# serve). tests/ and tests/bench/ link the library too.

CC       ?= cc
# A portable baseline: the binary runs on any x86-64 (and builds elsewhere).
# The fast paths (AVX2, AVX-512) are compiled per function for their ISA and
# chosen at run time (src/kernels/cpu.h).
CFLAGS   ?= -O2
# cJSON and utf8proc for gpt, libmicrohttpd for gpt serve; OpenBLAS for gpt --blas (src/kernels/blas.c) and for
# `make bench`, whose sgemm is the bound prefill is measured against (the
# default kernels are gpt's own).
PKGS     := libcjson libutf8proc openblas libmicrohttpd
# Each package named on its own when pkg-config lacks it: `pkg-config
# --cflags` of all three prints nothing if one is missing, and the build
# would fail on the first #include without a word of which.
PKGS_MISSING := $(strip $(foreach p,$(PKGS),$(if $(shell pkg-config --exists $(p) && echo y),,$(p))))
ifneq ($(PKGS_MISSING),)
ifeq ($(filter clean,$(MAKECMDGOALS)),)
$(error pkg-config finds no $(PKGS_MISSING): install what building gpt needs with scripts/install-deps.sh build (Debian, Ubuntu))
endif
endif
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS))
# OpenBLAS and libmicrohttpd are not linked into gpt: src/kernels/blas.c
# opens OpenBLAS for --blas, src/serve/http.c libmicrohttpd for gpt serve
# (loading them, and GnuTLS with the second, cost every run ~20 ms of CPU);
# the benches link OpenBLAS for their bound
PKG_LIBS   := $(shell pkg-config --libs $(filter-out openblas libmicrohttpd,$(PKGS)))
BLAS_CFLAGS := $(shell pkg-config --cflags openblas)
BLAS_LIBS   := $(shell pkg-config --libs openblas)
# BASE_CFLAGS: what every build of the sources needs (also make fuzz's).
BASE_CFLAGS = -std=c11 -Wall -Wextra -D_POSIX_C_SOURCE=200809L $(PKG_CFLAGS) -Isrc -MMD -MP
LDLIBS   += $(PKG_LIBS) -lpthread -lm -ldl

# The loops marked `#pragma omp simd` (GELU, softmax, layernorm, bias adds)
# are vectorised: -fopenmp-simd enables those pragmas alone, no OpenMP
# runtime. A reduction marked so may add in another order (float noise, far
# below the tests' tolerances). Our float code never reads the FP exception
# flags, so float operations may be treated as non-trapping, which the
# vectoriser needs for floorf. Nothing else changes: no -ffast-math, which
# would break NaN checks and GELU.
BASE_CFLAGS += -fopenmp-simd -fno-trapping-math
# No contraction of a * b + c into one fused multiply-add behind our back:
# the kernels fix their order of operations (and where they fuse, with
# fmaf or intrinsics) so that every ISA and every batch gives the same bits.
BASE_CFLAGS += -ffp-contract=off
# Every object may go into the shared library (libgpt.so): position-
# independent, and no symbol exported but those gpt.h marks GPT_API. With
# hidden visibility -fPIC compiles to the instructions of the -fPIE that
# gcc builds executables with by default (no call goes through the PLT), so
# the gpt binary built from the same objects loses nothing.
BASE_CFLAGS += -fPIC -fvisibility=hidden
ALL_CFLAGS  = $(CFLAGS) $(BASE_CFLAGS)

# SANITIZE=address,undefined builds everything with those sanitizers.
# Any report ends the program (no recovering past undefined behaviour), so
# that a test that runs into one fails.
ifneq ($(SANITIZE),)
SANITIZE_FLAGS = -fno-sanitize-recover=all -fno-omit-frame-pointer -g
ALL_CFLAGS += -fsanitize=$(SANITIZE) $(SANITIZE_FLAGS)
LDFLAGS    += -fsanitize=$(SANITIZE) -fno-sanitize-recover=all
endif

BUILD    ?= build

# The two SIMD matmul files (macro-made tiles of every shape and dtype, each
# in its own function) under AddressSanitizer alone: with UBSan too, gcc 12
# took 600 s of CPU for matmul_avx512.c and 276 s for matmul_avx2.c (ASan
# alone 139 s), most of make asan's build. Their arithmetic is intrinsics,
# tested bit for bit against matmul_scalar.c, which keeps both sanitizers.
ifneq ($(findstring address,$(SANITIZE)),)
$(BUILD)/src/kernels/matmul_avx2.o $(BUILD)/src/kernels/matmul_avx512.o: \
    ALL_CFLAGS = $(CFLAGS) $(BASE_CFLAGS) -fsanitize=address $(SANITIZE_FLAGS)
endif
# Generated deterministic checkpoints (large; shared by the normal and asan builds).
CKPT_DIR ?= build/ckpt
PREFIX   ?= /usr/local

# the library's folders, one pattern each, lowest layer first
LIB_DIRS   := src/base src/model src/kernels src/grammar src
LIB_SRCS   := $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.c))
LIB_OBJS   := $(LIB_SRCS:src/%.c=$(BUILD)/src/%.o)
LIB        := $(BUILD)/libgpt.a
# the front-ends: the command line, the server, and what they share (src/front/)
CLI_SRCS   := $(wildcard src/cli/*.c src/front/*.c src/serve/*.c)
CLI_OBJS   := $(CLI_SRCS:src/%.c=$(BUILD)/src/%.o)
# the public C API (src/api/, its header src/api/gpt.h installed as gpt.h):
# libgpt.so holds it, src/front/ and the library; only gpt_* is exported
API_SRCS   := $(wildcard src/api/*.c)
API_OBJS   := $(API_SRCS:src/%.c=$(BUILD)/src/%.o)
FRONT_OBJS := $(patsubst src/%.c,$(BUILD)/src/%.o,$(wildcard src/front/*.c))
SONAME     := libgpt.so.0
SO         := $(BUILD)/$(SONAME)
PAGE_OBJ   := $(BUILD)/src/serve/page_html.o
TEST_SRCS  := $(wildcard tests/test_*.c)
TEST_BINS  := $(TEST_SRCS:tests/%.c=$(BUILD)/tests/%)
TOOL_BINS  := $(BUILD)/tests/gen_checkpoint
BENCH_SRCS := $(wildcard tests/bench/*.c)
BENCH_BINS := $(BENCH_SRCS:tests/bench/%.c=$(BUILD)/bench/%)

.PHONY: all test check test-scale asan bench install clean checkpoints test-bins bench-bins docs compile_commands.json

# The two files slowest to compile start first, so that make -j2 builds
# the others beside them instead of waiting on them at the end.
SLOW_OBJS := $(BUILD)/src/kernels/matmul_avx512.o $(BUILD)/src/kernels/matmul_avx2.o
ifeq ($(BUILD),build)
all: $(SLOW_OBJS) gpt $(SO) $(BUILD)/libgpt.so
gpt: $(BUILD)/gpt
	cp $< $@
else
all: $(SLOW_OBJS) $(BUILD)/gpt $(SO) $(BUILD)/libgpt.so
endif

$(LIB): $(LIB_OBJS)
	rm -f $@
	$(AR) rcs $@ $^

$(BUILD)/gpt: $(CLI_OBJS) $(PAGE_OBJ) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# The shared library: the API, src/front/ and the library's objects; -z
# defs: every symbol it uses is in them or in the libraries it names;
# src/api/exports.map: only gpt_* exported.
$(SO): $(API_OBJS) $(FRONT_OBJS) $(LIB_OBJS) src/api/exports.map
	$(CC) $(LDFLAGS) -shared -Wl,-soname,$(SONAME) -Wl,-z,defs -Wl,--version-script=src/api/exports.map \
	  -o $@ $(filter %.o,$^) $(LDLIBS)

$(BUILD)/libgpt.so: $(SO)
	ln -sf $(SONAME) $@

# The static library make install puts beside it (build/libgpt.a is the
# internal one the tests link): the same objects as one relocatable object
# in which every symbol but gpt.h's calls is made local, so that a program
# linking it statically meets no name of gpt's internals.
STATIC := $(BUILD)/static/libgpt.a
$(STATIC): $(API_OBJS) $(FRONT_OBJS) $(LIB_OBJS) src/api/gpt.h
	@mkdir -p $(dir $@)
	sed -n 's/^GPT_API [^(]*[ *]\(gpt_[a-z_]*\)(.*/\1/p' src/api/gpt.h > $(BUILD)/static/exports.txt
	$(LD) -r -o $(BUILD)/static/gpt.o $(filter %.o,$^)
	objcopy --keep-global-symbols=$(BUILD)/static/exports.txt $(BUILD)/static/gpt.o
	rm -f $@
	$(AR) rcs $@ $(BUILD)/static/gpt.o

# pkg-config's gpt.pc, which make install writes for PREFIX: the shared
# library; cJSON and utf8proc only for a static link (Requires.private).
GPT_VERSION := $(shell sed -n 's/^\#define GPT_VERSION "\([^"]*\)".*/\1/p' src/front/front.h)
GPT_PC = 'prefix=$(PREFIX)' 'includedir=$${prefix}/include' 'libdir=$${prefix}/lib' '' \
  'Name: gpt' 'Description: a small, exact GPT-2 runtime' 'Version: $(GPT_VERSION)' \
  'Requires.private: libcjson libutf8proc' 'Cflags: -I$${includedir}' 'Libs: -L$${libdir} -lgpt' \
  'Libs.private: -lpthread -lm -ldl'
# Where the system python3 (PYTHON) finds a package under PREFIX: its own
# site-packages when that lies under PREFIX (Debian's /usr/local/lib/
# python3.X/dist-packages), else PREFIX's lib/python3.X/site-packages.
PYTHON ?= $(firstword $(wildcard /usr/bin/python3) python3)
PYDIR ?= $(shell $(PYTHON) -c 'import sys, sysconfig; p = sysconfig.get_path("purelib"); \
  print(p if p.startswith(sys.argv[1] + "/") else sysconfig.get_path("purelib", "posix_prefix", vars={"base": sys.argv[1]}))' \
  '$(PREFIX)' 2> /dev/null)

# gpt serve's page at / (src/serve/page.html) as a C array in the binary,
# written with od and sed (xxd is not everywhere).
$(BUILD)/src/serve/page_html.c: src/serve/page.html
	@mkdir -p $(dir $@)
	{ echo '/* generated from src/serve/page.html by the Makefile: do not edit */'; \
	  echo '#include "serve/serve.h"'; \
	  echo 'const unsigned char serve_page_html[] = {'; \
	  od -An -v -tx1 $< | sed 's/ *\([0-9a-f][0-9a-f]\)/0x\1,/g'; \
	  echo '};'; \
	  echo 'const size_t serve_page_html_len = sizeof serve_page_html;'; } > $@.tmp && mv $@.tmp $@

$(PAGE_OBJ): $(BUILD)/src/serve/page_html.c
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(BUILD)/src/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

# where an installed gpt looks for models and the tokenizer (locate.c)
$(BUILD)/src/front/locate.o: ALL_CFLAGS += -DGPT_DATADIR='"$(PREFIX)/share/gpt"'


$(BUILD)/tests/%.o: tests/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Itests -c -o $@ $<

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# the tests link the library; test_chat also the front-end's chat templates,
# test_request the readers of a request's settings and JSON
$(BUILD)/tests/test_chat: $(BUILD)/tests/test_chat.o $(BUILD)/src/front/chat.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(BUILD)/tests/test_request: $(BUILD)/tests/test_request.o \
                             $(addprefix $(BUILD)/src/front/,settings.o constrain.o numbers.o report.o request.o) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
# test_api: the public API linked from its objects (so that make asan
# checks it under the sanitizers too)
$(BUILD)/tests/test_api: $(BUILD)/tests/test_api.o $(API_OBJS) $(FRONT_OBJS) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/bench/%.o: tests/bench/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(BLAS_CFLAGS) -Itests -c -o $@ $<

$(BUILD)/bench/%: $(BUILD)/bench/%.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(BLAS_LIBS) $(LDLIBS)

# The docs that the table of generation settings says (src/front/settings.c):
# `make docs` writes them between the "BEGIN generated settings" and "END
# generated settings" lines of docs/usage.md, man/gpt.1 and
# completions/gpt.bash; tests/check_settings.sh fails when they differ.
SETTINGS_DOCS_OBJS := $(addprefix $(BUILD)/src/front/,settings.o constrain.o numbers.o report.o)
$(BUILD)/settings_docs: scripts/settings_docs.c $(SETTINGS_DOCS_OBJS) $(LIB)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $(filter %.c %.o %.a,$^) $(LDLIBS)

docs: $(BUILD)/settings_docs
	SETTINGS_DOCS=$(BUILD)/settings_docs sh scripts/settings-docs.sh

# Keep the test and bench objects: as intermediates make would delete them,
# and each `make test` would compile every test program again.
.SECONDARY: $(TEST_BINS:%=%.o) $(TOOL_BINS:%=%.o) $(BENCH_BINS:%=%.o)

test-bins: all $(TEST_BINS) $(TOOL_BINS) $(BUILD)/settings_docs

# The deterministic checkpoints of tests/fixtures/FORMULA.md, written by our
# own generator and verified against the published sha256 sums.
checkpoints: $(BUILD)/tests/gen_checkpoint
	BUILD=$(BUILD) CKPT_DIR=$(CKPT_DIR) sh tests/make_checkpoints.sh

# tests/run.sh runs the test programs TEST_JOBS at a time (default: the
# cores, at most 4; TEST_JOBS=1 one after another).
test: test-bins checkpoints
	BUILD=$(BUILD) CKPT_DIR=$(CKPT_DIR) TEST_SET=$(TEST_SET) sh tests/run.sh

# the source checks alone (tests/check_*.sh): the maps, the modules' rules,
# the manual, the completion, docs/ and the README against the program
check: $(BUILD)/gpt
	BUILD=$(BUILD) CKPT_DIR=$(CKPT_DIR) TEST_SET=checks sh tests/run.sh

# -O2, as gpt itself is built: the sanitizers check the code that ships, and
# the kernels' small inline helpers are inlined (at -O1 the suite took
# twice as long: test_forward 433 s against 184 s). `make -j2 asan` builds
# it 2 files at a time (the sub-make shares the jobserver). The source
# checks are not run again: they read the same sources and help texts.
asan:
	$(MAKE) BUILD=build-asan SANITIZE=address,undefined CFLAGS="-O2" TEST_SET=programs test

# two gpt serve behind haproxy, one killed midway (tests/scale/; README, Serving)
test-scale: $(BUILD)/gpt
	GPT=$(BUILD)/gpt sh tests/scale/haproxy.sh

bench-bins: $(BUILD)/gpt $(BENCH_BINS)

bench: bench-bins checkpoints
	BUILD=$(BUILD) CKPT_DIR=$(CKPT_DIR) sh tests/bench/run.sh

# gpt, the GPT-2 tokenizer files and the demo model (run when no GPT-2 is
# installed) where it looks for them (PREFIX/share/gpt), and
# scripts/get-gpt2.sh as gpt-get-gpt2; the manual page gpt(1) and the bash
# completion (which bash-completion loads from share/bash-completion); the
# C library (include/gpt.h, lib/libgpt.so.0 and its libgpt.so link,
# lib/libgpt.a, lib/pkgconfig/gpt.pc) and the Python package (PYDIR/gpt, with a link to the
# library beside it).
install: $(BUILD)/gpt $(SO) $(STATIC)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/gpt
	install -m 755 $(BUILD)/gpt $(DESTDIR)$(PREFIX)/bin/gpt
	install -m 755 scripts/get-gpt2.sh $(DESTDIR)$(PREFIX)/bin/gpt-get-gpt2
	install -m 644 models/vocab.json models/merges.txt models/demo.bin $(DESTDIR)$(PREFIX)/share/gpt/
	install -d $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 644 man/gpt.1 $(DESTDIR)$(PREFIX)/share/man/man1/gpt.1
	install -d $(DESTDIR)$(PREFIX)/share/bash-completion/completions
	install -m 644 completions/gpt.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/gpt
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 644 src/api/gpt.h $(DESTDIR)$(PREFIX)/include/gpt.h
	install -m 755 $(SO) $(DESTDIR)$(PREFIX)/lib/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(PREFIX)/lib/libgpt.so
	install -m 644 $(STATIC) $(DESTDIR)$(PREFIX)/lib/libgpt.a
	printf '%s\n' $(GPT_PC) > $(DESTDIR)$(PREFIX)/lib/pkgconfig/gpt.pc
	@if [ -z "$(PYDIR)" ]; then echo "make install: no python3: the Python package (python/gpt) not installed"; else \
	  install -d $(DESTDIR)$(PYDIR)/gpt && install -m 644 python/gpt/__init__.py $(DESTDIR)$(PYDIR)/gpt/ && \
	  ln -sf $(PREFIX)/lib/$(SONAME) $(DESTDIR)$(PYDIR)/gpt/$(SONAME); fi

clean:
	rm -rf build build-asan gpt

# compile_commands.json for editors (clangd and the like): one entry per .c
# file of src/ and tests/ with the command this Makefile runs for it (its
# flags, the target-specific ones too), read from `make -n -B` of each
# object: src/ and tests/ as `make` builds them, tests/bench/ as `make
# bench`, tests/fuzz/ as `make fuzz` (clang). Nothing is built.
CC_JSON_OBJS = $(LIB_OBJS) $(CLI_OBJS) $(API_OBJS) $(patsubst tests/%.c,$(BUILD)/tests/%.o,$(wildcard tests/*.c)) \
               $(BENCH_BINS:%=%.o) $(patsubst tests/fuzz/%.c,$(FUZZ_DIR)/tests/%.o,$(wildcard tests/fuzz/*.c))
# a compiler line is one with -c and a .c file last; esc escapes " and backslash
CC_JSON_AWK = function esc(s,  r, i, c) { for (i = 1; i <= length(s); i++) { c = substr(s, i, 1); \
                  r = r (c == "\\" || c == "\"" ? "\\" : "") c } return r } \
              / -c / && $$NF ~ /\.c$$/ { printf "%s\n  {\"directory\": \"%s\", \"file\": \"%s\", \"command\": \"%s\"}", \
                  n++ ? "," : "[", esc(dir), esc($$NF), esc($$0) } \
              END { print n ? "\n]" : "[]" }
compile_commands.json:
	@$(MAKE) --no-print-directory --no-silent -n -B $(CC_JSON_OBJS) | awk -v dir='$(CURDIR)' '$(CC_JSON_AWK)' > $@.tmp
	@mv $@.tmp $@
	@echo "$@: $$(grep -c '"file"' $@) files"

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

# ---------------------------------------------------------------------------
# make fuzz: the libFuzzer harnesses of tests/fuzz/ (see tests/fuzz/README.md).
# Each harness and the library are built with clang and
# -fsanitize=fuzzer,address,undefined into build/fuzz/, the library with
# -DGPT_FUZZ (file_map reads a heap copy of exactly the file's size, so a
# read past the end of a file is an ASan report); then each harness runs
# FUZZ_SECONDS seconds on a copy of its seed corpus (tests/fuzz/corpus/NAME,
# never written to). Any crash, leak, timeout or sanitizer report fails;
# the inputs that caused it are left in build/fuzz/artifacts/.
#   make fuzz FUZZ_SECONDS=30        make fuzz FUZZ_TARGETS="cli model"
ifeq ($(origin FUZZ_CC),undefined)
FUZZ_CC := $(shell command -v clang >/dev/null 2>&1 && echo clang || echo clang-14)
endif
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= tokenizer safetensors model tokenizer_files cli gguf completion chat ollama responses embed jsonl grammar schema lora
FUZZ_DIR     := build/fuzz
FUZZ_SAN     := -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
FUZZ_CFLAGS  := $(BASE_CFLAGS) $(FUZZ_SAN) -g -O1 -fno-omit-frame-pointer -DGPT_FUZZ
# at -O1 under the sanitizers clang leaves some `omp simd` loops scalar, and says so
FUZZ_CFLAGS  += -Wno-pass-failed
FUZZ_LIB_OBJS := $(LIB_SRCS:src/%.c=$(FUZZ_DIR)/src/%.o)
FUZZ_BINS    := $(FUZZ_TARGETS:%=$(FUZZ_DIR)/fuzz_%)

.PHONY: fuzz fuzz-build
fuzz: fuzz-build
	FUZZ_DIR=$(FUZZ_DIR) FUZZ_SECONDS=$(FUZZ_SECONDS) sh tests/fuzz/run.sh $(FUZZ_TARGETS)

fuzz-build: $(FUZZ_BINS)

$(FUZZ_DIR)/libgpt.a: $(FUZZ_LIB_OBJS)
	rm -f $@
	$(AR) rcs $@ $^

$(FUZZ_DIR)/src/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c -o $@ $<

# The hand-written SIMD kernels (src/kernels/*_avx2.c, *_avx512.c: matmul,
# attention, sampler) are built without the fuzzer's and the sanitizers'
# instrumentation: no harness parses anything in them, and clang 14 takes
# over 10 minutes per file to instrument their unrolled intrinsics (2 cores;
# uninstrumented -O1: under a minute). make asan checks them under ASan and
# UBSan (gcc), and each fast path is tested against the plain reference.
FUZZ_PLAIN_OBJS := $(filter $(FUZZ_DIR)/src/kernels/%_avx2.o $(FUZZ_DIR)/src/kernels/%_avx512.o,$(FUZZ_LIB_OBJS))
$(FUZZ_PLAIN_OBJS): $(FUZZ_DIR)/src/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(BASE_CFLAGS) -g -O1 -fno-omit-frame-pointer -DGPT_FUZZ -Wno-pass-failed -c -o $@ $<

$(FUZZ_DIR)/tests/%.o: tests/fuzz/%.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -Itests/fuzz -Isrc/cli -c -o $@ $<

# parse_options (and the stdout writes of --help, the number rules of
# src/front/numbers.c) without main(): the harness provides usage_error.
$(FUZZ_DIR)/fuzz_cli: $(FUZZ_DIR)/tests/fuzz_cli.o $(FUZZ_DIR)/src/cli/options.o $(FUZZ_DIR)/src/cli/output.o \
                      $(FUZZ_DIR)/src/front/numbers.o $(FUZZ_DIR)/src/front/model_options.o \
                      $(FUZZ_DIR)/src/front/settings.o $(FUZZ_DIR)/src/front/constrain.o $(FUZZ_DIR)/libgpt.a
	$(FUZZ_CC) $(FUZZ_SAN) -o $@ $^ $(PKG_LIBS) -lpthread -lm

# gpt serve's body parsers (api.c, with request_new/request_free of
# requests.c) and what they use of src/front/, without http.c or serve.c:
# the harnesses build a stub Server (fuzz_serve.h).
FUZZ_SERVE_OBJS := $(addprefix $(FUZZ_DIR)/src/,serve/api.o serve/ollama.o serve/responses.o serve/tools.o serve/embed.o serve/requests.o front/chat.o front/request.o front/settings.o \
                     front/constrain.o front/numbers.o front/json.o front/session.o front/locate.o front/report.o)
$(FUZZ_DIR)/fuzz_completion $(FUZZ_DIR)/fuzz_chat $(FUZZ_DIR)/fuzz_ollama $(FUZZ_DIR)/fuzz_responses $(FUZZ_DIR)/fuzz_embed: $(FUZZ_DIR)/fuzz_%: $(FUZZ_DIR)/tests/fuzz_%.o $(FUZZ_SERVE_OBJS) \
                                                  $(FUZZ_DIR)/libgpt.a
	$(FUZZ_CC) $(FUZZ_SAN) -o $@ $^ $(PKG_LIBS) -lpthread -lm

# a --batch --jsonl line: batch.c (batch_line_error) and what it links of
# the command, parse_options for the options, without main.c.
FUZZ_JSONL_OBJS := $(addprefix $(FUZZ_DIR)/src/,cli/batch.o cli/common.o cli/probs.o cli/progress.o cli/output.o \
                     cli/options.o front/model_options.o front/numbers.o front/request.o front/settings.o front/constrain.o \
                     front/json.o \
                     front/session.o front/locate.o front/report.o)
$(FUZZ_DIR)/fuzz_jsonl: $(FUZZ_DIR)/tests/fuzz_jsonl.o $(FUZZ_JSONL_OBJS) $(FUZZ_DIR)/libgpt.a
	$(FUZZ_CC) $(FUZZ_SAN) -o $@ $^ $(PKG_LIBS) -lpthread -lm

$(FUZZ_DIR)/fuzz_%: $(FUZZ_DIR)/tests/fuzz_%.o $(FUZZ_DIR)/libgpt.a
	$(FUZZ_CC) $(FUZZ_SAN) -o $@ $^ $(PKG_LIBS) -lpthread -lm

.SECONDARY: $(FUZZ_TARGETS:%=$(FUZZ_DIR)/tests/fuzz_%.o)

ifneq ($(BUILD),build)
-include $(shell find $(FUZZ_DIR) -name '*.d' 2>/dev/null)
endif
