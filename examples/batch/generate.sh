#!/bin/sh
# Regenerates the example reports of `specdec-metrics advise batch`
# (docs/cli.md, "advise batch"): one report per batch-size bucket, each from steps that
# draft 4 tokens, every draft accepted with a bucket's own probability (a
# fixed pseudo-random sequence, so the files are always the same).
# Run from this directory with specdec-metrics on the PATH.
set -eu
steps() { # $1 steps, $2 acceptance probability, $3 seed
    awk -v n="$1" -v p="$2" -v x="$3" 'BEGIN { for (i = 0; i < n; i++) { for (a = 0; a < 4; a++) { x = (x * 75 + 74) % 65537; if (x >= p * 65537) break } printf "{\"drafted\":4,\"accepted\":%d}\n", a } }'
}
steps 2000 0.8 1 | specdec-metrics replay --max-draft-len 4 > bs1-8.json
steps 3000 0.75 2 | specdec-metrics replay --max-draft-len 4 > bs9-32.json
steps 1500 0.7 3 | specdec-metrics replay --max-draft-len 4 > bs33-256.json
