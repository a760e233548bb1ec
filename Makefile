# profd — build, test, bench. See README.md.
#
#   make deps            install the Debian packages needed (idempotent, root)
#   make                 build build/profd
#   make test            unit + fuzz-corpus replay + end-to-end tests
#   make SANITIZE=1 test the same under ASan+UBSan
#   make bench           benchmarks against go tool pprof (docs/benchmarks.md)
#   make bench-targets   only what issue 18's targets are measured by, and their table
#   make fuzz            run the libFuzzer drivers for FUZZ_SECONDS each
#   make fuzz-corpus     merge what they found that adds coverage into tests/fuzz/corpus
#   make demo            deps, build, capture a real Go service, show results
#   make dist            the release archive (runs on any x86-64 Linux)
#   make dist-arm64      the same for arm64, cross-built (tools/deps.sh release first)
#   make image-dist      an image FROM scratch of the release archive (podman or docker; no
#                        base image pulled)
#   make image           the container image IMAGE:VERSION (docker or podman)
#   make install         PREFIX/bin/profd, the kubectl plugin link kubectl-profd, man
#                        pages, bash completion, the systemd unit, LICENSE and docs
#   make docs            docs/cli.md's flag reference from the flag tables in src/

CC      ?= cc
# Cross builds (tools/dist.sh ARCH=arm64): CC=aarch64-linux-gnu-gcc and a
# PKG_CONFIG that looks at the target's multiarch .pc files; the build-time
# tool (tools/embed) is still built for the build machine, with HOST_CC.
PKG_CONFIG ?= pkg-config
HOST_CC ?= cc
PKGS    := libdeflate libxxhash sqlite3 libzstd jansson libmicrohttpd libcurl yaml-0.1 gnutls libpcre2-8
CFLAGS  ?= -O2 -g
WARN    := -std=c11 -Wall -Wextra -Wshadow -Wstrict-prototypes -Wformat=2 -Wno-format-nonliteral
ifeq ($(CI),true)
WARN    += -Werror
endif
CPPFLAGS += -D_FILE_OFFSET_BITS=64 -D_DEFAULT_SOURCE
GIT_COMMIT := $(shell git rev-parse --short=12 HEAD 2>/dev/null)
BUILD_TIME := $(shell date -u -d @$${SOURCE_DATE_EPOCH:-$$(date +%s)} +%Y-%m-%dT%H:%M:%SZ)
PKG_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null)
# libcurl, libmicrohttpd, gnutls, SQLite, zstd, libyaml and PCRE2 are not
# linked: lib/util/pddl.h loads them when first used (with their 30
# dependencies they cost every process ~8 ms and ~6.5 MB at start, most of
# it for commands that never call them)
DLOPENED_PKGS := libcurl libmicrohttpd gnutls sqlite3 libzstd yaml-0.1 libpcre2-8
PKG_LIBS   := $(shell $(PKG_CONFIG) --libs $(filter-out $(DLOPENED_PKGS),$(PKGS)) 2>/dev/null)
LDLIBS  += $(PKG_LIBS) -lpthread -lm -ldl

ifeq ($(SANITIZE),1)
BUILD   ?= build-san
CFLAGS  := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
CPPFLAGS += -DPD_ARENA_MALLOC
LDFLAGS += -fsanitize=address,undefined
else
BUILD   ?= build
endif

