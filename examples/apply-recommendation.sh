#!/usr/bin/env bash
# Review and apply what `tuner recommend --output DIR` wrote. Usage: apply-recommendation.sh DIR PSQL-ARGS…
# Every server that shares the storage needs it: ALTER SYSTEM is not replicated.
set -euo pipefail
dir=$1; shift
jq -r '.recommendations[] | "\(.knob): \(.current) -> \(.recommended) [\(.decision)] \(.effect.improvement // "-")x CI \(.effect.ci95 // "-")"' "$dir/report.json"
if ! jq -e '.recommendations | any(.decision == "change")' "$dir/report.json" >/dev/null; then
    echo "tuner says: keep what you have. Nothing to apply."
    exit 0
fi
cat "$dir/recommendation.sql"
read -r -p "Apply this? [y/N] " answer
[ "$answer" = y ] || exit 1
psql -v ON_ERROR_STOP=1 "$@" -f "$dir/recommendation.sql"
echo "Applied. To undo: psql $* -f $dir/rollback.sql"
