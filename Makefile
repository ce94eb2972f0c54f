# dswa — build, test, bench, install.  `make` builds build/libdswa.{so,a} and build/dswa;
# `make test` runs every test (GPU tests skip visibly without a GPU); `make bench` runs the
# main job. The CUDA backend is built when nvcc is found and skipped (one line) otherwise.

PREFIX   ?= /usr/local
BUILD    ?= build
ifeq ($(origin CC),default)
CC       := gcc
endif
CUDA_HOME ?= $(shell d=$$(dirname $$(dirname $$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc))); [ -x $$d/bin/nvcc ] && echo $$d)
NVCC     ?= $(if $(CUDA_HOME),$(CUDA_HOME)/bin/nvcc,)
# Architectures with machine code; PTX of the lowest is embedded for anything newer.
CUDA_ARCHS ?= 80 86 89 90 100 120
# `make GPU_ARCH=90` builds machine code for one GPU only (the GPU script does this).
ifneq ($(GPU_ARCH),)
CUDA_ARCHS := $(GPU_ARCH)
endif

WARN     := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter
CFLAGS   ?= -O3
# `override`: CFLAGS/NVFLAGS given on the command line (e.g. sanitizers) add to these.
override CFLAGS += -std=c11 -fPIC -fopenmp $(WARN) -Iinclude -Isrc -D_POSIX_C_SOURCE=200809L
LDLIBS   := -fopenmp -lm