LIB_SRC := $(wildcard lib/util/*.c lib/pprof/*.c lib/store/*.c lib/query/*.c lib/http/*.c lib/scrape/*.c lib/kube/*.c lib/remote/*.c)
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
BIN_SRC := $(wildcard src/*.c)
BIN_OBJ := $(BIN_SRC:%.c=$(BUILD)/%.o)
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
GO_ENV  := HOME=$(CURDIR)/$(BUILD)/gohome GOCACHE=$(CURDIR)/$(BUILD)/gocache GOPROXY=off GOFLAGS=-mod=mod GOTOOLCHAIN=local

.PHONY: docs image image-dist dist dist-arm64 man all deps test test-run unit bench bench-run bench-targets bench-run-targets soak soak-run soak-scrape soak-scrape-run fuzz fuzz-run fuzz-corpus demo demo-run clean goapp install uninstall krew
all: $(BUILD)/profd

$(BUILD)/src/cmd_serve.o $(BUILD)/src/main.o: CPPFLAGS += -DPD_COMMIT='"$(GIT_COMMIT)"' -DPD_BUILD_TIME='"$(BUILD_TIME)"'

$(BUILD)/%.o: %.c $(wildcard lib/*/*.h src/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) $(PKG_CFLAGS) -c $< -o $@

$(BUILD)/libprofd.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/profd: $(BIN_OBJ) $(BUILD)/web_assets.o $(BUILD)/libprofd.a
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

