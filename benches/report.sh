#!/usr/bin/env bash
# Turns criterion's results (target/criterion/**/new/estimates.json, written
# by `cargo bench`) into the markdown tables of benches/README.md: medians,
# and ratios against the baseline of the same group and parameter.
#
# usage: bash benches/report.sh            (after `cargo bench`)
# needs: jq
set -euo pipefail

cd "$(dirname "$0")/.."
root="${CARGO_TARGET_DIR:-target}/criterion"
[[ -d "$root" ]] || { echo "report.sh: no $root; run cargo bench first" >&2; exit 1; }

# One line per benchmark: group <TAB> function <TAB> parameter <TAB>
# elements per iteration <TAB> median ns per iteration.
# Variants in the order of the tables (the groups' registration order).
order="local_array worker histogram recorder fetch_add_per_worker fetch_add_shared parking_lot_mutex std_mutex prometheus_family"

rows=$(find "$root" -path '*/new/benchmark.json' | sort | while read -r bench; do
    dir=$(dirname "$bench")
    jq -r --slurpfile e "$dir/estimates.json" \
        '[.group_id, .function_id, .value_str, (.throughput.Elements // 1), $e[0].median.point_estimate] | @tsv' \
        "$bench"
done)

echo "### observe, one thread (median ns per observation; ratio = time / local_array time)"
echo
echo "| variant | K = 8 | vs local | K = 32 | vs local |"
echo "| --- | ---: | ---: | ---: | ---: |"
awk -F'\t' -v order="$order" '$1 == "observe_single_thread" {
        ns = $5 / $4; t[$2, $3] = ns; seen[$2] = 1
    }
    END {
        n = split(order, vs, " ")
        for (i = 1; i <= n; i++) {
            v = vs[i]; if (!(v in seen)) continue; line = "| " v
            split("K=8 K=32", ks, " ")
            for (j = 1; j <= 2; j++) {
                x = t[v, ks[j]]; l = t["local_array", ks[j]]
                line = line sprintf(" | %.2f | %.2fx", x, x / l)
            }
            print line " |"
        }
    }' <<<"$rows"
echo

echo "### observe, 1 / 2 / 4 threads, K = 8 (median ns per observation per thread; aggregate M obs/s; ratio = time / local_array time)"
echo
echo "| variant | 1 thread | vs local | 2 threads | vs local | agg. M/s | 4 threads | vs local | agg. M/s |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
awk -F'\t' -v order="$order" '$1 == "observe_threads" {
        # An iteration is 1024 observations on each thread: elements / threads.
        per_thread = $4 / $3; ns = $5 / per_thread; t[$2, $3] = ns; seen[$2] = 1
    }
    END {
        n = split(order, vs, " ")
        for (i = 1; i <= n; i++) {
            v = vs[i]; if (!(v in seen)) continue; line = "| " v
            for (th = 1; th <= 4; th *= 2) {
                x = t[v, th]; l = t["local_array", th]
                line = line sprintf(" | %.2f | %.2fx", x, x / l)
                if (th > 1) line = line sprintf(" | %.0f", th * 1000 / x)
            }
            print line " |"
        }
    }' <<<"$rows"
echo

echo "### snapshot (median µs per snapshot)"
echo
echo "| K | 1 worker | 8 workers | 64 workers | 256 workers |"
echo "| --- | ---: | ---: | ---: | ---: |"
awk -F'\t' '$1 == "snapshot" {
        t[$2, $3] = $5 / 1000
        if (!($2 in seen)) { seen[$2] = 1; order[n++] = $2 }
    }
    END {
        # K=4, K=8, K=16, K=64 in numeric order.
        for (i = 0; i < n; i++) { key[i] = substr(order[i], 3) + 0; name[i] = order[i] }
        for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (key[j] < key[i]) {
            tk = key[i]; key[i] = key[j]; key[j] = tk; tn = name[i]; name[i] = name[j]; name[j] = tn }
        for (i = 0; i < n; i++) {
            line = "| " substr(name[i], 3)
            split("1 8 64 256", ws, " ")
            for (j = 1; j <= 4; j++) line = line sprintf(" | %.2f", t[name[i], ws[j]])
            print line " |"
        }
    }' <<<"$rows"
echo

echo "### reader under load: one writer, Worker::observe, K = 8 (median ns per observation; ratios of times)"
echo
echo "| metrics thread | ns / obs | vs no reader | vs busy loop elsewhere |"
echo "| --- | ---: | ---: | ---: |"
awk -F'\t' '$1 == "reader_under_load" { t[$3] = $5 / $4 }
    END {
        n = split("no_reader busy_loop_elsewhere snapshot_every_1ms snapshot_loop", vs, " ")
        for (i = 1; i <= n; i++) {
            v = vs[i]; if (!(v in t)) continue
            printf "| %s | %.2f | %.3fx | %.3fx |\n", v, t[v], t[v] / t["no_reader"], t[v] / t["busy_loop_elsewhere"]
        }
    }' <<<"$rows"
echo

echo "### publish (the metrics facade against the collector)"
echo
echo "Median µs per call; ratio = time / collector_encode_text time."
echo
echo "| K, workers | snapshot | metrics_publish | vs encode_text | metrics_publish_render | vs encode_text | collector_encode_text | collector_encode_registry |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
awk -F'\t' '$1 == "publish" { t[$2, $3] = $5 / 1000 }
    END {
        n = split("K=8/workers=8 K=8/workers=256 K=64/workers=8 K=64/workers=256", ps, " ")
        for (i = 1; i <= n; i++) {
            p = ps[i]; e = t["collector_encode_text", p]; if (!e) continue
            label = p; sub(/^K=/, "", label); sub(/\/workers=/, ", ", label)
            printf "| %s | %.2f | %.2f | %.3fx | %.2f | %.3fx | %.2f | %.2f |\n", label,
                t["snapshot", p], t["metrics_publish", p], t["metrics_publish", p] / e,
                t["metrics_publish_render", p], t["metrics_publish_render", p] / e,
                e, t["collector_encode_registry", p]
        }
    }' <<<"$rows"
echo
echo "The four exporters side by side (same run); ratio = time / collector_encode_text time."
echo
echo "| K, workers | collector_encode_text | crate_gather_text | vs encode_text | otel_collect | vs encode_text | metrics_publish_render | vs encode_text |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
awk -F'\t' '$1 == "publish" { t[$2, $3] = $5 / 1000 }
    END {
        n = split("K=8/workers=8 K=8/workers=256 K=64/workers=8 K=64/workers=256", ps, " ")
        for (i = 1; i <= n; i++) {
            p = ps[i]; e = t["collector_encode_text", p]; if (!e) continue
            label = p; sub(/^K=/, "", label); sub(/\/workers=/, ", ", label)
            printf "| %s | %.2f | %.2f | %.3fx | %.2f | %.3fx | %.2f | %.3fx |\n", label, e,
                t["crate_gather_text", p], t["crate_gather_text", p] / e,
                t["otel_collect", p], t["otel_collect", p] / e,
                t["metrics_publish_render", p], t["metrics_publish_render", p] / e
        }
    }' <<<"$rows"
