#!/usr/bin/env bash
# The soak test (not part of CI): steady mixed load on one `issuing serve` per backend,
# sampled every minute, plotted with gnuplot. See docs/benchmarks.md, "Soak".
#
#   scripts/soak.sh                       # 30 minutes on SQLite, then 30 on PostgreSQL
#   MINUTES=3 SAMPLE_SECS=10 scripts/soak.sh sqlite   # a short try
#
# Writes target/soak/<backend>/{soak.csv,soak.gp,soak.png,summary.md}; exits non-zero
# when a run fails (a series keeps growing, a request failed, the ledger does not verify).
set -euo pipefail
cd "$(dirname "$0")/.."

MINUTES="${MINUTES:-30}"
SAMPLE_SECS="${SAMPLE_SECS:-60}"
RETENTION="${RETENTION:-120}"
BACKENDS=("$@")
[ ${#BACKENDS[@]} -eq 0 ] && BACKENDS=(sqlite postgres)

if ! command -v gnuplot >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get update -qq && apt-get install -y -qq gnuplot-nox >/dev/null
    else
        echo "soak: gnuplot is missing (Debian: sudo apt-get install gnuplot-nox); the CSV is written, the PNG is not" >&2
    fi
fi

cargo build --release -p issuing -p issuing-bench
status=0
for backend in "${BACKENDS[@]}"; do
    ./target/release/issuing-bench soak --backend "$backend" --minutes "$MINUTES" \
        --sample-secs "$SAMPLE_SECS" --retention "$RETENTION" --out "target/soak/$backend" || status=1
done
exit $status
