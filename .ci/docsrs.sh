#!/usr/bin/env bash
# Builds the library's API docs the way docs.rs does, from the crate's own
# [package.metadata.docs.rs] (features and rustdoc arguments, read with
# `cargo metadata`), with nightly rustdoc, and checks that the
# feature-gated Prometheus collector is documented and marked with the
# feature it needs.
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

page="$target/doc/specdec_metrics/prometheus/struct.SpecDecodeCollector.html"
[[ -f $page ]] || { echo "FAIL: $page missing: the Prometheus collector is not documented" >&2; exit 1; }
badge='Available on <strong>crate feature <code>prometheus</code></strong> only'
for p in "$target/doc/specdec_metrics/prometheus/index.html" "$page"; do
    grep -q "$badge" "$p" || { echo "FAIL: $p does not say which feature it needs" >&2; exit 1; }
done
echo "ok: the prometheus module is documented and marked 'crate feature prometheus'"