# The web UI (web/) built into the binary: tools/embed writes each file's
# bytes, gzip and ETag as C (no file is read at run time). The list of files
# is a file of its own, rewritten only when it changes, so that removing one
# rebuilds too.
WEB_FILES := $(sort $(patsubst web/%,%,$(wildcard web/*.html web/*.css web/*.js web/*.svg web/*.png web/*/*.js web/*/*.css)))
$(BUILD)/tools/embed: tools/embed.c
	@mkdir -p $(dir $@)
	$(HOST_CC) $(WARN) -O2 $(shell pkg-config --cflags libdeflate libxxhash) $< -o $@ $(shell pkg-config --libs libdeflate libxxhash)
$(BUILD)/web_assets.list: FORCE
	@mkdir -p $(dir $@)
	@echo '$(WEB_FILES)' | cmp -s - $@ || echo '$(WEB_FILES)' > $@
$(BUILD)/web_assets.c: $(BUILD)/tools/embed $(BUILD)/web_assets.list $(addprefix web/,$(WEB_FILES))
	$(BUILD)/tools/embed $@ web $(WEB_FILES)
$(BUILD)/web_assets.o: $(BUILD)/web_assets.c lib/http/web.h
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) -I. -c $< -o $@
.PHONY: FORCE
FORCE:

# Unit tests (cmocka), one binary per module.
$(BUILD)/tests/test_%: tests/unit/test_%.c $(BUILD)/libprofd.a tests/unit/testutil.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) $(PKG_CFLAGS) $< $(BUILD)/libprofd.a -o $@ $(LDFLAGS) $(LDLIBS) -lcmocka

# Corpus replay: the fuzz drivers linked with a plain main() that runs every
# corpus file once (works with gcc; libFuzzer is only needed for `make fuzz`).
$(BUILD)/tests/replay_%: tests/fuzz/fuzz_%.c tests/fuzz/replay_main.c $(BUILD)/libprofd.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) $(PKG_CFLAGS) $< tests/fuzz/replay_main.c $(BUILD)/libprofd.a -o $@ $(LDFLAGS) $(LDLIBS)

REPLAY_BIN := $(FUZZ_SRC:tests/fuzz/fuzz_%.c=$(BUILD)/tests/replay_%)

goapp: $(BUILD)/goapp
$(BUILD)/goapp: $(wildcard examples/goapp/*.go) examples/goapp/go.mod
	@mkdir -p $(BUILD)/gohome
	cd examples/goapp && $(GO_ENV) go build -o $(CURDIR)/$@ .

# The reference oracle: Google's pprof profile package (Debian source package),
# built offline in GOPATH mode.
$(BUILD)/oracle: $(wildcard tests/oracle/*.go)
	@mkdir -p $(BUILD)/gohome
	cd tests/oracle && GO111MODULE=off GOPATH=/usr/share/gocode HOME=$(CURDIR)/$(BUILD)/gohome GOCACHE=$(CURDIR)/$(BUILD)/gocache go build -o $(CURDIR)/$@ .

# InfluxDB line protocol checker and write endpoint (InfluxDB's own parser,
# Debian's golang-github-influxdata-influxdb1-client-dev), built offline as $(BUILD)/oracle.
$(BUILD)/influxcheck: tests/influx/main.go
	@mkdir -p $(BUILD)/gohome
	cd tests/influx && GO111MODULE=off GOPATH=/usr/share/gocode HOME=$(CURDIR)/$(BUILD)/gohome GOCACHE=$(CURDIR)/$(BUILD)/gocache go build -o $(CURDIR)/$@ .

# Test Kubernetes API server for the scraper and kubectl tests (standard library only).
$(BUILD)/kubeapi: $(wildcard tests/kubeapi/*.go) tests/kubeapi/go.mod
	@mkdir -p $(BUILD)/gohome
	cd tests/kubeapi && $(GO_ENV) go build -o $(CURDIR)/$@ .

# test, bench, fuzz and demo first make sure the Debian packages are there
# (tools/deps.sh is idempotent and quick when nothing is missing), then run
# in a sub-make so pkg-config sees the freshly installed libraries.
test:
	@tools/deps.sh
	@tools/deps.sh release
	@$(MAKE) --no-print-directory -j$(NPROC) test-run

# Selector regexes on stdin lines, for the differential test against Go's regexp (oracle regex).
$(BUILD)/rematch: tests/tools/rematch.c $(BUILD)/libprofd.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) $(PKG_CFLAGS) $< $(BUILD)/libprofd.a -o $@ $(LDFLAGS) $(LDLIBS)

$(BUILD)/gzbomb: tests/tools/gzbomb.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) $< -o $@ $(LDFLAGS) -lz

test-run: all $(BUILD)/man/profd.1 $(UNIT_BIN) $(REPLAY_BIN) $(BUILD)/goapp $(BUILD)/oracle $(BUILD)/rematch $(BUILD)/gzbomb $(BUILD)/kubeapi $(BUILD)/influxcheck
	BUILD=$(BUILD) tests/run.sh

unit: $(UNIT_BIN)
	BUILD=$(BUILD) tests/run.sh unit

$(BUILD)/bench_codec: bench/bench_codec.c $(BUILD)/libprofd.a
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) $(PKG_CFLAGS) $< $(BUILD)/libprofd.a -o $@ $(LDFLAGS) $(LDLIBS)

$(BUILD)/bench_fleet: bench/bench_fleet.c $(BUILD)/libprofd.a
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) $(PKG_CFLAGS) $< $(BUILD)/libprofd.a -o $@ $(LDFLAGS) $(LDLIBS)

$(BUILD)/bench_blocks: bench/bench_blocks.c $(BUILD)/libprofd.a
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) $(PKG_CFLAGS) $< $(BUILD)/libprofd.a -o $@ $(LDFLAGS) $(LDLIBS)

# What an upload costs a server that does nothing with it (bench/serve.sh).
$(BUILD)/ingest_floor: bench/ingest_floor.c
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) $(shell $(PKG_CONFIG) --cflags libmicrohttpd sqlite3) $< -o $@ $(LDFLAGS) $(shell $(PKG_CONFIG) --libs libmicrohttpd sqlite3) -lpthread

$(BUILD)/gen: bench/gen/main.go
	@mkdir -p $(BUILD)/gohome
	GO111MODULE=off GOPATH=/usr/share/gocode HOME=$(CURDIR)/$(BUILD)/gohome GOCACHE=$(CURDIR)/$(BUILD)/gocache go build -o $@ ./bench/gen

# Load generator for bench/serve.sh (standard library only).
$(BUILD)/loadgen: bench/loadgen/main.go bench/loadgen/go.mod
	@mkdir -p $(BUILD)/gohome
	cd bench/loadgen && $(GO_ENV) go build -o $(CURDIR)/$@ .

# Many pprof targets (and a stub collector) for bench/scrape.sh; Google's
# profile package from Debian, as $(BUILD)/gen.
$(BUILD)/targets: bench/targets/main.go
	@mkdir -p $(BUILD)/gohome
	GO111MODULE=off GOPATH=/usr/share/gocode HOME=$(CURDIR)/$(BUILD)/gohome GOCACHE=$(CURDIR)/$(BUILD)/gocache go build -o $@ ./bench/targets

bench:
	@tools/deps.sh
	@$(MAKE) --no-print-directory bench-run

bench-run: all $(BUILD)/goapp $(BUILD)/gen $(BUILD)/bench_codec $(BUILD)/bench_blocks $(BUILD)/bench_fleet $(BUILD)/ingest_floor $(BUILD)/loadgen $(BUILD)/targets
	BUILD=$(BUILD) bench/run.sh

# The parts of make bench that issue 18's targets are measured by (file
# merges, the collector, fleet analytics without go tool pprof), ending with
# the targets' table.
bench-targets:
	@tools/deps.sh
	@$(MAKE) --no-print-directory bench-run-targets

bench-run-targets: all $(BUILD)/goapp $(BUILD)/gen $(BUILD)/bench_codec $(BUILD)/bench_fleet $(BUILD)/ingest_floor $(BUILD)/loadgen
	TARGETS_ONLY=1 BUILD=$(BUILD) bench/run.sh

# A collector under steady traffic for SOAK_SECONDS (default 300): its RSS,
# descriptors and threads over time (bench/soak.sh; docs/benchmarks.md).
soak:
	@tools/deps.sh
	@$(MAKE) --no-print-directory soak-run

soak-run: all $(BUILD)/goapp $(BUILD)/loadgen
	BUILD=$(BUILD) bench/soak.sh

# A scraper over pods that come and go (test Kubernetes API server, watches
# cut now and then), for SOAK_SECONDS: its RSS over time (bench/soak_scrape.sh).
soak-scrape:
	@tools/deps.sh
	@$(MAKE) --no-print-directory soak-scrape-run

soak-scrape-run: all $(BUILD)/goapp $(BUILD)/targets $(BUILD)/kubeapi
	BUILD=$(BUILD) bench/soak_scrape.sh

# libFuzzer (clang): make fuzz FUZZ_SECONDS=60
# The library is compiled once with coverage instrumentation (fuzzer-no-link)
# and linked into every driver; the drivers then run one per core at a time.
FUZZ_SECONDS ?= 30
FUZZ_DIR   := build-fuzz
# -fno-sanitize-recover: undefined behaviour is a crash, which stops the run
# and keeps its input (recoverable, it was only printed to the log and the
# run passed: a signed overflow summing hostile values went unseen so)
FUZZ_FLAGS := -g -O1 $(CPPFLAGS) -DPD_ARENA_MALLOC $(PKG_CFLAGS) -fno-sanitize-recover=undefined
FUZZ_OBJ   := $(LIB_SRC:%.c=$(FUZZ_DIR)/obj/%.o)
FUZZ_NAMES := $(FUZZ_SRC:tests/fuzz/%.c=%)
NPROC      := $(shell nproc 2>/dev/null || echo 1)

fuzz:
	@tools/deps.sh
	@$(MAKE) --no-print-directory -j$(NPROC) -Otarget fuzz-run

fuzz-run: $(FUZZ_NAMES:%=$(FUZZ_DIR)/%.run)
.PRECIOUS: $(FUZZ_DIR)/fuzz_% $(FUZZ_DIR)/obj/%.o

$(FUZZ_DIR)/obj/%.o: %.c $(wildcard lib/*/*.h)
	@mkdir -p $(dir $@)
	@clang $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link,address,undefined -c $< -o $@

$(FUZZ_DIR)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_OBJ)
	@clang $(FUZZ_FLAGS) -fsanitize=fuzzer,address,undefined $< $(FUZZ_OBJ) -o $@ $(PKG_LIBS) -lpthread -lm

# one time-boxed run (never up to date: .run is not a file that is made)
$(FUZZ_DIR)/%.run: $(FUZZ_DIR)/%
	@mkdir -p $(FUZZ_DIR)/corpus-$*
	@echo "fuzz: $* for $(FUZZ_SECONDS) s (log: $(FUZZ_DIR)/$*.log)"
	@if $(FUZZ_DIR)/$* -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -rss_limit_mb=2048 \
	     -artifact_prefix=$(FUZZ_DIR)/$*- $(FUZZ_DIR)/corpus-$* tests/fuzz/corpus/$(*:fuzz_%=%) >$(FUZZ_DIR)/$*.log 2>&1; then \
	  grep -E "^Done|stat::number_of_executed_units" $(FUZZ_DIR)/$*.log | tail -1 | sed "s/^/fuzz: $*: /"; \
	else tail -40 $(FUZZ_DIR)/$*.log; echo "fuzz: $* FAILED (reproducer: $(FUZZ_DIR)/$*-*)"; exit 1; fi

# Merge into the checked-in corpus (tests/fuzz/corpus, replayed by make test)
# the inputs of build-fuzz's grown corpora that add coverage (libFuzzer -merge).
fuzz-corpus: $(FUZZ_NAMES:%=$(FUZZ_DIR)/%)
	@for f in $(FUZZ_NAMES); do n=$${f#fuzz_}; mkdir -p $(FUZZ_DIR)/corpus-$$f; \
	  $(FUZZ_DIR)/$$f -merge=1 -max_len=65536 -rss_limit_mb=2048 tests/fuzz/corpus/$$n $(FUZZ_DIR)/corpus-$$f \
	    >$(FUZZ_DIR)/$$f.merge.log 2>&1 || { tail -20 $(FUZZ_DIR)/$$f.merge.log; exit 1; }; \
	  echo "fuzz-corpus: $$n: $$(ls tests/fuzz/corpus/$$n | wc -l) inputs"; done
	@# kept apart until profd parses them as Go does (their README)
	@for f in tests/fuzz/legacy-divergent/*; do [ "$${f##*/}" = README.md ] || rm -f tests/fuzz/corpus/legacy/$${f##*/}; done

# The release archive for linux amd64 ($(BUILD)/dist/profd-VERSION-linux-amd64.tar.gz and its
# .sha256): the binary with every library it loads and its loader, started by a static
# launcher, so it runs on any x86-64 Linux (tools/dist.sh).
dist: all
	tools/dist.sh $(BUILD) $(BUILD)/dist

# The same for linux arm64 ($(BUILD)/dist/profd-VERSION-linux-arm64.tar.gz), cross-built in
# $(BUILD)-arm64 with Debian's aarch64-linux-gnu-gcc against its :arm64 -dev packages
# (`tools/deps.sh release` installs them); man pages and completion from the host build.
ARM64_PKG_CONFIG := PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig pkg-config
dist-arm64: all
	$(MAKE) --no-print-directory BUILD=$(BUILD)-arm64 CC=aarch64-linux-gnu-gcc PKG_CONFIG="$(ARM64_PKG_CONFIG)" SANITIZE= $(BUILD)-arm64/profd
	HOST_PROFD=$(BUILD)/profd tools/dist.sh $(BUILD)-arm64 $(BUILD)/dist arm64

# The container image (deploy/Dockerfile) with docker or podman: IMAGE:VERSION, with the
# commit and the build time passed in (the build context may have no .git).
IMAGE   ?= profd
VERSION := $(shell sed -n 's/^\#define PD_VERSION "\(.*\)"/\1/p' src/version.h)
image:
	@engine=$$(command -v docker || command -v podman) || { echo "make image: neither docker nor podman is installed" >&2; exit 1; }; \
	set -x; $$engine build -f deploy/Dockerfile -t $(IMAGE):$(VERSION) \
	  --build-arg GIT_COMMIT=$(GIT_COMMIT) --build-arg SOURCE_DATE_EPOCH=$${SOURCE_DATE_EPOCH:-$$(git log -1 --format=%ct 2>/dev/null || date +%s)} .

# The image of the release archive, FROM scratch (tools/image.sh: the archive, busybox, CA
# certificates; nothing pulled from a registry), tagged IMAGE:VERSION.
image-dist: all
	tools/image.sh $(BUILD) $(IMAGE):$(VERSION)

# docs/cli.md's flag reference, from the binary's flag tables (`profd help
# --markdown`); tests/e2e/test_cli.sh fails when the file is stale.
docs: $(BUILD)/profd
	tools/cli_docs.sh $(BUILD)/profd docs/cli.md

# Man pages from the binary's own --help texts (tools/man.sh): profd.1, profd-CMD.1.
man: $(BUILD)/man/profd.1
# Made in a private directory, then renamed page by page (and pages no longer
# made removed): two makes that regenerate them at once (tests run `make
# install` in parallel) never see a half-written or vanished page.
$(BUILD)/man/profd.1: $(BUILD)/profd tools/man.sh
	@mkdir -p $(BUILD)/man
	tmp=$$(mktemp -d $(BUILD)/man.tmp.XXXXXX) && tools/man.sh $(BUILD)/profd $$tmp && \
	for f in $(BUILD)/man/*.1; do [ -e "$$tmp/$${f##*/}" ] || rm -f "$$f"; done && \
	for f in $$tmp/*.1; do mv -f "$$f" $(BUILD)/man/; done && rm -rf $$tmp

