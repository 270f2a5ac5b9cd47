#!/bin/sh
# mca.sh - the static schedule of the AVX-512 tiles' inner loops (F32,
# matmul_avx512.c), by llvm-mca: for each variant's function, each loop of
# 16 FMAs or more (the compute-bound tiles and their k-blocks), the FMAs,
# loads and prefetches of one k step and the cycles llvm-mca gives it.
#
#   sh tests/bench/mca.sh [CPU ...]     (default: znver5 znver4 sapphirerapids)
#
# Read it against the napkin bound (matmul_avx512.c, the top): a step of an
# R x C tile is R C FMAs, so R C / P cycles on P 512-bit FMA pipes; the
# loads and everything else must fit in that. LLVM 19's znver5 model is its
# Zen 4 model (a zmm FMA takes FP0 and FP1: one a cycle), so its figure
# for a loop at the FMA bound is R C cycles, where Zen 5's two pipes need
# R C / 2: the script prints the load pipes' and the dispatch's cycles
# beside it, which must stay under R C / 2 on Zen 5.
MCA=${MCA:-llvm-mca-19}
CC=${CC:-cc}
command -v "$MCA" >/dev/null 2>&1 || { echo "mca.sh: $MCA not found (Debian: apt-get install llvm-19)"; exit 0; }
CPUS=${*:-znver5 znver4 sapphirerapids}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
$CC -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -Isrc -fopenmp-simd -fno-trapping-math -ffp-contract=off \
    -S -o "$TMP/m.s" src/kernels/matmul_avx512.c || exit 1
# the variants' F32 functions, each loop (a label and a jump back to it)
# with 16 FMAs or more, into $TMP/<function>.<n>.s
awk -v dir="$TMP" '
    /^matmul_rows_avx512_([0-9]+x[0-9]+[a-z]*_)?f32:/ { fn = $1; sub(":", "", fn); n = 0; next }
    /^[a-zA-Z_]/ && !/^\./ { fn = "" }
    fn != "" && /^\.L[0-9]+:/ { lbl = $1; sub(":", "", lbl); body = ""; fmas = 0; next }
    fn != "" && lbl != "" {
        body = body $0 "\n"
        if ($1 ~ /^vfmadd/) fmas++
        if ($1 ~ /^j/ && $2 == lbl) {
            if (fmas >= 16) { f = dir "/" fn "." (++n) ".s"; printf "%s", body > f; close(f) }
            lbl = ""
        }
    }' "$TMP/m.s"
for f in "$TMP"/*.s; do
    case $f in */m.s) continue ;; esac
    name=$(basename "$f" .s)
    fmas=$(grep -c 'vfmadd' "$f")
    # vector loads, an FMA's memory operand included (stores left out)
    loads=$(grep -E '^\s+v[a-z0-9]+\s+[^,]*\(' "$f" | grep -vc '^\s+vmov[a-z]*\s+%')
    pf=$(grep -c prefetch "$f")
    insns=$(grep -c '^\s' "$f")
    printf '%-36s %2d FMAs, %2d loads, %d prefetches, %2d instructions; at P = 2: FMAs %4.1f, loads %4.1f cycles; llvm-mca:' \
        "$name" "$fmas" "$loads" "$pf" "$insns" "$(echo "$fmas / 2" | bc -l)" "$(echo "$loads / 2" | bc -l)"
    for cpu in $CPUS; do
        out=$("$MCA" -mcpu="$cpu" -iterations=200 "$f" 2>/dev/null) || { printf ' %s ?' "$cpu"; continue; }
        cyc=$(echo "$out" | sed -n 's/^Total Cycles: *//p')
        printf ' %s %.1f cycles' "$cpu" "$(echo "$cyc / 200" | bc -l)"
    done
    printf '\n'
done
