#!/usr/bin/env bash
# Runs the fuzz targets (cargo-fuzz, nightly toolchain) one at a time.
#
#   fuzz/fuzz.sh run SECONDS [TARGET...]   each target for SECONDS (default: all targets);
#                                          new inputs go to a scratch corpus, the kept
#                                          corpus in fuzz/corpus/ is only read
#   fuzz/fuzz.sh grow SECONDS [TARGET...]  the same, adding new inputs to fuzz/corpus/
#   fuzz/fuzz.sh cmin [TARGET...]          minimise fuzz/corpus/<target>/ in place
#   fuzz/fuzz.sh list                      the targets (the files in fuzz/src/bin/)
#
# Limits on every run: 10 s per input (a hang), 2048 MB RSS, 512 MB per
# allocation; a crash leaves its input in fuzz/artifacts/<target>/ and the
# script fails, printing libFuzzer's report and the input in base64 (so a CI
# log alone reproduces it). Keep a reproducer in fuzz/regressions/<target>/: the core's
# tests replay it on stable (crates/tokscope-core/tests/fuzz_corpus.rs).
# FUZZ_TARGET_DIR (default fuzz/target) holds the instrumented build.
#
# With a nightly toolchain the targets are built with AddressSanitizer (and
# the allocation limit applies); without one, on stable with `--sanitizer
# none`: panics, hangs, RSS and the checked invariants are still found, memory
# errors in unsafe code are not. FUZZ_TOOLCHAIN=stable|nightly overrides.
set -euo pipefail
cd "$(dirname "$0")/.."

target_dir=${FUZZ_TARGET_DIR:-fuzz/target}
toolchain=${FUZZ_TOOLCHAIN:-$(rustup toolchain list | grep '^nightly' >/dev/null && echo nightly || echo default)}
if [ "$toolchain" = nightly ]; then
    fuzz=(cargo +nightly fuzz)
    build_flags=()
    limits=(-timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=512)
else
    echo "fuzz: no nightly toolchain: building with the $toolchain toolchain, without a sanitizer" >&2
    fuzz=(cargo fuzz)
    [ "$toolchain" = default ] || fuzz=(cargo "+$toolchain" fuzz)
    build_flags=(--sanitizer none)
    limits=(-timeout=10 -rss_limit_mb=2048)
fi

targets() {
    if [ $# -gt 0 ]; then printf '%s\n' "$@"; else ls fuzz/src/bin | sed 's/\.rs$//' | sort; fi
}

# A failed run: libFuzzer's report (from its first error line, so a CI log
# shows the cause however long the run's output was) and each artifact newer
# than the run's start stamp, base64-encoded, so the input can be rebuilt
# from the log alone (base64 -d > crash; cargo fuzz run TARGET crash).
report_failure() {
    local t=$1 log=$2 stamp=$3 first
    first=$(grep -n -m1 -E '^==[0-9]+==|ERROR: libFuzzer|panicked at|^SUMMARY|deadly signal|Test unit written' "$log" | cut -d: -f1 || true)
    echo "fuzz: $t FAILED; its report:" >&2
    if [ -n "$first" ]; then tail -n "+$(( first > 20 ? first - 20 : 1 ))" "$log" | head -n 200 >&2; else tail -n 200 "$log" >&2; fi
    find "fuzz/artifacts/$t" -maxdepth 1 -type f -newer "$stamp" 2>/dev/null | sort | while read -r a; do
        echo "fuzz: artifact $a ($(wc -c <"$a") bytes), base64:" >&2
        head -c 65536 "$a" | base64 >&2
    done
}

mode=${1:-}
shift || true
case "$mode" in
list)
    targets
    ;;
run | grow)
    seconds=${1:?"usage: fuzz/fuzz.sh $mode SECONDS [TARGET...]"}
    shift
    "${fuzz[@]}" build "${build_flags[@]}" --fuzz-dir fuzz --target-dir "$target_dir"
    scratch=$(mktemp -d)
    trap 'rm -rf "$scratch"' EXIT
    for t in $(targets "$@"); do
        mkdir -p "fuzz/corpus/$t" "$scratch/$t"
        if [ "$mode" = grow ]; then dirs=("fuzz/corpus/$t"); else dirs=("$scratch/$t" "fuzz/corpus/$t"); fi
        start=$(date +%s)
        log="$scratch/$t.log"
        touch "$scratch/$t.start"
        if ! "${fuzz[@]}" run "${build_flags[@]}" --fuzz-dir fuzz --target-dir "$target_dir" "$t" "${dirs[@]}" -- \
            -max_total_time="$seconds" "${limits[@]}" -print_final_stats=1 >"$log" 2>&1; then
            report_failure "$t" "$log" "$scratch/$t.start"
            exit 1
        fi
        tail -n 12 "$log"
        echo "fuzz: $t ran $(( $(date +%s) - start ))s without a crash"
    done
    ;;
cmin)
    for t in $(targets "$@"); do
        "${fuzz[@]}" cmin "${build_flags[@]}" --fuzz-dir fuzz --target-dir "$target_dir" "$t" "fuzz/corpus/$t" -- "${limits[@]}"
    done
    ;;
*)
    sed -n '2,23p' "$0"
    exit 2
    ;;
esac
