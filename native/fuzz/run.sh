#!/bin/sh
# Build the fuzz targets with clang (libFuzzer + ASan + UBSan) and run a short pass over
# each, starting from the committed seed corpus. Fails (non-zero) on any crash.
#   FUZZ_SECONDS=60 native/fuzz/run.sh      (total budget, split between targets)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
native=$(dirname "$here")
seconds=${FUZZ_SECONDS:-60}
make -C "$native" fuzz >/dev/null
targets=$(cd "$native/build-fuzz" && ls fuzz_*)
n=$(echo "$targets" | wc -w)
per=$((seconds / n))
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for t in $targets; do
    mkdir -p "$work/$t"
    echo "fuzzing $t for ${per}s"
    # new inputs go to the scratch dir; the committed corpus is only read
    (cd "$work" && "$native/build-fuzz/$t" -max_total_time="$per" -max_len=4096 \
        -print_final_stats=1 "$work/$t" "$here/corpus/$t")
done
echo "fuzz: no crash"
