/* llama_attn_avx2.c: llama_attn_impl.h for 8 floats (AVX2 + FMA flags from
 * the Makefile); called only when hearth_cpu() reports AVX2 and FMA. */
#include "models/llama_attn.h"

#define ATTN_NAME llama_attn_head_avx2
#define ATTN_VBYTES 32
#include "models/llama_attn_impl.h"
