# crew: build, run, test and install. `make help` lists the targets.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build

CARGO ?= cargo
NODE ?= node
NPM ?= npm

# User-scope install; override PREFIX (and DESTDIR for packaging).
PREFIX ?= $(HOME)/.local
BINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man
DATADIR ?= $(PREFIX)/share
XDG_CONFIG_HOME ?= $(HOME)/.config
UNITDIR ?= $(XDG_CONFIG_HOME)/systemd/user
# `make install PROFILE=debug` installs the debug build (what `make check-install` does).
PROFILE ?= release
BINS := crewd crewctl crew-fake-agent crew-box crew-worker
UNITS := crewd.service crewd.socket

# Where cargo puts the binaries (CARGO_TARGET_DIR is honoured).
TARGET_DIR := $(abspath $(or $(CARGO_TARGET_DIR),$(CURDIR)/target))
ifeq ($(PROFILE),release)
PROFILE_FLAG := --release
else ifeq ($(PROFILE),debug)
PROFILE_FLAG :=
else
PROFILE_FLAG := --profile $(PROFILE)
endif
PROFILE_DIR := $(TARGET_DIR)/$(PROFILE)

# `make run`: a development daemon with its own state, next to the build.
DEV_DIR := $(TARGET_DIR)/dev
DEV_SOCKET := $(DEV_DIR)/crewd.sock

NODE_DIR := tests/node

# The dashboard's browser test.
UI_TEST_DIR := tests/ui
# `crewctl mcp` under the official MCP TypeScript SDK (its one test dependency, with ajv).
MCP_DIR := tests/mcp

.PHONY: help build run demo test test-rust test-nonroot test-node test-ui node-deps agents lint docs bench bench-ui fuzz \
	install uninstall check-install clean-dev slurm-up slurm-down bench-slurm

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z-]+):.*## (.*)/  \1\t\2/' | expand -t 18

build: ## build every binary (debug)
	$(CARGO) build --workspace --bins

$(UI_TEST_DIR)/node_modules/.package-lock.json: $(UI_TEST_DIR)/package-lock.json $(UI_TEST_DIR)/package.json
	cd $(UI_TEST_DIR) && $(NPM) ci --no-audit --no-fund

run: build ## crewd in the foreground, state and socket under target/dev
	@mkdir -p $(DEV_DIR)
	@echo "crewd: talk to it with: export CREW_SOCKET=$(DEV_SOCKET)"
	$(TARGET_DIR)/debug/crewd --socket $(DEV_SOCKET) --state-dir $(DEV_DIR)/state

# The README's first command: a throwaway daemon, one run of the builtin default team on the
# fake agent, followed live by crewctl, then a clean stop.
demo: build ## start crewd on a temporary socket, run the default team on the fake agent, stop
	@tmp=$$(mktemp -d "$${TMPDIR:-/tmp}/crew-demo.XXXXXX"); \
	mkdir -p "$$tmp/work"; \
	export CREW_SOCKET="$$tmp/crewd.sock"; \
	$(TARGET_DIR)/debug/crewd --socket "$$CREW_SOCKET" --state-dir "$$tmp/state" 2> "$$tmp/crewd.log" & \
	pid=$$!; \
	trap 'kill $$pid 2>/dev/null || true; wait $$pid 2>/dev/null || true; rm -rf "$$tmp"' EXIT; \
	for _ in $$(seq 300); do \
		$(TARGET_DIR)/debug/crewctl daemon status > /dev/null 2>&1 && break; \
		kill -0 $$pid 2>/dev/null || { cat "$$tmp/crewd.log"; exit 1; }; \
		sleep 0.1; \
	done; \
	echo "crewd is running (pid $$pid, socket $$CREW_SOCKET)"; \
	echo "\$$ crewctl run --team default --runtime fake --cwd $$tmp/work 'Add a --verbose flag to the CLI'"; \
	status=0; \
	$(TARGET_DIR)/debug/crewctl run --team default --runtime fake --cwd "$$tmp/work" \
		'Add a --verbose flag to the CLI' || status=$$?; \
	$(TARGET_DIR)/debug/crewctl daemon stop > /dev/null; \
	wait $$pid; \
	trap 'rm -rf "$$tmp"' EXIT; \
	exit $$status

# Every suite, on past a failure, then one closing line: N passed, N failed, N skipped (tests of
# an agent CLI that is not installed are skipped, never passed; `make agents` installs them).
test: build node-deps $(UI_TEST_DIR)/node_modules/.package-lock.json ## build, then every Rust test (nextest), the Node clients, the dashboard in chromium; ends with N passed, N failed, N skipped
	CARGO=$(CARGO) NODE=$(NODE) TARGET_DIR=$(TARGET_DIR) bash tests/run.sh

