#!/usr/bin/env bash
# Checks that worker/static/openapi.json and the service agree.
#
#   1. Static: the document is valid OpenAPI 3.1 (the official meta-schema), every schema in it
#      is a valid JSON Schema 2020-12 whose references resolve, every example matches its
#      schema, and schemathesis loads every operation.
#   2. Live: starts the built worker (build/, `make build`) in workerd on a free loopback port
#      with fresh state, the way tests/crash.spec.ts does, and runs schemathesis against it:
#      property-based requests for every operation (examples, coverage, fuzzing and stateful
#      phases), each answer checked against the document (status codes, content types,
#      headers, body schemas), valid requests expected to be accepted and invalid ones refused,
#      no 5xx. If the worker serves /v1/openapi.json, that must be this document. A second,
#      shorter pass runs a worker with tokens and a small rate limit and checks its 401, 403
#      and 429 answers (and the RateLimit-* headers) against the document the same way.
#
# Usage: scripts/check-openapi.sh
# Environment:
#   OPENAPI_CHECK_EXAMPLES   examples per operation and phase (default 25)
#   OPENAPI_CHECK_SEED       seed, so a run can be repeated exactly (default 20261122)
#   OPENAPI_CHECK_EXCLUDE    space-separated paths of the document to leave out of the live run,
#                            e.g. "/v1/badge/{ns}/{key}.svg /" for a build that does not serve
#                            them yet (default: none; /stream/{ns}/{key} is always left out)
#   OPENAPI_CHECK_ARGS       more `schemathesis run` options, e.g.
#                            "--report har --report-dir $PWD/build/openapi-report"
#   OPENAPI_CHECK_STATIC_ONLY=1  run step 1 only (no build or workerd needed)
# Needs schemathesis (scripts/bootstrap.sh test) and node_modules (workerd, wrangler).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export PATH="$ROOT/node_modules/.bin:$PATH"
export CLOUDFLARE_CF_FETCH_ENABLED=false WRANGLER_SEND_METRICS=false

SPEC="$ROOT/worker/static/openapi.json"
VENV="$ROOT/.tools/api-venv"
EXAMPLES="${OPENAPI_CHECK_EXAMPLES:-25}"
SEED="${OPENAPI_CHECK_SEED:-20261122}"
read -r -a EXCLUDE <<< "${OPENAPI_CHECK_EXCLUDE:-}"
# An event stream never ends, so schemathesis cannot read its answer: tests/compat-stream.spec.ts
# checks it instead.
EXCLUDE+=("/stream/{ns}/{key}")
read -r -a EXTRA_ARGS <<< "${OPENAPI_CHECK_ARGS:-}"

say() { printf '[openapi] %s\n' "$*"; }
fail() {
  say "FAILED: $*"
  exit 1
}

[ -x "$VENV/bin/schemathesis" ] || fail "schemathesis is missing: run scripts/bootstrap.sh test"
[ -f "$SPEC" ] || fail "$SPEC is missing"
started=$SECONDS

# ------------------------------------------------------------------------------ static check
say "static: $(basename "$SPEC") against the OpenAPI 3.1 meta-schema, its schemas and examples"
"$VENV/bin/python" "$ROOT/scripts/check_openapi_static.py" "$SPEC"

if [ "${OPENAPI_CHECK_STATIC_ONLY:-}" = 1 ]; then
  exit 0
fi

# ------------------------------------------------------------------------------ live check
[ -f build/index.js ] && [ -f build/index_bg.wasm ] || fail "build/ is missing: run make build"
command -v workerd > /dev/null || fail "workerd is missing: run scripts/bootstrap.sh"

