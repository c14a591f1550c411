#!/usr/bin/env bash
# Instructions per snapshot, counted by callgrind (deterministic, unlike
# wall-clock time on a shared machine): `Recorder::snapshot()` against the
# plain relaxed sum of the same counters (benches/callgrind_snapshot.rs),
# at K = 8 with 8, 64 and 256 live workers.
#
# Each variant runs twice, with N1 and N2 snapshots; (Ir(N2) - Ir(N1)) /
# (N2 - N1) is the cost of one snapshot with start-up and setup cancelled.
#
# usage: bash benches/callgrind_snapshot.sh [WORKERS...]   (default 8 64 256)
# needs: valgrind, jq
set -euo pipefail

cd "$(dirname "$0")/.."
N1=200
N2=2200
SIZES=("${@:-8 64 256}")
read -r -a SIZES <<<"${SIZES[*]}"

for tool in valgrind jq; do
    command -v "$tool" >/dev/null || { echo "callgrind_snapshot.sh: $tool not found" >&2; exit 1; }
done

bin=$(cargo bench --no-run --bench callgrind_snapshot --message-format=json 2>/dev/null |
    jq -r 'select(.reason == "compiler-artifact" and .target.name == "callgrind_snapshot") | .executable' |
    tail -n 1)
[[ -x "$bin" ]] || { echo "callgrind_snapshot.sh: could not build the driver" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Total instructions (Ir) of one run.
instructions() {
    local out="$tmp/callgrind.$1.$2.$3"
    valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" "$1" "$2" "$3" >/dev/null 2>&1
    awk '/^(summary|totals):/ { print $2; exit }' "$out"
}

echo "callgrind: $bin"
echo "K = 8, N1 = $N1, N2 = $N2 snapshots"
printf '%-8s %12s %16s %8s %20s %8s\n' workers "snapshot Ir" "relaxed_sum Ir" ratio "relaxed_sum_wrapping" ratio
for w in "${SIZES[@]}"; do
    per=()
    for v in snapshot relaxed_sum relaxed_sum_wrapping; do
        i1=$(instructions "$v" "$N1" "$w")
        i2=$(instructions "$v" "$N2" "$w")
        per+=("$(awk -v a="$i1" -v b="$i2" -v n1="$N1" -v n2="$N2" 'BEGIN { printf "%.1f", (b - a) / (n2 - n1) }')")
    done
    ratio=$(awk -v s="${per[0]}" -v r="${per[1]}" 'BEGIN { printf "%.3fx", s / r }')
    wrapping=$(awk -v s="${per[0]}" -v r="${per[2]}" 'BEGIN { printf "%.3fx", s / r }')
    printf '%-8s %12s %16s %8s %20s %8s\n' "$w" "${per[0]}" "${per[1]}" "$ratio" "${per[2]}" "$wrapping"
done
