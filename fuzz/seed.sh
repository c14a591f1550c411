#!/usr/bin/env bash
# Seeds the fuzz corpora (fuzz/corpus/<target>/, git-ignored) from this
# repository's own fixtures and the text its tests write: every seed is a
# file of the repository, or a line or literal taken from one. Run from
# anywhere; idempotent (seeds are named by their content's hash).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
corpus="$root/fuzz/corpus"
cd "$root"

# seed TARGET: standard input becomes one seed of TARGET.
seed() {
    local dir="$corpus/$1" tmp
    mkdir -p "$dir"
    tmp="$(mktemp)"
    cat >"$tmp"
    if [ -s "$tmp" ]; then
        mv "$tmp" "$dir/seed-$(sha1sum "$tmp" | cut -c1-16)"
    else
        rm -f "$tmp"
    fi
}

# lines TARGET: every line of standard input becomes one seed of TARGET.
lines() {
    local line
    while IFS= read -r line; do
        printf '%s\n' "$line" | seed "$1"
    done
}

# The JSON object literals of Rust raw strings (r#"{...}"#) in FILES that
# contain PATTERN (format! placeholders and all: a seed need not be valid).
raw_objects() {
    local pattern="$1"
    shift
    grep -ohE 'r#"\{[^#]*\}"#' "$@" | sed -e 's/^r#"//' -e 's/"#$//' | grep -F -- "$pattern" || true
}

# report: the reports of examples/batch, and the report lines of the tests.
for f in examples/batch/*.json; do seed report <"$f"; done
raw_objects '"acceptance_histogram_by_draft_length"' tests/*.rs cli/tests/*.rs | lines report

# replay_line: the step lines and detailed reports the CLI's tests replay.
for key in '"drafted"' '"undrafted"' '"scheduled"' '"per_step_drafted"'; do
    raw_objects "$key" cli/tests/*.rs ingest/src/steps.rs | lines replay_line
done

# exposition: the scrapes of cli/tests/fixtures, whole and cut at every
# family, and the inline expositions of the parser's tests.
for f in cli/tests/fixtures/*.prom cli/tests/fixtures/*.om; do
    seed exposition <"$f"
    head -n 12 "$f" | seed exposition
done
grep -ohE '^ *(let text = )?"[^"]*(\\"[^"]*)*\\n' ingest/src/exposition.rs \
    | sed -e 's/^ *let text = //' -e 's/^ *"//' | while IFS= read -r line; do
        printf '%b' "$line" | seed exposition
    done

# prometheus_api: the answers the advise tests' fake Prometheus gives. The
# first byte picks the endpoint (even: series, odd: query) and the status.
raw_objects '"status"' cli/tests/*.rs | while IFS= read -r line; do
    case "$line" in
        *'"data":['*) printf '\000%s' "$line" | seed prometheus_api ;;
        *) printf '\001%s' "$line" | seed prometheus_api ;;
    esac
done

# log_source: every log source's text, after a first line naming its row
# of LOG_SOURCES (the target reads it so).
# seed_as NAME TARGET: standard input, after the line NAME, becomes one seed
# of TARGET; lines_as NAME TARGET: each line of standard input does.
seed_as() {
    { printf '%s\n' "$1"; cat; } | seed "$2"
}
lines_as() {
    local line
    while IFS= read -r line; do
        printf '%s\n' "$line" | seed_as "$1" "$2"
    done
}

# vllm_log: the vLLM logs of cli/tests/fixtures, whole and their first lines.
for f in cli/tests/fixtures/*.log cli/tests/fixtures/vllm_logs/*; do
    seed_as vllm_log log_source <"$f"
    head -n 4 "$f" | seed_as vllm_log log_source
done

# llamacpp_log: the log lines of the reader's docs and tests.
grep -h '^//! I ' ingest/src/source/llamacpp_log.rs | sed 's#^//! ##' | seed_as llamacpp_log log_source
grep -h '^//! I ' ingest/src/source/llamacpp_log.rs | sed 's#^//! ##' | lines_as llamacpp_log log_source
grep -ohE '"(I |0\.|draft acceptance| #calls)[^"]*"' ingest/src/source/llamacpp_log.rs cli/tests/engines.rs \
    | sed -e 's/^"//' -e 's/"$//' | lines_as llamacpp_log log_source

# responses: the response lines of the reader's docs (vLLM's and SGLang's).
for key in '"speculative_decoding"' '"spec_verify_ct"'; do
    raw_objects "$key" ingest/src/source/*.rs cli/tests/*.rs | lines_as responses log_source
done

# trace: the traces of the format's own tests and docs, and of the
# simulator's and the CLI's tests.
raw_objects '"output_tokens"' ingest/src/trace.rs sim/src/*.rs sim/tests/*.rs cli/tests/*.rs | lines trace
grep -h '^//! {"' ingest/src/trace.rs | sed 's#^//! ##' | seed trace

# ngram_request: the request lines of the ngram tests.
raw_objects '"prompt"' cli/tests/*.rs cli/src/ngram/*.rs ingest/src/trace.rs | lines ngram_request
raw_objects '"messages"' cli/tests/*.rs cli/src/ngram/*.rs ingest/src/trace.rs | lines ngram_request
printf '%s\n' '{"prompt": "def f(x):\n    return x\n", "output": "def g(x):\n    return x\n", "id": "r1"}' \
    '{"prompt": "a b a b", "output": "a b", "id": 7}' \
    '{"messages": [{"role": "user", "content": "a b"}, {"role": "tool name=f", "content": "{}"}], "output": "a b", "id": "c1"}' | seed ngram_request

for d in "$corpus"/*/; do
    printf '%s: %s seeds\n' "$(basename "$d")" "$(find "$d" -type f | wc -l)"
done