TMP="$(mktemp -d "${TMPDIR:-/tmp}/edgecount-openapi.XXXXXX")"
WORKERD_PID=""
stop_workerd() {
  if [ -n "$WORKERD_PID" ] && kill -0 "$WORKERD_PID" 2> /dev/null; then
    kill "$WORKERD_PID" 2> /dev/null || true
    wait "$WORKERD_PID" 2> /dev/null || true
  fi
  WORKERD_PID=""
}
cleanup() {
  stop_workerd
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Starts the built worker in workerd with fresh state in $TMP/<name>, the vars of wrangler.toml
# plus NAME=VALUE pairs given after the name; sets BASE.
start_workerd() {
  local name="$1" dir="$TMP/$1" port bindings="" pair
  shift
  port="$("$VENV/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  BASE="http://127.0.0.1:$port"
  mkdir -p "$dir/state"
  node scripts/workerd-config.mjs "$port" "$dir/state" "$dir/edgecount.capnp"
  for pair in "$@"; do
    bindings+="(name = \"${pair%%=*}\", text = \"${pair#*=}\"), "
  done
  if [ -n "$bindings" ]; then
    grep -q 'bindings = \[' "$dir/edgecount.capnp" || fail "cannot add vars to the workerd config"
    sed -i "s|bindings = \[|bindings = [$bindings|" "$dir/edgecount.capnp"
  fi
  say "starting workerd ($name) on $BASE with fresh state"
  workerd serve "$dir/edgecount.capnp" > "$dir/workerd.log" 2>&1 &
  WORKERD_PID=$!
  local i
  for i in $(seq 200); do
    curl -fsS -o /dev/null "$BASE/v1/health" 2> /dev/null && return 0
    kill -0 "$WORKERD_PID" 2> /dev/null || break
    sleep 0.05
  done
  cat "$dir/workerd.log"
  fail "workerd ($name) did not answer /v1/health"
}

# Runs `schemathesis [--config-file FILE] run` against $BASE: the first argument is the config
# file or "", the rest are options of `run`.
run_schemathesis() {
  local config=() path args=(run "$SPEC" --url "$BASE" --seed "$SEED" --workers 1 --request-timeout 10 --no-color)
  [ -z "$1" ] || config=(--config-file "$1")
  shift
  for path in "${EXCLUDE[@]}"; do
    args+=(--exclude-path "$path")
  done
  (cd "$TMP" && "$VENV/bin/schemathesis" "${config[@]}" "${args[@]}" "$@" "${EXTRA_ARGS[@]}")
}

excluded() {
  local path
  for path in "${EXCLUDE[@]}"; do
    [ "$path" = "$1" ] && return 0
  done
  return 1
}
for path in "${EXCLUDE[@]}"; do
  say "leaving out $path"
done

# ---- pass 1: open mode (no tokens, no rate limits), every check
start_workerd open EDGECOUNT_DEMO=1

# The document the worker serves must be this one.
if excluded /v1/openapi.json; then
  say "not comparing the served /v1/openapi.json (excluded)"
else
  curl -sS -o "$TMP/served.json" "$BASE/v1/openapi.json"
  "$VENV/bin/python" - "$SPEC" "$TMP/served.json" << 'PY' || fail "GET /v1/openapi.json does not serve worker/static/openapi.json"
import json, sys
with open(sys.argv[1], encoding="utf-8") as a, open(sys.argv[2], encoding="utf-8") as b:
    try:
        same = json.load(a) == json.load(b)
    except ValueError:
        same = False
sys.exit(0 if same else 1)
PY
  say "GET /v1/openapi.json serves this document"
fi

# Which checks run, and where each applies. In the config file rather than on the command line:
# checks named there would override the per-operation settings.
cat > "$TMP/schemathesis.toml" << 'TOML'
hooks = "hooks.py"

[generation]
database = "none"

[checks]
# Every built-in check but the two that need tokens configured: ignored_auth (the document
# allows anonymous requests, as the service does in open mode) and object_level_authorization.
enabled = true
ignored_auth.enabled = false
object_level_authorization.enabled = false

[checks.positive_data_acceptance]
# 422 answers valid input that cannot apply now: an increment that would overflow what earlier
# requests stored, or an Idempotency-Key already used for another request.
expected-statuses = ["2xx", "304", "401", "403", "404", "422", "429", "5xx"]

[[operations]]
# The CountAPI- and Abacus-compatible routes refuse some valid requests as those services do:
# 409 for a name already created, 400 for a token route without a token or on a counter
# without an admin key, or an update by 0.
include-tag = "compat"
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404", "409", "429", "5xx"]

[[operations]]
# An export's cursor is an opaque token that only an earlier page gives: any other is 400.
include-path = "/v1/export"
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "409", "429", "5xx"]

[[operations]]
# A read of days takes `period` or `from` and `to`, both or neither, at most EDGECOUNT_DAYS days
# with `to` not before `from`: how query parameters depend on each other is beyond what the
# document can say, so such schema-valid combinations are answered 400.
include-operation-id = "getCounterDays"
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404", "429", "5xx"]

