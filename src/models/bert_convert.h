/* bert_convert.h: writes a sentence-transformers BERT folder as a GGUF file
 * of llama.cpp's `bert` architecture, so the same weights can be served by
 * hearth from GGUF and by llama.cpp's llama-server --embedding.
 *
 * What is written, as llama.cpp's convert_hf_to_gguf.py writes it:
 *   general.architecture "bert", general.name (the folder's base name),
 *   general.file_type (0 all F32, 1 mostly F16), bert.context_length,
 *   bert.embedding_length, bert.feed_forward_length, bert.block_count,
 *   bert.attention.head_count, bert.attention.layer_norm_epsilon,
 *   bert.attention.causal false, bert.pooling_type (1 mean, 2 cls, 3 last);
 *   tokenizer.ggml.model "bert", .pre "default", .tokens in the "phantom
 *   space" spelling ("the" -> "\u2581the", "##ing" -> "ing", the special
 *   tokens as they are), .token_type (3 for the specials, 1 otherwise, 5 for
 *   padding rows up to vocab_size), .token_type_count, and the special ids
 *   (.unknown/.seperator/.padding/.cls/.mask_token_id, and .bos_token_id =
 *   [CLS], llama.cpp's bert default);
 *   tensors token_embd, position_embd, token_types, token_embd_norm, and per
 *   layer blk.N.attn_q/attn_k/attn_v/attn_output/attn_output_norm/ffn_up/
 *   ffn_down/layer_output_norm (.weight and .bias).
 * A cross-encoder folder (BertForSequenceClassification with one label:
 * tensor classifier.weight [1, hidden]) is written as llama.cpp's reranker:
 * bert.pooling_type 4 (rank), bert.pooler.dense as cls.{weight,bias} and
 * classifier as cls.output.{weight,bias} (always F32).
 * Linear weights and token_embd are stored as the type asked for (F32 or
 * F16); vectors, norms, position_embd and token_types are always F32, as
 * llama.cpp's converter stores them. The sentence-transformers Normalize
 * module and max_seq_length are not carried (GGUF has no key for them). */
#ifndef HEARTH_MODELS_BERT_CONVERT_H
#define HEARTH_MODELS_BERT_CONVERT_H

#include "base/err.h"
#include "engine/dtype.h"

/* Reads the folder hf_dir and writes out_path. type: HEARTH_F32 or
 * HEARTH_F16 (else HEARTH_EUNSUPPORTED). Errors from the folder loader pass
 * through (they name the file and key or tensor); HEARTH_EIO when out_path
 * cannot be written; HEARTH_ENOMEM. The whole model is held in memory while
 * writing. */
int hearth_bert_convert(const char *hf_dir, const char *out_path, hearth_dtype type, hearth_err *err);

#endif