deps:
	tools/deps.sh

demo:
	@tools/deps.sh
	@$(MAKE) --no-print-directory demo-run

demo-run: all $(BUILD)/goapp
	BUILD=$(BUILD) tools/demo.sh

# make install [PREFIX=/usr/local] [DESTDIR=...]: bin/profd and bin/kubectl-profd,
# a relative symlink to it: kubectl finds it as the plugin `kubectl profd`.
PREFIX ?= /usr/local
install: all man
	install -D -m 0755 $(BUILD)/profd $(DESTDIR)$(PREFIX)/bin/profd
	ln -sfn profd $(DESTDIR)$(PREFIX)/bin/kubectl-profd
	install -d $(DESTDIR)$(PREFIX)/share/bash-completion/completions
	$(BUILD)/profd completion bash >$(DESTDIR)$(PREFIX)/share/bash-completion/completions/profd
	install -d $(DESTDIR)$(PREFIX)/lib/systemd/system $(DESTDIR)$(PREFIX)/share/doc/profd
	sed 's|/usr/local|$(PREFIX)|g' deploy/systemd/profd.service >$(DESTDIR)$(PREFIX)/lib/systemd/system/profd.service
	install -m 0644 LICENSE README.md docs/*.md $(DESTDIR)$(PREFIX)/share/doc/profd/
	install -d $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 0644 $(BUILD)/man/*.1 $(DESTDIR)$(PREFIX)/share/man/man1/

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/kubectl-profd $(DESTDIR)$(PREFIX)/bin/profd \
	      $(DESTDIR)$(PREFIX)/share/bash-completion/completions/profd \
	      $(DESTDIR)$(PREFIX)/lib/systemd/system/profd.service
	rm -rf $(DESTDIR)$(PREFIX)/share/doc/profd
	rm -f $(DESTDIR)$(PREFIX)/share/man/man1/profd.1 $(DESTDIR)$(PREFIX)/share/man/man1/profd-*.1

# make krew [KREW_URL=https://.../v0.1.0]: the krew archive of this build
# ($(BUILD)/krew/profd_linux_<arch>.tar.gz) and its manifest
# ($(BUILD)/krew/profd.yaml: deploy/krew/profd.yaml with this archive's URL and sha256).
krew: all
	tools/krew.sh $(BUILD) $(KREW_URL)

clean:
	rm -rf build build-san build-fuzz
