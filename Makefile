# pg_llm — PGXS build of the extension, plus the PostgreSQL-free engine
# library, CLI and unit tests (own rules: PGXS's PROGRAM and MODULE_big would
# share OBJS).
#
#   make                 extension (llm.so) + build/llm-cli + unit tests
#   make install         extension, SQL scripts and the default model
#                        (MODELS="smollm2 gemma3-270m": several by name)
#   make model           fetch the default model into models/
#                        (MODEL=gemma3-270m: another one by name)
#   make test            everything README.md's test command runs
#   make demo            throwaway server + the tickets demo
#   make bench           benchmarks (bench/run)
#   make fuzz            libFuzzer targets under ASan+UBSan, FUZZ_SECONDS each
#                        (fuzz/fuzz.mk, docs/FUZZING.md; not part of make test)
#   make USE_CUDA=0      no CUDA backend even where nvcc exists (else, when
#                        $(CUDA_HOME)/bin/nvcc exists: build/llm_cuda.so and
#                        build/llm-parity, rules in kernels/cuda/cuda.mk)

EXTENSION   = llm
MODULE_big  = llm
DATA        = $(wildcard sql/llm--*.sql)
PGFILEDESC  = "pg_llm - LLM inference inside PostgreSQL"
# The PostgreSQL side, by layer: the wire and the mailbox (channel/), what the
# three kinds of process share (common/), the backend's SQL surface and the
# LLM Batch node (pg/), the inference worker (worker/), the job system (jobs/).
PG_DIRS     = channel common pg pg/sql pg/batch worker jobs
OBJS        = $(patsubst %.c,%.o,$(foreach d,$(PG_DIRS),$(wildcard $(d)/*.c)))

# pg_regress suites, PGXS style (test/sql, test/expected): every suite,
# setup first (it defines the helpers the others use), then in name order.
# `make installcheck` runs them against the running server of PG_CONFIG,
# which must have shared_preload_libraries = 'llm', the settings of
# test/regress.conf and a model at llm.model (make install puts the default
# one where llm.model's default points).  On a throwaway instance of an
# installation the extension is installed in (no server needed):
#   make installcheck EXTRA_REGRESS_OPTS="--temp-instance=/tmp/llm_check --temp-config=test/regress.conf"
# test/run-regress does the same on this checkout's private copy of the
# installation (test/private-pg) and never touches the system's.
REGRESS      = setup $(sort $(filter-out setup,$(basename $(notdir $(wildcard test/sql/*.sql)))))
REGRESS_OPTS = --inputdir=test --load-extension=llm --encoding=UTF8 --no-locale

# The server was built with LLVM; our objects need no JIT bitcode.
override with_llvm = no

PG_CONFIG  ?= pg_config
PGXS       := $(shell $(PG_CONFIG) --pgxs 2>/dev/null)

# The PostgreSQL-free engine (engine/: core, sample, sched, spec, gguf, model,
# text, grammar, util) over the kernels (kernels/, kernels/cpu/): one static
# library shared by llm.so, llm-cli, the unit tests and the benchmarks.
ENGINE_DIRS := engine $(patsubst %/,%,$(sort $(dir $(wildcard engine/*/*.c)))) kernels kernels/cpu
ENGINE_SRCS := $(foreach d,$(ENGINE_DIRS),$(wildcard $(d)/*.c))
ENGINE_OBJS := $(patsubst %.c,build/%.o,$(ENGINE_SRCS))
ENGINE_LIB  := build/libllm_engine.a
ENGINE_CFLAGS ?= -O3 -g
ENGINE_CFLAGS += -std=gnu11 -fPIC -pthread -Wall -Wextra -Wno-unused-parameter -I.
ENGINE_LIBS := -lpcre2-8 -lpthread -lmvec -lm -ldl

# -MMD -MP: the server was configured without dependency tracking, so PGXS
# alone would not rebuild an object whose headers changed (a stale llm.o
# once kept an old shared-memory layout beside new code).
PG_CPPFLAGS = -I. -MMD -MP
SHLIB_LINK += $(ENGINE_LIB) $(ENGINE_LIBS)

UNIT_SRCS  := $(wildcard test/unit/test_*.c)
UNIT_BINS  := $(patsubst test/unit/%.c,build/test/%,$(UNIT_SRCS))

EXTRA_CLEAN = build $(OBJS:.o=.d)

# Optional CUDA backend: its own shared object, outside PGXS's OBJS.
USE_CUDA  ?= 1
CUDA_HOME ?= /usr/local/cuda
NVCC      ?= $(CUDA_HOME)/bin/nvcc
ifneq ($(USE_CUDA),0)
ifneq ($(shell command -v $(NVCC) 2>/dev/null),)
CUDA_TARGETS := build/llm_cuda.so build/llm-parity
endif
endif

ifeq ($(wildcard $(PGXS)),)
# Fresh machine: no PostgreSQL server headers yet.  Install the dependencies,
# then run the same goal again with PGXS available.
all install test demo bench model unit-test: bootstrap
	$(MAKE) $@
bootstrap:
	scripts/install-deps.sh
.PHONY: bootstrap
else
include $(PGXS)

all: build/llm-cli $(UNIT_BINS) $(CUDA_TARGETS)

include kernels/cuda/cuda.mk

build/llm-parity: tools/llm_parity.c $(ENGINE_LIB)
	$(CC) $(ENGINE_CFLAGS) -Ikernels/cuda $< -o $@ $(ENGINE_LIB) $(ENGINE_LIBS)

$(shlib): $(ENGINE_LIB)

build/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ENGINE_CFLAGS) -MMD -MP -c $< -o $@

# Reference dequantization, the quant_more.h kernels and the vector twin of
# the encoders' attention: no floating-point contraction, so d * q - m (a
# multiply then an add) stays two rounded operations (as in ggml, the gguf
# package and the scalar code) and every instruction set's compilation
# computes the same bits.
build/kernels/cpu/quant.o build/kernels/cpu/dequant_more.o build/kernels/cpu/quant_more.o \
build/kernels/cpu/quant_more_avx2.o build/kernels/cpu/quant_more_avx512.o \
build/kernels/cpu/attn_rows_avx512.o: ENGINE_CFLAGS += -ffp-contract=off

$(ENGINE_LIB): $(ENGINE_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

build/llm-cli: tools/llm_cli.c $(ENGINE_LIB)
	$(CC) $(ENGINE_CFLAGS) $< -o $@ $(ENGINE_LIB) $(ENGINE_LIBS)

# The backend's matmul alone in a decode step's shapes (docs/PERFORMANCE.md).
build/bench/matmul_layers: bench/matmul_layers.c $(ENGINE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ENGINE_CFLAGS) $< -o $@ $(ENGINE_LIB) $(ENGINE_LIBS)

# Constrained decoding: compile times, mask cost cold/warm (docs/STRUCTURED_OUTPUT.md).
build/bench/grammar_bench: bench/grammar_bench.c $(ENGINE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ENGINE_CFLAGS) $< -o $@ $(ENGINE_LIB) $(ENGINE_LIBS)

# Two models in one driver: steps in turn on one pool vs two pools side by side (docs/MODELS.md).
build/bench/multi_model: bench/multi_model.c $(ENGINE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ENGINE_CFLAGS) $< -o $@ $(ENGINE_LIB) $(ENGINE_LIBS)

# Constrained decoding in the engine: decode at batch B with and without a grammar (docs/PERFORMANCE.md).
build/bench/structured_bench: bench/structured_bench.c $(ENGINE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ENGINE_CFLAGS) $< -o $@ $(ENGINE_LIB) $(ENGINE_LIBS)

# A new grammar beside a decoding request: the request's step gaps (docs/STRUCTURED_OUTPUT.md).
build/bench/grammar_stall: bench/grammar_stall.c $(ENGINE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ENGINE_CFLAGS) $< -o $@ $(ENGINE_LIB) $(ENGINE_LIBS)

# A large prompt and a large tokenize text beside decoding requests: their step gaps (docs/ARCHITECTURE.md).
build/bench/tokenize_stall: bench/tokenize_stall.c $(ENGINE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ENGINE_CFLAGS) $< -o $@ $(ENGINE_LIB) $(ENGINE_LIBS)

# Rendering a conversation with a chat template: compile once, render to text and to ids (docs/PERFORMANCE.md).
build/bench/chat_template_bench: bench/chat_template_bench.c $(ENGINE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ENGINE_CFLAGS) $< -o $@ $(ENGINE_LIB) $(ENGINE_LIBS)

# The held set's scores of one model for the model-cascade checks (docs/CASCADES.md).
build/bench/cascade_scores: bench/cascade/scores.c $(ENGINE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ENGINE_CFLAGS) $< -o $@ $(ENGINE_LIB) $(ENGINE_LIBS)

# A semantic join pair by pair and forked (docs/CASCADES.md).
build/bench/semjoin: bench/cascade/semjoin.c $(ENGINE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ENGINE_CFLAGS) $< -o $@ $(ENGINE_LIB) $(ENGINE_LIBS)

# -MMD -MP: a test is rebuilt when a header it includes changes (the shared
# test helpers: unit.h, *_test_util.h).
build/test/%: test/unit/%.c test/unit/unit.h $(ENGINE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ENGINE_CFLAGS) -MMD -MP -Itest/unit $< -o $@ $(ENGINE_LIB) $(ENGINE_LIBS)

-include $(ENGINE_OBJS:.o=.d)
-include $(UNIT_BINS:=.d)
-include $(OBJS:.o=.d)

# Models by name, from scripts/fetch-model.sh's table (NAME=models/FILE):
# `make model MODEL=gemma3-270m` fetches another one; the default is SmolLM2.
MODEL       ?= smollm2
MODEL_TABLE := $(shell scripts/fetch-model.sh --list)
MODEL_NAMES := $(foreach e,$(MODEL_TABLE),$(firstword $(subst =, ,$(e))))
model_path   = $(or $(patsubst $(1)=%,%,$(filter $(1)=%,$(MODEL_TABLE))),unknown-model)
MODEL_FILE  := $(call model_path,smollm2)

model: $(call model_path,$(MODEL))
$(foreach e,$(MODEL_TABLE),$(eval $(lastword $(subst =, ,$(e))): ; scripts/fetch-model.sh $(firstword $(subst =, ,$(e)))))
unknown-model:
	@echo "unknown model name in MODEL=\"$(MODEL)\" / MODELS=\"$(MODELS)\" (known: $(MODEL_NAMES))" >&2; exit 1

include fuzz/fuzz.mk

unit-test: build/llm-cli $(UNIT_BINS) $(MODEL_FILE) sdist
	test/run-unit

# The llama-cpp-python sdist (downloaded, not built): its vocabulary files
# and their reference ids are the tokenizer battery of test_tokenizer_vocab.
sdist:
	scripts/build-llama-cpp.sh --fetch >/dev/null

# README's test command: dependencies, model, build, install, every suite.
test:
	scripts/install-deps.sh
	$(MAKE) all
	$(MAKE) model
	$(MAKE) sdist
	$(MAKE) model MODEL=minilm
	$(MAKE) model MODEL=gemma3-270m
	test/run-all

# `make install` also puts the default model where llm.model's default points:
# $(datadir)/extension/llm/ (the share directory of pg_config), fetching it
# first if models/ lacks it; more by name with e.g.
# `make install MODELS="smollm2 gemma3-270m"`.  LLM_INSTALL_MODEL=no installs
# the extension without any model (a package built without network, see
# debian/README.source).
MODELS      ?= smollm2
INSTALL_MODEL_FILES = $(foreach m,$(MODELS),$(call model_path,$(m)))
LLM_INSTALL_MODEL ?= yes
ifeq ($(LLM_INSTALL_MODEL),yes)
install: install-model
endif
install-model: $(INSTALL_MODEL_FILES)
	$(MKDIR_P) '$(DESTDIR)$(datadir)/extension/llm'
	$(INSTALL_DATA) $(INSTALL_MODEL_FILES) '$(DESTDIR)$(datadir)/extension/llm/'

# README's demo command: a throwaway server summarising 20 support tickets.
demo:
	scripts/demo.sh

# The CUDA backend goes next to llm.so, where the worker's loader looks for it.
ifneq ($(CUDA_TARGETS),)
install: install-cuda
install-cuda: build/llm_cuda.so
	$(MKDIR_P) '$(DESTDIR)$(pkglibdir)'
	$(INSTALL_SHLIB) build/llm_cuda.so '$(DESTDIR)$(pkglibdir)/'
.PHONY: install-cuda
endif

# Benchmarks (docs/PERFORMANCE.md) against llama.cpp and a pgai-style
# function (bench/run builds and installs what it needs; about 80 minutes at
# full size; BENCH_ARGS e.g. "--only single,batch16 -r 5").
bench:
	bench/run $(BENCH_ARGS)

.PHONY: model unknown-model unit-test sdist test install-model demo bench
endif
