/* hf_tokenizer.h: private to hf_folder.c: the tokenizer files of a Hugging
 * Face folder into f->vocab, f->wp_opts and f->vocab_source. */
#ifndef HEARTH_MODELS_HF_TOKENIZER_H
#define HEARTH_MODELS_HF_TOKENIZER_H

#include "models/hf_folder.h"

/* Limit on tokenizer.json's vocab entries. */
#define HF_VOCAB_MAX ((int64_t)1 << 22)

/* Reads tokenizer.json, or vocab.txt with tokenizer_config.json's options,
 * after f->config is set; checks the vocab fits config.vocab_size and has an
 * [UNK]. *model_max_length is tokenizer_config.json's model_max_length, or 0
 * when absent or unset (transformers writes 1e30 for "no limit"). */
int hf_tokenizer_load(hearth_hf_folder *f, int64_t *model_max_length, hearth_err *err);

#endif
