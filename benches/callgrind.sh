#!/usr/bin/env bash
# Instructions per observation, counted by callgrind (deterministic: the
# same on any x86-64 machine for the same binary, unlike wall-clock time).
#
# For each variant the driver (benches/callgrind_observe.rs) runs twice,
# with N1 and N2 observations; (Ir(N2) - Ir(N1)) / (N2 - N1) is the cost of
# one observation with start-up, table construction and setup cancelled out.
# The `noop` variant is the bench loop alone (read a pair from the table,
# count rejections); subtract it to get the recording itself.
#
# usage: bash benches/callgrind.sh [K]        (default K = 8)
#        VARIANTS="noop local worker" bash benches/callgrind.sh   (a subset)
# needs: valgrind, jq
set -euo pipefail

cd "$(dirname "$0")/.."
K="${1:-8}"
N1=102400
N2=1024000
VARIANTS=(${VARIANTS:-noop local worker histogram recorder worker_scheduled worker_opted worker_proposal tracker worker_in_state state_plan request_state fetch_add parking_lot std_mutex prometheus})

for tool in valgrind jq; do
    command -v "$tool" >/dev/null || { echo "callgrind.sh: $tool not found" >&2; exit 1; }
done

# Build the driver with the bench profile and find its executable.
bin=$(cargo bench --no-run --bench callgrind_observe --message-format=json 2>/dev/null |
    jq -r 'select(.reason == "compiler-artifact" and .target.name == "callgrind_observe") | .executable' |
    tail -n 1)
[[ -x "$bin" ]] || { echo "callgrind.sh: could not build the driver" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Total instructions (Ir) of one run.
instructions() {
    local out="$tmp/callgrind.$1.$2"
    valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" "$1" "$2" "$K" >/dev/null 2>&1
    awk '/^(summary|totals):/ { print $2; exit }' "$out"
}

echo "callgrind: $bin"
echo "K = $K, N1 = $N1, N2 = $N2 observations"
printf '%-10s %14s %14s %12s %12s %10s\n' variant "Ir(N1)" "Ir(N2)" "Ir/obs" "net of noop" "vs local"
declare -A per_obs
for v in "${VARIANTS[@]}"; do
    i1=$(instructions "$v" "$N1")
    i2=$(instructions "$v" "$N2")
    per_obs[$v]=$(awk -v a="$i1" -v b="$i2" -v n1="$N1" -v n2="$N2" 'BEGIN { printf "%.3f", (b - a) / (n2 - n1) }')
    net=$(awk -v x="${per_obs[$v]}" -v z="${per_obs[noop]}" 'BEGIN { printf "%.3f", x - z }')
    ratio="-"
    if [[ -n "${per_obs[local]:-}" ]]; then
        ratio=$(awk -v x="${per_obs[$v]}" -v l="${per_obs[local]}" 'BEGIN { printf "%.3fx", x / l }')
    fi
    printf '%-10s %14s %14s %12s %12s %10s\n' "$v" "$i1" "$i2" "${per_obs[$v]}" "$net" "$ratio"
done
