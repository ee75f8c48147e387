# edgecount's commands. Each installs what it needs first (scripts/bootstrap.sh, pinned and
# skipped when present), so a fresh clone needs nothing but `make dev` or `make test`.

SHELL := /bin/bash
# Node 22, wrangler, vitest, esbuild and wasm-opt come from node_modules.
export PATH := $(CURDIR)/node_modules/.bin:$(PATH)
# No internet here or in CI: do not wait on the fetch of Cloudflare's Request.cf data.
export CLOUDFLARE_CF_FETCH_ENABLED := false
export WRANGLER_SEND_METRICS := false

.PHONY: help tools tools-test tools-rust build build-drills dev export import deploy test lint lint-rust lint-js fmt test-native test-worker test-api-spec test-bench-smoke repeat-suite bench bench-core bench-migration fuzz soak clean

BENCH_PYTHON := .tools/bench-venv/bin/python
# What prettier formats; client/dist is the build's output and stays as the build writes it.
PRETTIER_PATHS := tests vitest.config.ts loadtest/k6 loadtest/wrk/record.mjs loadtest/fronts-load.mjs loadtest/baselines/js-hello loadtest/baselines/js-floor scripts/workerd-config.mjs scripts/bench-core.mjs scripts/soak.mjs scripts/bench-migration.mjs scripts/sql-plan.mjs scripts/visitor-reads.mjs scripts/profile.mjs scripts/child-process.mjs scripts/deploy-preflight.mjs scripts/transfer.mjs worker/static/index.html worker/static/demo.js worker/static/count.js worker/entry.js \
	client/src client/test client/build.mjs client/tsconfig.json client/README.md client/package.json
# Markdown whose relative links and #anchors `make lint-js` checks.
MARKDOWN_PATHS := README.md docs client/README.md loadtest/README.md loadtest/reports core/fuzz/README.md
BENCH_PROFILE := $(if $(BENCH_QUICK),quick,full)
# `make test` runs its parts through scripts/test-suite.sh, with SUITE_READY=1 once the tools
# are installed: a part then needs nothing first (the suite builds the worker once itself).
needs = $(if $(SUITE_READY),,$(1))

help:
	@echo "make dev    build and serve the API on http://127.0.0.1:8787 (state kept in .dev-state/)"
	@echo "make test   lint, native Rust tests, Wasm build, vitest integration tests in workerd"
	@echo "make bench  capacity beside Redis, memcached, Ehcache and the JS floor, then one-way windows, many fronts and the scale model (about 65 minutes; BENCH_QUICK=1: fewer systems, 100,000 keys)"
	@echo "make fmt    format Rust and TypeScript"
	@echo "make fuzz   fuzz the core's parsers for 10 minutes (cargo-fuzz, nightly)"
	@echo "make soak   10 minutes of mixed load, client resets, hostile requests and SIGKILLs through workerd"
	@echo "make repeat-suite N=10  the worker specs N times in a row (default 10), listing every spec that failed in any round"
	@echo "make bench-core  the core's micro-benchmarks, native and Wasm, and memory per counter"
	@echo "make bench-migration  moving half of 1,000,000 keys from 8 shards to 16 online, and a mixed load during it beside one without (about 5 minutes)"
	@echo "make deploy build and deploy with wrangler (needs a Cloudflare account)"
	@echo "make export URL=... OUT=file [NS=...] [TOKEN=...]  every counter and cache entry as NDJSON"
	@echo "make import URL=... IN=file [TOKEN=...]  store an export (or a CountAPI/Abacus list) in a deployment"

tools:
	@scripts/bootstrap.sh dev

tools-test:
	@scripts/bootstrap.sh test

tools-rust:
	@scripts/bootstrap.sh rust

build: $(call needs,tools)
	@scripts/build-worker.sh

# The build the worker specs run: with the test-only faults they ask for by variable
# (worker/src/shared/drills.rs). `make build`, dev, deploy and bench leave them out.
build-drills: $(call needs,tools)
	@EDGECOUNT_DRILLS=1 scripts/build-worker.sh

dev: build
	@scripts/dev.sh

# Moving numbers out and in (docs/moving.md): URL is the worker's address, TOKEN an admin token
# once tokens are configured (or EDGECOUNT_TOKEN), NS narrows an export to one namespace.
export:
	@node scripts/transfer.mjs export "$(URL)" --out "$(OUT)" $(if $(NS),--ns "$(NS)") $(if $(TOKEN),--token "$(TOKEN)")

import:
	@node scripts/transfer.mjs import "$(URL)" --in "$(IN)" $(if $(TOKEN),--token "$(TOKEN)")

