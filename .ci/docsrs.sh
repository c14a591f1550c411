#!/usr/bin/env bash
# Builds the library's API docs the way docs.rs does, from the crate's own
# [package.metadata.docs.rs] (features and rustdoc arguments, read with
# `cargo metadata`), with nightly rustdoc, and checks that the
# feature-gated exporters (the prometheus-client collector, the metrics
# publisher) are documented and marked with the feature they need.
#
#   bash .ci/docsrs.sh          (needs a nightly toolchain and jq)
set -euo pipefail
cd "$(dirname "$0")/.."

command -v jq >/dev/null || { echo "docsrs.sh: jq not found" >&2; exit 1; }
cargo +nightly --version >/dev/null 2>&1 || { echo "docsrs.sh: no nightly toolchain" >&2; exit 1; }

meta=$(cargo metadata --format-version 1 --no-deps |
    jq -c '.packages[] | select(.name == "specdec-metrics") | .metadata.docs.rs // {}')
flags=()
[[ $(jq -r '."all-features" // false' <<<"$meta") == true ]] && flags+=(--all-features)
while IFS= read -r f; do flags+=(--features "$f"); done < <(jq -r '.features // [] | .[]' <<<"$meta")
rustdoc_args=$(jq -r '."rustdoc-args" // [] | join(" ")' <<<"$meta")
echo "docs.rs metadata: $meta"

target=target/docsrs
RUSTDOCFLAGS="$rustdoc_args -D warnings" \
    cargo +nightly doc -p specdec-metrics --no-deps --target-dir "$target" "${flags[@]}"

# Every public item is at the crate root; each feature-gated one must be
# documented and marked with the feature it needs.
for item in prometheus:struct.SpecDecodeCollector prometheus:enum.TextFormat prometheus:fn.encode_registry \
    metrics:struct.MetricsPublisher metrics:struct.PublisherHandle; do
    feature=${item%%:*}
    page="$target/doc/specdec_metrics/${item#*:}.html"
    [[ -f $page ]] || { echo "FAIL: $page missing: ${item#*:} is not documented" >&2; exit 1; }
    badge="Available on <strong>crate feature <code>$feature</code></strong> only"
    grep -q "$badge" "$page" || { echo "FAIL: $page does not say it needs feature $feature" >&2; exit 1; }
done
echo "ok: the prometheus and metrics items are documented and marked with their crate feature"