test-rust: build
	CARGO=$(CARGO) NODE=$(NODE) TARGET_DIR=$(TARGET_DIR) bash tests/run.sh rust

# The box must not rely on root (issue 34). As root (CI is), the box's tests again as an
# ordinary user: CREW_NONROOT_USER, default `crew-nonroot`, made once with useradd; not as root,
# `make test` already runs them as one and this says so.
test-nonroot: build ## as root: the box's, init's and a real agent's box tests again as an ordinary user
	CARGO=$(CARGO) NODE=$(NODE) TARGET_DIR=$(TARGET_DIR) bash tests/run.sh nonroot

agents: ## install the pinned agent CLIs the real-agent tests need (~1 GB; idempotent)
	bash tests/pi/setup.sh
	bash tests/agents/setup.sh

# npm ci again only when the lockfile changed.
$(NODE_DIR)/node_modules/.package-lock.json: $(NODE_DIR)/package-lock.json $(NODE_DIR)/package.json
	cd $(NODE_DIR) && $(NPM) ci --no-audit --no-fund

$(MCP_DIR)/node_modules/.package-lock.json: $(MCP_DIR)/package-lock.json $(MCP_DIR)/package.json
	cd $(MCP_DIR) && $(NPM) ci --no-audit --no-fund

node-deps: $(NODE_DIR)/node_modules/.package-lock.json $(MCP_DIR)/node_modules/.package-lock.json

test-node: build node-deps
	CARGO=$(CARGO) NODE=$(NODE) TARGET_DIR=$(TARGET_DIR) bash tests/run.sh node

test-ui: build node-deps $(UI_TEST_DIR)/node_modules/.package-lock.json ## the dashboard in a real chromium (screenshots in target/ui-screenshots)
	CARGO=$(CARGO) NODE=$(NODE) TARGET_DIR=$(TARGET_DIR) bash tests/run.sh ui

# A real two-node Slurm cluster on 127.0.0.1 (tests/slurm/start.sh) for the Slurm placement
# tests: `make slurm-up`, then `CREW_SLURM_ENV=target/slurm/env cargo nextest run -p crewd
# --test slurm` uses it instead of starting one per test. Needs root and Debian's packages.
SLURM_DIR := $(TARGET_DIR)/slurm

slurm-up: ## start the test Slurm cluster in target/slurm (munged, slurmctld, two slurmd, slurmrestd)
	bash tests/slurm/start.sh $(SLURM_DIR)

slurm-down: ## stop it (by the PIDs it recorded)
	bash tests/slurm/stop.sh $(SLURM_DIR)

bench-slurm: ## 200 tasks on the test Slurm cluster: crew against sbatch --array (make slurm-up first)
	CREW_SLURM_ENV=$(SLURM_DIR)/env $(CARGO) nextest run -p crewd --ignore-default-filter \
	  --run-ignored only -E 'binary(=bench_slurm)' --no-capture

lint: ## rustfmt --check and clippy -D warnings on every target
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

docs: ## regenerate proto-docs/ (OpenRPC, method reference, TypeScript types)
	UPDATE_PROTO_DOCS=1 $(CARGO) test -p crew-api
	$(NODE) proto-docs/gen-types.mjs

bench: ## run the benchmarks
	$(CARGO) bench --workspace

bench-ui: build node-deps $(UI_TEST_DIR)/node_modules/.package-lock.json ## dashboard in chromium: 200-task vs 4-task DAG draw time and event-to-colour delay
	cd $(UI_TEST_DIR) && CREWD_BIN=$(TARGET_DIR)/debug/crewd CREWCTL_BIN=$(TARGET_DIR)/debug/crewctl $(NODE) bench.mjs

fuzz: ## run the fuzz targets (fuzz/)
ifneq ($(wildcard fuzz/run.sh),)
	bash fuzz/run.sh
else
	@echo "make fuzz: there is no fuzz/ directory" >&2; exit 1
endif

