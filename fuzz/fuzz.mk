# fuzz/fuzz.mk — libFuzzer targets (fuzz/fuzz_*.c), built with clang under
# AddressSanitizer + UndefinedBehaviorSanitizer (any report aborts), and run
# for a bounded time each.  Not part of `make test`.  Included by the Makefile.
#
#   make fuzz                    build and run every target FUZZ_SECONDS (60) each
#   make fuzz FUZZ_TARGETS=gguf FUZZ_SECONDS=600
#   make fuzz-build              build only (build/fuzz/fuzz_<target>)
#
# Each run starts from the committed seeds (fuzz/corpus/<target>/) and keeps
# what it finds in build/fuzz/corpus/<target>/ (never in the committed
# corpus); a crashing input is written to build/fuzz/crash-<target>-*, and
# the run fails.  The last lines of each log (build/fuzz/<target>.log) are
# libFuzzer's final statistics (stat::number_of_executed_units = executions).

FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= gguf tokenizer protocol chat_template jinja
FUZZ_FLAGS   ?=
FUZZ_CFLAGS  := -g -O2 -fno-omit-frame-pointer -std=gnu11 \
                -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
                -I. -Ifuzz

# the sources each target links (the engine files under test, nothing else)
FUZZ_JINJA_SRCS := $(wildcard engine/jinja/*.c) engine/grammar/json_min.c
FUZZ_VOCAB_SRCS := engine/gguf/gguf.c engine/text/tokenizer.c engine/text/vocab.c engine/text/bpe.c engine/text/spm.c engine/text/detok.c engine/text/chat_template.c \
                   engine/text/chat_jinja.c $(FUZZ_JINJA_SRCS) engine/util/text_util.c engine/util/hash.c kernels/quant_types.c
fuzz_gguf_SRCS          := $(FUZZ_VOCAB_SRCS)
fuzz_tokenizer_SRCS     := $(FUZZ_VOCAB_SRCS)
fuzz_chat_template_SRCS := $(FUZZ_VOCAB_SRCS)
fuzz_protocol_SRCS      := channel/protocol.c engine/request.c engine/util/text_util.c
fuzz_jinja_SRCS         := $(FUZZ_JINJA_SRCS) engine/util/text_util.c

# largest input per target (a GGUF seed is a few hundred bytes to a few KB)
fuzz_gguf_MAXLEN          := 16384
fuzz_tokenizer_MAXLEN     := 4096
fuzz_chat_template_MAXLEN := 4096
fuzz_protocol_MAXLEN      := 8192
fuzz_jinja_MAXLEN         := 4096

FUZZ_BINS := $(patsubst %,build/fuzz/fuzz_%,$(FUZZ_TARGETS))

define FUZZ_RULE
build/fuzz/fuzz_$(1): fuzz/fuzz_$(1).c fuzz/fuzz_vocab.h $$(fuzz_$(1)_SRCS) $$(wildcard engine/*.h engine/*/*.h channel/*.h kernels/*.h)
	@mkdir -p $$(dir $$@)
	$$(FUZZ_CC) $$(FUZZ_CFLAGS) $$< $$(fuzz_$(1)_SRCS) -o $$@ -lpcre2-8 -lm
endef
$(foreach t,gguf tokenizer protocol chat_template jinja,$(eval $(call FUZZ_RULE,$(t))))

fuzz-build: $(FUZZ_BINS)

fuzz: $(FUZZ_BINS) $(MODEL_FILE)
	@fail=0; for t in $(FUZZ_TARGETS); do \
	  mkdir -p build/fuzz/corpus/$$t; \
	  echo "== fuzz $$t ($(FUZZ_SECONDS) s)"; \
	  build/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -max_len=$$(case $$t in \
	    gguf) echo $(fuzz_gguf_MAXLEN);; tokenizer) echo $(fuzz_tokenizer_MAXLEN);; \
	    chat_template) echo $(fuzz_chat_template_MAXLEN);; jinja) echo $(fuzz_jinja_MAXLEN);; \
	    *) echo $(fuzz_protocol_MAXLEN);; esac) \
	    -print_final_stats=1 -artifact_prefix=build/fuzz/crash-$$t- $(FUZZ_FLAGS) \
	    build/fuzz/corpus/$$t fuzz/corpus/$$t > build/fuzz/$$t.log 2>&1 \
	    || { fail=1; echo "fuzz $$t: FAILED (build/fuzz/$$t.log)"; tail -40 build/fuzz/$$t.log; }; \
	  grep -E 'stat::number_of_executed_units|Done [0-9]+ runs' build/fuzz/$$t.log | sed "s/^/  $$t: /"; \
	done; exit $$fail

.PHONY: fuzz fuzz-build

# Regenerate the committed seeds (deterministic): GGUF files, texts and
# message lists from fuzz/make_seeds.py, channel messages from the real
# encoder (fuzz/seed_protocol.c).
build/fuzz/seed_protocol: fuzz/seed_protocol.c channel/protocol.c engine/request.c engine/util/text_util.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -I. $^ -o $@ -lm

fuzz-seeds: build/fuzz/seed_protocol
	python3 fuzz/make_seeds.py
	@mkdir -p fuzz/corpus/protocol
	build/fuzz/seed_protocol

.PHONY: fuzz-seeds
