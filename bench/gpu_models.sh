# shellcheck shell=bash
# bench/gpu_models.sh: the random-weight models bench/gpu.sh and
# bench/gpu_ab.sh time, sourced by both (not run by itself).
#
# gpu_models ARRAY DIR LOG TYPE...: sets ARRAY[TYPE] (an associative array
# the caller declared) to DIR/llama-1b-<type>.gguf for each TYPE, writing
# what is missing: the F16 llama of the 1.04B shape with
# test_llama_demo_tool's `1b` (32064-token phi-3 vocabulary from VOCAB),
# the other types from it with `hearth quantize` (every matrix of that
# type: the same file goes to every engine). Files are kept, so a second
# call on a warm machine writes nothing. Uses TOOL, VOCAB, HEARTH and die
# from the caller; tool logs go to LOG.
gpu_models() {
    local -n gm_out=$1
    local dir=$2 log=$3 f16=$2/llama-1b-f16.gguf t l m
    shift 3
    mkdir -p "$dir"
    if [ ! -s "$f16" ]; then
        [ -x "$TOOL" ] || die "$TOOL is missing: gpu-pack.sh must pack tests/models/test_llama_demo_tool too"
        [ -f "$VOCAB" ] || die "vocab $VOCAB: no such file (set VOCAB)"
        "$TOOL" write "$f16.tmp" llama f16 "$VOCAB" 1b >"$log/write.log" 2>&1 ||
            { tail -5 "$log/write.log" >&2; die "test_llama_demo_tool write ... 1b failed (does it have the 1b shape?)"; }
        mv "$f16.tmp" "$f16"
    fi
    for t in "$@"; do
        l=$(echo "$t" | tr '[:upper:]' '[:lower:]')
        m=$dir/llama-1b-$l.gguf
        if [ ! -s "$m" ]; then
            "$HEARTH" quantize "$f16" "$m" "$t" >"$log/quantize-$t.log" 2>&1 ||
                { tail -5 "$log/quantize-$t.log" >&2; die "hearth quantize to $t failed"; }
        fi
        # shellcheck disable=SC2034,SC2004 # gm_out names the caller's associative array
        gm_out[$t]=$m
    done
}
