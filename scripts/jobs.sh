# Runs steps at once and keeps their output readable; sourced by scripts/bootstrap.sh (the
# installs) and scripts/test-suite.sh (`make test`).
#
#   JOBS_LABEL=test run_jobs step1 "step2:arg1 arg2" ...
#
# A step is a shell function, optionally followed by its arguments after a colon; it runs in a
# subshell of its own with `set -e` in force, so its first failing command ends it. Each of its
# output lines is prefixed with `[LABEL/step]` (lines already prefixed with `[LABEL` are left
# alone, so steps may run steps of their own). At the end comes one line saying how each step
# ended and how long it took; `JOBS_DESCRIBE`, if set, names a function that prints the word
# for a step that succeeded, given the step's name and its output's file. After a failure, the
# last lines of each failed step's output are printed again, together, so that the cause is not
# lost among the other steps' lines. Fails if any step failed, once all have ended.

run_jobs() {
  local label="${JOBS_LABEL:?}" logs started=$SECONDS
  logs="$(mktemp -d)"
  local pids=() names=()
  for job in "$@"; do
    local name="${job%%:*}" args=()
    [[ $job == *:* ]] && read -r -a args <<< "${job#*:}"
    names+=("$name")
    (
      export JOB="$name"
      start=$SECONDS
      # Under `||` bash would ignore `set -e`: the step runs in its own subshell instead.
      set +e
      (set -e; "$name" "${args[@]}") > >(sed -u "/^\[$label/! s/^/[$label\/$name] /" | tee "$logs/$name.out") 2>&1
      status=$?
      wait # for the prefixing sed, so the output is complete before the summary reads it
      echo "$status $((SECONDS - start))" > "$logs/$name.status"
      exit "$status"
    ) &
    pids+=($!)
  done
  local failed=0
  for pid in "${pids[@]}"; do
    wait "$pid" || failed=1
  done
  local summary="" failures=""
  for name in "${names[@]}"; do
    local status=1 seconds="?" what
    read -r status seconds < "$logs/$name.status" 2>/dev/null || true
    if [ "$status" != 0 ]; then
      what="FAILED (exit $status)"
      failures+="$(printf '\n[%s] ---- the last lines of %s, which failed ----\n' "$label" "$name")"
      failures+="$(printf '\n%s' "$(tail -n 40 "$logs/$name.out")")"
    elif [ -n "${JOBS_DESCRIBE:-}" ]; then
      what="$("$JOBS_DESCRIBE" "$name" "$logs/$name.out")"
    else
      what="ok"
    fi
    summary+="${summary:+; }$name $what in ${seconds}s"
  done
  rm -rf "$logs"
  [ -n "$failures" ] && printf '%s\n' "$failures"
  printf '[%s%s] %s; all in %ss\n' "$label" "${JOB:+/$JOB}" "$summary" "$((SECONDS - started))"
  return "$failed"
}