# The units start %h/.local/bin/crewd; installed elsewhere, ExecStart names BINDIR instead.
install: ## binaries into ~/.local/bin, units into ~/.config/systemd/user, man pages, completions
	$(CARGO) build $(PROFILE_FLAG) $(addprefix -p ,$(BINS))
	install -d "$(DESTDIR)$(BINDIR)" "$(DESTDIR)$(UNITDIR)"
	for b in $(BINS); do install -m 0755 "$(PROFILE_DIR)/$$b" "$(DESTDIR)$(BINDIR)/$$b"; done
	for u in $(UNITS); do \
		if [ "$(BINDIR)" = "$(HOME)/.local/bin" ]; then cp "systemd/$$u" "$(DESTDIR)$(UNITDIR)/$$u.tmp"; \
		else sed 's|%h/\.local/bin/crewd|$(BINDIR)/crewd|' "systemd/$$u" > "$(DESTDIR)$(UNITDIR)/$$u.tmp"; fi; \
		chmod 0644 "$(DESTDIR)$(UNITDIR)/$$u.tmp"; \
		mv "$(DESTDIR)$(UNITDIR)/$$u.tmp" "$(DESTDIR)$(UNITDIR)/$$u"; \
	done
	ctl="$(PROFILE_DIR)/crewctl"; \
	if "$$ctl" man --help > /dev/null 2>&1; then \
		install -d "$(DESTDIR)$(MANDIR)/man1"; \
		"$$ctl" man "$(DESTDIR)$(MANDIR)/man1"; \
	fi; \
	if "$$ctl" completions --help > /dev/null 2>&1; then \
		install -d "$(DESTDIR)$(DATADIR)/bash-completion/completions" \
			"$(DESTDIR)$(DATADIR)/zsh/site-functions" \
			"$(DESTDIR)$(DATADIR)/fish/vendor_completions.d"; \
		"$$ctl" completions bash > "$(DESTDIR)$(DATADIR)/bash-completion/completions/crewctl"; \
		"$$ctl" completions zsh > "$(DESTDIR)$(DATADIR)/zsh/site-functions/_crewctl"; \
		"$$ctl" completions fish > "$(DESTDIR)$(DATADIR)/fish/vendor_completions.d/crewctl.fish"; \
	fi
	@if [ -z "$(DESTDIR)" ] && command -v systemctl > /dev/null && systemctl --user daemon-reload 2> /dev/null; then \
		echo "systemd: units reloaded; start with: systemctl --user enable --now crewd.socket"; \
	else \
		echo "systemd: run 'systemctl --user daemon-reload', then 'systemctl --user enable --now crewd.socket'"; \
	fi

uninstall: ## remove what install put in place (stops the user units first)
	@if [ -z "$(DESTDIR)" ] && command -v systemctl > /dev/null; then \
		systemctl --user disable --now $(UNITS) 2> /dev/null || true; \
	fi
	for b in $(BINS); do rm -f "$(DESTDIR)$(BINDIR)/$$b"; done
	for u in $(UNITS); do rm -f "$(DESTDIR)$(UNITDIR)/$$u"; done
	rm -f "$(DESTDIR)$(MANDIR)"/man1/crewctl*.1
	rm -f "$(DESTDIR)$(DATADIR)/bash-completion/completions/crewctl" \
		"$(DESTDIR)$(DATADIR)/zsh/site-functions/_crewctl" \
		"$(DESTDIR)$(DATADIR)/fish/vendor_completions.d/crewctl.fish"
	@if [ -z "$(DESTDIR)" ] && command -v systemctl > /dev/null; then systemctl --user daemon-reload 2> /dev/null || true; fi

# install + uninstall into a scratch prefix with the debug build: what CI runs.
check-install: build
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	args=(PROFILE=debug DESTDIR="$$tmp" PREFIX=/opt/crew UNITDIR=/units); \
	$(MAKE) --no-print-directory install "$${args[@]}" > "$$tmp.log" 2>&1 || { cat "$$tmp.log"; rm -f "$$tmp.log"; exit 1; }; \
	for f in /opt/crew/bin/crewd /opt/crew/bin/crewctl /opt/crew/bin/crew-fake-agent /opt/crew/bin/crew-box /opt/crew/bin/crew-worker /units/crewd.service /units/crewd.socket; do \
		test -e "$$tmp$$f" || { echo "check-install: $$f was not installed"; exit 1; }; \
	done; \
	grep -qx 'ExecStart=/opt/crew/bin/crewd' "$$tmp/units/crewd.service" || { echo "check-install: ExecStart not rewritten"; exit 1; }; \
	"$$tmp/opt/crew/bin/crewd" --version > /dev/null; \
	$(MAKE) --no-print-directory uninstall "$${args[@]}" > "$$tmp.log" 2>&1 || { cat "$$tmp.log"; rm -f "$$tmp.log"; exit 1; }; \
	rm -f "$$tmp.log"; \
	left=$$(find "$$tmp" -type f); \
	[ -z "$$left" ] || { echo "check-install: uninstall left: $$left"; exit 1; }; \
	echo "check-install: install and uninstall OK"

clean-dev: ## remove make run's state (target/dev)
	rm -rf $(DEV_DIR)