# The preflight stops a deployment with nothing configured (see scripts/deploy-preflight.mjs),
# which would answer reads only; EDGECOUNT_OPEN=1 asks for open writes by name, and the worker is
# told so. `wrangler deploy` run directly deploys the same safe default.
deploy: build
	@node scripts/deploy-preflight.mjs --deploy

lint: lint-rust lint-js

lint-rust: $(call needs,tools-rust)
	@echo "[lint] cargo fmt --check"
	@cargo fmt --all -- --check
	@echo "[lint] cargo clippy -D warnings (with the test drills; test-native compiles without)"
	@cargo clippy --locked --workspace --all-targets --all-features --quiet -- -D warnings
	@echo "[lint] no Rust file uses one that uses it back"
	@python3 scripts/check-import-cycles.py
	@python3 scripts/check-layers.py
	@echo "[lint] no match over ShardOp or OpKind has a wildcard arm"
	@python3 scripts/check-op-matches.py

lint-js: $(call needs,tools-test)
	@echo "[lint] prettier --check"
	@prettier --check --log-level warn $(PRETTIER_PATHS)
	@echo "[lint] relative links and #anchors in the Markdown (remark-validate-links)"
	@remark --frail --quiet --no-stdout $(MARKDOWN_PATHS)
	@echo "[lint] client/dist matches a fresh build of client/src"
	@node client/build.mjs --check

fmt: tools
	cargo fmt --all
	prettier --write --log-level warn $(PRETTIER_PATHS)
	node client/build.mjs

test-native: $(call needs,tools-rust)
	@echo "[test] native Rust tests"
	@cargo test --locked --workspace --quiet

test-worker: $(call needs,build-drills tools-test)
	@echo "[test] vitest in workerd"
	@vitest run --reporter=default --reporter=json --outputFile.json=build/vitest-report.json
	@node -e 'const r = require("./build/vitest-report.json"); console.log(`vitest: $${r.numPassedTests} passed, $${r.numFailedTests} failed`)'

# The worker specs (as test-worker runs them) N times in a row, default 10: a line per round, then
# every spec that failed in any round with its messages (scripts/repeat-suite.sh). Not part of
# `make test`.
repeat-suite: $(call needs,build-drills tools-test)
	@scripts/repeat-suite.sh $(or $(N),10)

test-bench-smoke: $(call needs,build tools-test)
	@echo "[test] benchmark kit smoke run (seconds; checks the kit works, measures nothing)"
	@$(BENCH_PYTHON) loadtest/bench.py --profile smoke --pair-rounds 2 --out build/bench-smoke
	@$(BENCH_PYTHON) loadtest/check_summary.py build/bench-smoke/summary.json edgecount-workerd js-floor-workerd redis-webdis
	@MIGRATION_KEYS=3000 MIGRATION_LOAD_SECONDS=2 MIGRATION_OUT=build/bench-smoke/migration node scripts/bench-migration.mjs
	@$(BENCH_PYTHON) loadtest/fronts.py --seconds 3 --rate 300 --fronts 1,2 --out build/bench-smoke/fronts
	@$(BENCH_PYTHON) loadtest/simulate.py --out build/bench-smoke/simulation
	@node loadtest/namespace-reads.mjs --keys 40 --days 10 --wide-keys 200 --wide-days 3 --out build/bench-smoke/namespace-reads

test-api-spec: $(call needs,build tools-test)
	@echo "[test] OpenAPI description against the running worker (schemathesis)"
	@scripts/check-openapi.sh

# The whole suite; its parts, and the installs they need, run at once where they do not depend
# on each other (see scripts/test-suite.sh), and each can also be run alone: `make
# test-worker`, say.
test:
	@scripts/test-suite.sh

fuzz:
	@scripts/fuzz.sh

# Not part of `make test`: it runs for SOAK_SECONDS (default 600).
soak: build
	@node scripts/soak.mjs

bench-core: tools
	@rustup target list --installed | grep -qx wasm32-wasip1 || rustup target add wasm32-wasip1
	@node scripts/bench-core.mjs

bench-migration: build
	@node scripts/bench-migration.mjs

bench:
	@scripts/bootstrap.sh bench
	@scripts/build-worker.sh
	@$(BENCH_PYTHON) loadtest/bench.py --profile $(BENCH_PROFILE)
	@node scripts/bench-migration.mjs
	@$(BENCH_PYTHON) loadtest/windows.py
	@$(BENCH_PYTHON) loadtest/fronts.py
	@$(BENCH_PYTHON) loadtest/one_key.py
	@$(BENCH_PYTHON) loadtest/simulate.py
	@node loadtest/namespace-reads.mjs

clean:
	rm -rf build target .wrangler