# src/ holds one folder per layer, every call between them running downward: api (the public
# entry points: validate, then dispatch) and aot (the export) on top; the backends cpu and cuda,
# and ref (the float64 reference); core (validation, errors, dtypes, problem translation) at
# the bottom. src/cuda/absent.c replaces the CUDA backend without nvcc;
# src/aot/ptx_embed.c is a build-time generator, not part of the library.
LIB_C    := $(filter-out src/cuda/absent.c src/aot/ptx_embed.c,$(wildcard src/*/*.c))
LIB_CU   := $(wildcard src/cuda/*.cu)
LIB_HDR  := include/dswa.h $(wildcard src/*/*.h src/*/*.cuh)
# The CLI: tools/*.c, tools/bench/ (the parts of `dswa bench`) and tools/ptx_fit/ (the engine of
# `dswa ptx-fit`, used by the CLI only).
PTX_FIT_C := $(wildcard tools/ptx_fit/*.c)
TOOL_C   := $(wildcard tools/*.c tools/bench/*.c) $(PTX_FIT_C)
TEST_LIB := $(wildcard tests/lib/*.c)
TESTS_C  := $(wildcard tests/test_*.c)

ifneq ($(NVCC),)
HAVE_CUDA := 1
GENCODE  := $(foreach a,$(CUDA_ARCHS),-gencode=arch=compute_$(a),code=sm_$(a)) \
            -gencode=arch=compute_$(firstword $(CUDA_ARCHS)),code=compute_$(firstword $(CUDA_ARCHS))
NVFLAGS  ?= -O3
override NVFLAGS += -std=c++17 -Xcompiler -fPIC,-Wall,-Wextra -Iinclude -Isrc $(GENCODE) \
            -Xptxas -warn-spills -Xptxas -warn-lmem-usage --expt-relaxed-constexpr $(EXTRA_NVFLAGS)
CUDA_OBJ := $(patsubst src/%.cu,$(BUILD)/obj/%.cu.o,$(LIB_CU))
CUDA_LIBS := -L$(CUDA_HOME)/lib64 -lcudart_static -ldl -lpthread -lrt -lstdc++
override CFLAGS += -DDSWA_HAVE_CUDA=1 -I$(CUDA_HOME)/include
else
HAVE_CUDA :=
CUDA_OBJ := $(BUILD)/obj/cuda/absent.o
CUDA_LIBS :=
endif

LIB_OBJ  := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(LIB_C)) $(CUDA_OBJ)
TEST_BIN := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TESTS_C))
TEST_LIB_OBJ := $(patsubst tests/lib/%.c,$(BUILD)/obj/tests_%.o,$(TEST_LIB))
# Made through pattern rules, so make would treat them as intermediate: delete them after
# each build and rebuild them (and relink every test) the next time.
.SECONDARY: $(TEST_LIB_OBJ)

.PHONY: all test test-long bench check probe install uninstall clean cuda-note gpu-check ptxas-report wheel cuda-config FORCE
.DEFAULT_GOAL := all
# Objects depend on the flags they were built with: changing GPU_ARCH, CFLAGS or NVFLAGS
# rebuilds them instead of linking code built for another GPU.
FLAGS_STAMP := $(BUILD)/obj/flags.stamp
FLAGS_TEXT := $(CC) $(CFLAGS) | $(NVCC) $(NVFLAGS)
$(FLAGS_STAMP): FORCE | $(BUILD)/obj
	@printf '%s\n' '$(FLAGS_TEXT)' | cmp -s - $@ || printf '%s\n' '$(FLAGS_TEXT)' > $@
all: cuda-note $(BUILD)/libdswa.so $(BUILD)/libdswa.a $(BUILD)/dswa $(BUILD)/static-libs.txt

cuda-note:
ifeq ($(HAVE_CUDA),)
	@echo "dswa: nvcc not found: building without the CUDA backend (dswa_forward_cuda returns DSWA_ERR_NO_DEVICE)"
endif

$(BUILD)/obj/%.o: src/%.c $(LIB_HDR) $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c $< -o $@
$(BUILD)/obj/%.cu.o: src/%.cu $(LIB_HDR) $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(NVCC) $(NVFLAGS) -c $< -o $@
$(BUILD)/obj/tests_%.o: tests/lib/%.c $(wildcard tests/lib/*.h) include/dswa.h $(FLAGS_STAMP) | $(BUILD)/obj
	$(CC) $(CFLAGS) -Itests/lib -c $< -o $@

$(BUILD)/libdswa.a: $(LIB_OBJ)
	rm -f $@ && ar rcs $@ $^
# libdswa.so is versioned from include/dswa.h: the file libdswa.so.X.Y.Z with SONAME
# libdswa.so.X (what programs linked against it load), and the links libdswa.so.X, libdswa.so.
dswa_version = $(shell sed -n 's/.*define DSWA_VERSION_$(1)  *\([0-9][0-9]*\).*/\1/p' include/dswa.h)
LIB_MAJOR   := $(call dswa_version,MAJOR)
LIB_VERSION := $(LIB_MAJOR).$(call dswa_version,MINOR).$(call dswa_version,PATCH)
ifneq ($(words $(subst ., ,$(LIB_VERSION))),3)
$(error include/dswa.h: DSWA_VERSION_MAJOR/MINOR/PATCH not found)
endif
SONAME  := libdswa.so.$(LIB_MAJOR)
SO_FILE := libdswa.so.$(LIB_VERSION)
$(BUILD)/$(SO_FILE): $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,$(SONAME) -o $@ $^ $(CUDA_LIBS) $(LDLIBS)
$(BUILD)/$(SONAME): $(BUILD)/$(SO_FILE)
	ln -sf $(SO_FILE) $@
$(BUILD)/libdswa.so: $(BUILD)/$(SONAME)
	ln -sf $(SONAME) $@
# What a program linking libdswa.a needs after it (`make install` writes it into dswa.pc and the
# CMake package; recorded here so that an install as another user links what this build used).
$(BUILD)/static-libs.txt: $(FLAGS_STAMP) Makefile
	printf '%s\n' '$(strip $(CUDA_LIBS) $(LDLIBS))' > $@
# The commit the CLI is built from (`dswa bench --json` records it). Only the CLI depends on
# it, through its own stamp: a new commit relinks the CLI, never the library.
GIT_COMMIT := $(shell git describe --always --dirty 2>/dev/null || echo unknown)
COMMIT_STAMP := $(BUILD)/obj/commit.stamp
$(COMMIT_STAMP): FORCE | $(BUILD)/obj
	@printf '%s\n' '$(GIT_COMMIT)' | cmp -s - $@ || printf '%s\n' '$(GIT_COMMIT)' > $@
# The CLI is built from include/dswa.h and its own files only: no -Isrc.
$(BUILD)/dswa: $(TOOL_C) $(wildcard tools/*.h tools/bench/*.h tools/ptx_fit/*.h) include/dswa.h $(BUILD)/libdswa.a $(COMMIT_STAMP)
	$(CC) $(filter-out -Isrc,$(CFLAGS)) -DDSWA_GIT_COMMIT='"$(GIT_COMMIT)"' -o $@ $(TOOL_C) $(BUILD)/libdswa.a $(CUDA_LIBS) $(LDLIBS)
# The tests of tools/ptx_fit (test_ptx_fit; test_aot assembles with its ptxas) link its sources.
$(BUILD)/tests/test_ptx_fit $(BUILD)/tests/test_aot: EXTRA_TEST_SRC := -Itools $(PTX_FIT_C)
$(BUILD)/tests/test_ptx_fit $(BUILD)/tests/test_aot: $(PTX_FIT_C) $(wildcard tools/ptx_fit/*.h)
$(BUILD)/tests/%: tests/%.c $(wildcard tests/lib/*.h) $(BUILD)/libdswa.a $(TEST_LIB_OBJ) | $(BUILD)/tests
	$(CC) $(CFLAGS) -Itests/lib -o $@ $< $(EXTRA_TEST_SRC) $(TEST_LIB_OBJ) $(BUILD)/libdswa.a $(CUDA_LIBS) $(LDLIBS)

$(BUILD)/obj $(BUILD)/tests:
	mkdir -p $@

# the longest first: tests/run.sh runs them in parallel in this order
TEST_RUN := tests/python_tests.sh $(TEST_BIN) tests/test_cli.sh tests/install/test_install.sh
test: all $(TEST_BIN)
	@BUILD=$(BUILD) sh tests/run.sh $(TEST_RUN)
# The same tests with DSWA_TEST_LONG=1 in their environment: each adds its long soaks and sweeps.
test-long: all $(TEST_BIN)
	@DSWA_TEST_LONG=1 BUILD=$(BUILD) sh tests/run.sh $(TEST_RUN)

# bench/readme_table.py JSON [--compare FILE] into OUT: exit status 3 is a CPU run's (no README
# table: it is made from a GPU run; the bench goes on); any other failure (a comparator file
# refused, a file that is not the bench's) fails `make bench`, its message on stderr.
# $(call readme_table,JSON,COMPARE-or-empty,OUT)
define readme_table
rm -f $(3); c="$(2)"; python3 bench/readme_table.py $(1) $${c:+--compare "$$c"} > $(3).part; rc=$$?; \
if [ $$rc -eq 0 ]; then mv $(3).part $(3); echo "$(1): README table: $(3)"; \
elif [ $$rc -eq 3 ]; then rm -f $(3).part; echo "$(1): no README table (it is made from a GPU run)"; \
else rm -f $(3).part; echo "make bench: bench/readme_table.py $(1) failed (exit $$rc)" >&2; exit 1; fi
endef

# dswa's own rows as JSON ($(BUILD)/bench.json), its table and the README's table from that one
# run, then (where Python has torch and Triton and a GPU is present) the comparators of the same
# run, their table and the plot in $(BUILD)/; then the same for the fused SAME-L block, and the
# backward's rows of both (with the fused block's training comparators).
bench: all
	$(BUILD)/dswa bench --json > $(BUILD)/bench.json.part && mv $(BUILD)/bench.json.part $(BUILD)/bench.json
	python3 bench/profiling/bench-table.py $(BUILD)/bench.json
	@$(call readme_table,$(BUILD)/bench.json,,$(BUILD)/readme-table.md)
	@if python3 -c "import torch, triton, sys; sys.exit(not torch.cuda.is_available())" 2>/dev/null; then \
	  python3 bench/compare.py --json $(BUILD)/compare.json && \
	  python3 bench/plot.py $(BUILD)/compare.json $(BUILD)/perf.png; \
	else echo "comparators skipped: they need python3 with torch, triton and a CUDA GPU"; fi
	@# The fused SAME-L block: its bench, then (torch and a GPU) its comparator, the compiled
	@# prologue + op; readme_table.py joins the two (the ratio column) into its README table.
	$(BUILD)/dswa bench --op samel --json > $(BUILD)/bench-samel.json.part && \
	mv $(BUILD)/bench-samel.json.part $(BUILD)/bench-samel.json
	@rm -f $(BUILD)/samel-compare.json; \
	if python3 -c "import torch, sys; sys.exit(not torch.cuda.is_available())" 2>/dev/null; then \
	  python3 bench/compare.py --op samel --json $(BUILD)/samel-compare.json || true; \
	else echo "samel comparator skipped: it needs python3 with torch and a CUDA GPU"; fi
	@f=; [ -s $(BUILD)/samel-compare.json ] && f=$(BUILD)/samel-compare.json; \
	$(call readme_table,$(BUILD)/bench-samel.json,$$f,$(BUILD)/readme-samel.md); \
	if [ -f $(BUILD)/readme-samel.md ]; then cat $(BUILD)/readme-samel.md; \
	  python3 bench/plot.py $(BUILD)/bench-samel.json $(BUILD)/perf-samel.png $$f || true; fi
	@# The backward: the op's rows, the fused block's, and (torch and a GPU) its training
	@# comparators, joined by readme_table.py into the fused block's backward table.
	$(BUILD)/dswa bench --backward --json > $(BUILD)/bench-backward.json.part && \
	mv $(BUILD)/bench-backward.json.part $(BUILD)/bench-backward.json
	@$(call readme_table,$(BUILD)/bench-backward.json,,$(BUILD)/readme-backward.md)
	$(BUILD)/dswa bench --op samel --backward --json > $(BUILD)/bench-samel-backward.json.part && \
	mv $(BUILD)/bench-samel-backward.json.part $(BUILD)/bench-samel-backward.json
	@rm -f $(BUILD)/train-compare.json; \
	if python3 -c "import torch, sys; sys.exit(not torch.cuda.is_available())" 2>/dev/null; then \
	  python3 bench/compare.py --op samel --backward --json $(BUILD)/train-compare.json || true; \
	else echo "training comparators skipped: they need python3 with torch and a CUDA GPU"; fi
	@f=; [ -s $(BUILD)/train-compare.json ] && f=$(BUILD)/train-compare.json; \
	$(call readme_table,$(BUILD)/bench-samel-backward.json,$$f,$(BUILD)/readme-samel-backward.md)

check: all
	$(BUILD)/dswa check

# Memory-pattern probes (bench/profiling/probe_bw.cu, probe_bwd.cu): not part of the library.
probe: $(BUILD)/probe_bw $(BUILD)/probe_bwd
$(BUILD)/probe_bw $(BUILD)/probe_bwd: $(BUILD)/%: bench/profiling/%.cu | $(BUILD)/obj
ifneq ($(HAVE_CUDA),)
	$(NVCC) -O3 -std=c++17 $(GENCODE) -Iinclude -Itests/lib $< -o $@
else
	@echo "make probe needs nvcc"; exit 1
endif

# `+`: the script's own make calls share this make's jobserver (make -j).
gpu-check:
	+bash scripts/gpu-check.sh

# The wheel for PyTorch users (scripts/build-wheel.sh: libdswa.so built in build-wheel/ for
# every architecture of CUDA_ARCHS' default, tagged manylinux by auditwheel) into WHEEL_DIR
# (default: the script's, build-wheel/dist).
wheel:
	+bash scripts/build-wheel.sh $(WHEEL_DIR)
# What scripts/build-wheel.sh checks a build against: the toolkit (empty: no nvcc) and the
# architectures with machine code (PTX of the first one for newer GPUs).
cuda-config:
	@echo 'CUDA_HOME=$(CUDA_HOME)'
	@echo 'CUDA_ARCHS=$(CUDA_ARCHS)'

# Registers, shared memory and spills per architecture, as ptxas reports them.
ptxas-report:
	@for a in $(CUDA_ARCHS); do for f in $(LIB_CU); do \
	  echo "== sm_$$a $$f"; $(NVCC) -std=c++17 -Iinclude -Isrc -O3 -gencode=arch=compute_$$a,code=sm_$$a \
	     -Xptxas -v -c $$f -o /dev/null 2>&1 | grep -E 'Compiling|registers|spill|smem' || true; done; done

# `make install [PREFIX=/usr/local] [DESTDIR=]`: include/dswa.h; lib/libdswa.so.X.Y.Z with the
# links libdswa.so.X and libdswa.so; lib/libdswa.a; bin/dswa; lib/pkgconfig/dswa.pc (Libs has an
# rpath); lib/cmake/dswa (find_package(dswa): dswa::dswa, shared, and dswa::dswa_static). It
# builds first, unless $(BUILD) belongs to another user (`sudo make install` after `make`): then it
# installs what is built and compiles nothing as root. `make uninstall` with the same PREFIX and
# DESTDIR removes exactly these files (and lib/cmake/dswa when left empty).
INSTALL_DIR  = $(DESTDIR)$(PREFIX)
INSTALLED    = include/dswa.h lib/$(SO_FILE) lib/$(SONAME) lib/libdswa.so lib/libdswa.a bin/dswa \
               lib/pkgconfig/dswa.pc lib/cmake/dswa/dswaConfig.cmake lib/cmake/dswa/dswaConfigVersion.cmake
INSTALL_FROM = $(BUILD)/$(SO_FILE) $(BUILD)/libdswa.a $(BUILD)/dswa $(BUILD)/static-libs.txt
STATIC_LIBS  = $(strip $(file <$(BUILD)/static-libs.txt))
empty :=
# Into /usr or /usr/local (no DESTDIR), the loader finds libdswa.so.X through its cache: refresh it.
ldconfig_if_system = @case '$(DESTDIR)$(PREFIX)' in /usr|/usr/local|/usr/|/usr/local/) \
    if [ "$$(id -u)" = 0 ]; then echo ldconfig; ldconfig; fi ;; esac
install_sed  = sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(LIB_VERSION)|g' -e 's|@VERSION_MAJOR@|$(LIB_MAJOR)|g'
install: $(if $(shell [ -e $(BUILD) ] && [ ! -O $(BUILD) ] && echo other),,all)
	@for f in $(INSTALL_FROM); do [ -f $$f ] || { echo "make install: $$f is missing: run make first"; exit 1; }; done
	install -d -m 755 $(INSTALL_DIR)/include $(INSTALL_DIR)/bin $(INSTALL_DIR)/lib/pkgconfig $(INSTALL_DIR)/lib/cmake/dswa
	install -m 644 include/dswa.h $(INSTALL_DIR)/include/
	install -m 755 $(BUILD)/$(SO_FILE) $(INSTALL_DIR)/lib/
	ln -sf $(SO_FILE) $(INSTALL_DIR)/lib/$(SONAME)
	ln -sf $(SONAME) $(INSTALL_DIR)/lib/libdswa.so
	install -m 644 $(BUILD)/libdswa.a $(INSTALL_DIR)/lib/
	install -m 755 $(BUILD)/dswa $(INSTALL_DIR)/bin/
	$(install_sed) -e 's|@STATIC_LIBS@|$(STATIC_LIBS)|g' dswa.pc.in > $(INSTALL_DIR)/lib/pkgconfig/dswa.pc
	$(install_sed) -e 's|@STATIC_LIBS@|$(subst $(empty) $(empty),;,$(STATIC_LIBS))|g' \
	    cmake/dswaConfig.cmake.in > $(INSTALL_DIR)/lib/cmake/dswa/dswaConfig.cmake
	$(install_sed) cmake/dswaConfigVersion.cmake.in > $(INSTALL_DIR)/lib/cmake/dswa/dswaConfigVersion.cmake
	chmod 644 $(INSTALL_DIR)/lib/pkgconfig/dswa.pc $(INSTALL_DIR)/lib/cmake/dswa/dswaConfig*.cmake
	$(ldconfig_if_system)

uninstall:
	rm -f $(addprefix $(INSTALL_DIR)/,$(INSTALLED))
	@if [ -d $(INSTALL_DIR)/lib/cmake/dswa ]; then rmdir --ignore-fail-on-non-empty $(INSTALL_DIR)/lib/cmake/dswa; fi
	$(ldconfig_if_system)

clean:
	rm -rf $(BUILD)

# ==== fuzz: the PTX reader of `dswa ptx-fit` (tools/ptx_fit/) ================================
# `make fuzz [FUZZ_SECONDS=120]` builds fuzz/ptx_fit_fuzz.c with clang's libFuzzer,
# AddressSanitizer and UndefinedBehaviorSanitizer (any report aborts) and runs it for
# FUZZ_SECONDS, seeded with tests/fixtures and a PTX dictionary. The corpus grows in
# $(BUILD)/fuzz/corpus; a crashing input lands in $(BUILD)/fuzz/ (keep it as
# tests/fixtures/fuzz-<what>.ptx: test_ptx_fit replays those). Debian: apt-get install clang
# (with libclang-rt-14-dev where clang's runtime is a separate package).
FUZZ_SECONDS ?= 120
# The library sources ptx_fit calls (dswa_ptx_isa_for_target, dswa_ptx_shared_memory), compiled
# in without the rest.
PTX_FIT_LIB_C := src/aot/ptx_isa.c src/aot/ptx_shared.c
FUZZ_CC      ?= clang
.PHONY: fuzz
fuzz:
	mkdir -p $(BUILD)/fuzz/corpus
	$(FUZZ_CC) -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	    -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Itools -Iinclude \
	    -D_POSIX_C_SOURCE=200809L fuzz/ptx_fit_fuzz.c $(PTX_FIT_C) $(PTX_FIT_LIB_C) -o $(BUILD)/fuzz/ptx_fit_fuzz
	$(BUILD)/fuzz/ptx_fit_fuzz -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -timeout=10 \
	    -rss_limit_mb=2048 -dict=fuzz/ptx.dict -artifact_prefix=$(BUILD)/fuzz/ -print_final_stats=1 \
	    $(BUILD)/fuzz/corpus tests/fixtures
# ==== end of fuzz ================================================================================

# ---- AOT PTX ------------------------------------------------------------------------------------
# The kernels as PTX for TensorRT's AOT plugin path (src/aot/export.c; `dswa aot`): for each
# architecture in AOT_ARCHS, `nvcc -ptx` of each kernel family's file (AOT_SRC_<family>, the
# families of kernels.h: band, with the op's and the fused block's band entries; wide; scalar,
# the fused block's) with the library's own device flags (NVFLAGS without -gencode, so
# EXTRA_NVFLAGS variants export what they run), split into
# one module per entry and embedded in the library as C strings by src/aot/ptx_embed.c, so that
# exporting needs no CUDA toolkit at run time. Only nvcc's front end runs (no ptxas): ~2 s per
# file and architecture. Without nvcc none of this is built and the dswa_aot_* functions return
# DSWA_ERR_UNSUPPORTED. AOT_ARCHS does not follow GPU_ARCH: exports are for
# other machines.
AOT_ARCHS ?= 80 86 89 90 100 120
AOT_DIR   := $(BUILD)/aot
$(BUILD)/obj/aot/export.o: $(LIB_HDR)
ifneq ($(HAVE_CUDA),)
# DSWA_AOT_PTX leaves out the library-only entries (the fused kernels' alpha_at variants).
AOT_NVFLAGS := $(filter-out -gencode=%,$(NVFLAGS)) -DDSWA_AOT_PTX
AOT_DEPS  := $(LIB_HDR) $(FLAGS_STAMP)
AOT_SRC_band   := src/cuda/kernel_band.cu
AOT_SRC_wide   := src/cuda/kernel_wide.cu
AOT_SRC_scalar := src/cuda/kernel_samel_scalar.cu
AOT_FAMILIES := band wide scalar
# ptx_embed's arguments: FAMILY ARCH FILE.ptx for each family and architecture
AOT_EMBED := $(foreach f,$(AOT_FAMILIES),$(foreach a,$(AOT_ARCHS),$(f) $(a) $(AOT_DIR)/$(f)_sm$(a).ptx))
AOT_PTX   := $(filter %.ptx,$(AOT_EMBED))

define AOT_PTX_RULE
$$(AOT_DIR)/$(1)_sm%.ptx: $$(AOT_SRC_$(1)) $$(AOT_DEPS) | $$(AOT_DIR)
	$$(NVCC) $$(AOT_NVFLAGS) -ptx -arch=compute_$$* $$< -o $$@
endef
$(foreach f,$(AOT_FAMILIES),$(eval $(call AOT_PTX_RULE,$(f))))
$(AOT_DIR)/ptx_embed: src/aot/ptx_embed.c src/aot/ptx_text.c src/aot/ptx_text.h | $(AOT_DIR)
	$(CC) -O2 -std=c11 $(WARN) -Isrc -D_POSIX_C_SOURCE=200809L -o $@ src/aot/ptx_embed.c src/aot/ptx_text.c
$(AOT_DIR)/aot_ptx_data.c: $(AOT_DIR)/ptx_embed $(AOT_PTX)
	$(AOT_DIR)/ptx_embed $@ $(AOT_EMBED)
$(BUILD)/obj/aot_ptx_data.o: $(AOT_DIR)/aot_ptx_data.c $(LIB_HDR) | $(BUILD)/obj
	$(CC) $(CFLAGS) -c $< -o $@
$(BUILD)/libdswa.a $(BUILD)/$(SO_FILE): $(BUILD)/obj/aot_ptx_data.o
endif
$(AOT_DIR):
	mkdir -p $@
# ---- end of AOT PTX -----------------------------------------------------------------------------
