#!/usr/bin/env bash
# `make dev`: serves the built worker with `wrangler dev` on http://127.0.0.1:8787, its state kept
# in .dev-state/, and once it answers prints the address, the demo page and the snippet to paste
# into a page. Extra arguments go to wrangler (`scripts/dev.sh --var EDGECOUNT_RATE_LIMIT:5`).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

URL=http://127.0.0.1:8787

# Waits for the API to answer (wrangler prints a good deal first), then says how to use it.
announce() {
  for _ in $(seq 1 240); do
    if node -e "fetch('$URL/v1/health').then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1))" 2>/dev/null; then
      cat <<TEXT

  edgecount is serving $URL (state in .dev-state/; Ctrl-C stops it)
  demo page:   $URL/
  API:         curl -X POST $URL/v1/counters/pages/home/incr
  in a page:   <script type="module">import { createClient, pathKey } from "$URL/v1/client.js";
               console.log(await createClient({ baseUrl: "$URL" }).incr("pages", pathKey(location.pathname)));</script>

TEXT
      return
    fi
    sleep 0.5
  done
}

# wrangler dev keeps a trace of every request it serves (its URL, so the page counted) in the
# persist folder unless told not to. make dev keeps none, as docs/days.md says, and removes
# what an earlier run kept; `X_LOCAL_OBSERVABILITY=true make dev` keeps them while debugging.
export X_LOCAL_OBSERVABILITY="${X_LOCAL_OBSERVABILITY:-false}"
if [ "$X_LOCAL_OBSERVABILITY" = false ]; then
  rm -rf .dev-state/v3/observability
fi

announce &
announcer=$!
trap 'kill "$announcer" 2>/dev/null || true' EXIT
# The demo page is served, and anyone may write, only where it is asked for: a deployment shows
# no demo and, with nothing configured, answers reads only.
wrangler dev --ip 127.0.0.1 --port 8787 --persist-to .dev-state --show-interactive-dev-session=false \
  --var EDGECOUNT_DEMO:1 --var EDGECOUNT_OPEN:1 "$@"