[[operations]]
# A namespace read takes the same days (`period`, or `from` and `to`), none of them before the
# oldest day kept, and refuses the same way.
include-operation-id = "getNamespaceDays"
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404", "429", "5xx"]

[[operations]]
include-operation-id = "getNamespaceTop"
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404", "429", "5xx"]

[[operations]]
# A badge takes the same days (`period`, or `from` and `to`) and is refused the same way; the
# pattern of `period` allows the 3,660 days the largest EDGECOUNT_DAYS keeps.
include-operation-id = "getBadge"
checks.positive_data_acceptance.expected-statuses = ["2xx", "304", "400", "401", "403", "404", "422", "429", "5xx"]

[[operations]]
# An increment takes `unique=1` with a positive `by` alone: the document cannot tie one
# parameter to another's value, so `unique=1` with `by` 0 or less is answered 400.
include-operation-id = "incrCounter"
checks.positive_data_acceptance.expected-statuses = ["2xx", "304", "400", "401", "403", "404", "422", "429", "5xx"]

[[operations]]
# A batch answers 200 with a per-op error for an invalid op; only its envelope is refused whole.
include-path = "/v1/batch"
checks.negative_data_rejection.enabled = false

[[operations]]
# Counters are not resources that disappear: a deleted counter reads 0 with "exists": false.
include-path-regex = "^/v1/counters/"
checks.use_after_free.enabled = false
TOML

# Generated Idempotency-Keys are short and repeat ("0", "!"), so most keyed writes would be 422
# idempotency_mismatch and test nothing else. Each valid key gets a digest of its request
# appended: a repeated request still replays (Idempotent-Replayed), different ones never collide.
cat > "$TMP/hooks.py" << 'PY'
import hashlib
import json
import re

import schemathesis

VALID = re.compile(r"[\x21-\x7e]{1,128}")


@schemathesis.hook
def before_call(context, case, kwargs):
    headers = case.headers or {}
    for name, key in list(headers.items()):
        if name.lower() != "idempotency-key" or not isinstance(key, str) or not VALID.fullmatch(key):
            continue
        request = [case.method, case.path, case.path_parameters, case.query, case.body, case.media_type]
        digest = hashlib.sha256(json.dumps(request, sort_keys=True, default=repr).encode()).hexdigest()[:16]
        headers[name] = f"{key[:111]}-{digest}"
PY

status=0
say "pass 1, open mode: every check, $EXAMPLES examples per operation and phase, seed $SEED"
run_schemathesis "$TMP/schemathesis.toml" --max-examples "$EXAMPLES" || status=1
[ "$status" = 0 ] || tail -n 20 "$TMP/open/workerd.log"
stop_workerd

# ---- pass 2: tokens and a small rate limit, so answers are 401, 403 and 429 as well
# The writer may write namespace `pages` only; reads need a token. Requests with the writer's
# token soon run out of budget (429 with RateLimit-*), those without are 401, other namespaces
# and /v1/stats are 403. Only the answers' conformance is checked: which request gets which
# refusal depends on the order they come in.
WRITER="openapi-check-writer-$RANDOM$RANDOM"
start_workerd limited EDGECOUNT_DEMO=1 \
  "EDGECOUNT_ADMIN_TOKENS=openapi-check-admin-$RANDOM$RANDOM" \
  "EDGECOUNT_WRITE_TOKENS=$WRITER@pages" \
  EDGECOUNT_PRIVATE_READS=true EDGECOUNT_RATE_LIMIT=5 EDGECOUNT_RATE_BURST=10
conformance=not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance
for token in "" "$WRITER"; do
  headers=()
  who="without a token"
  if [ -n "$token" ]; then
    headers=(-H "Authorization: Bearer $token")
    who="with the writer token"
  fi
  say "pass 2, tokens and rate limits, $who: response checks"
  run_schemathesis "" --checks "$conformance" --phases examples,fuzzing --max-examples 10 \
    --generation-database none --warnings off "${headers[@]}" || status=1
done
[ "$status" = 0 ] || tail -n 20 "$TMP/limited/workerd.log"
stop_workerd

[ "$status" = 0 ] || fail "schemathesis found the service and the document disagreeing (above)"
say "ok in $((SECONDS - started)) s"
