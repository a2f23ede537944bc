/* llama_attn_avx512.c: llama_attn_impl.h for 16 floats (AVX-512 flags from
 * the Makefile); called only when hearth_cpu() reports AVX-512F. */
#include "models/llama_attn.h"

#define ATTN_NAME llama_attn_head_avx512
#define ATTN_VBYTES 64
#include "models/llama_attn_impl.h"
