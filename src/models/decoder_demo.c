/* decoder_demo.c: the demo generation model (decoder.h's
 * hearth_decoder_demo_path): a tiny random-weight llama (llama_demo.h's tiny
 * shape, Q8_0, a 4096-token context) over a byte-level SentencePiece
 * vocabulary with a ChatML template, written by hearth on first use so that
 * `hearth serve` with no --model answers chat at once. Random weights say
 * nothing sensible; the point is the whole path, tokenizer to stream.
 * Rejected: shipping a file (a binary in the tree) or downloading one (a
 * first run must not need the network). */
#include "decoder.h"

#include "base/log.h"
#include "models/gguf_write.h"
#include "models/llama_demo.h"
#include "text/vocab.h"

#include <stdio.h>
#include <sys/stat.h>

static const char CHATML[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/* A byte-level SentencePiece vocabulary: <unk> <s> </s>, the 256 byte
 * tokens, the ChatML markers as control tokens, and "▁" + each printable
 * ASCII character, so every text tokenizes (bytes are the fallback). */
static int write_demo_vocab(const char *path, hearth_err *err)
{
    enum { N = 3 + 256 + 2 + 95 };
    char *tokens[N];
    float scores[N];
    int32_t types[N];
    char store[N][16];
    int n = 0;
    const char *fixed[3] = {"<unk>", "<s>", "</s>"};
    for (int i = 0; i < 3; i++) {
        snprintf(store[n], sizeof store[n], "%s", fixed[i]);
        types[n] = i == 0 ? HEARTH_TOK_UNKNOWN : HEARTH_TOK_CONTROL;
        scores[n] = 0;
        n++;
    }
    for (int b = 0; b < 256; b++, n++) {
        snprintf(store[n], sizeof store[n], "<0x%02X>", b);
        types[n] = HEARTH_TOK_BYTE;
        scores[n] = 0;
    }
    snprintf(store[n], sizeof store[n], "<|im_start|>");
    types[n] = HEARTH_TOK_CONTROL;
    scores[n++] = 0;
    snprintf(store[n], sizeof store[n], "<|im_end|>");
    types[n] = HEARTH_TOK_CONTROL;
    scores[n++] = 0;
    for (int c = 32; c < 127; c++, n++) {
        snprintf(store[n], sizeof store[n], "\xe2\x96\x81%c", c);
        types[n] = HEARTH_TOK_NORMAL;
        scores[n] = -(float)(c - 31);
    }
    for (int i = 0; i < n; i++)
        tokens[i] = store[i];
    hearth_gguf_writer *w = hearth_gguf_writer_new();
    if (!w)
        return hearth_err_set(err, HEARTH_ENOMEM, "out of memory");
    hearth_gguf_writer_add_str(w, "general.architecture", "llama");
    hearth_gguf_writer_add_str(w, "tokenizer.ggml.model", "llama");
    hearth_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)tokens, (size_t)n);
    hearth_gguf_writer_add_arr_f32(w, "tokenizer.ggml.scores", scores, (size_t)n);
    hearth_gguf_writer_add_arr_i32(w, "tokenizer.ggml.token_type", types, (size_t)n);
    hearth_gguf_writer_add_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    hearth_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 1);
    hearth_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 2);
    hearth_gguf_writer_add_u32(w, "tokenizer.ggml.eot_token_id", 3 + 256 + 1);
    hearth_gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", true);
    hearth_gguf_writer_add_str(w, "tokenizer.chat_template", CHATML);
    int rc = hearth_gguf_writer_write(w, path, 32, err);
    hearth_gguf_writer_free(w);
    return rc;
}

int hearth_decoder_demo_path(const char *dir, char *path, size_t n, hearth_err *err)
{
    char vocab[1024], model[1024];
    snprintf(vocab, sizeof vocab, "%s/demo-vocab.gguf", dir);
    snprintf(model, sizeof model, "%s/demo-llama-tiny.gguf", dir);
    snprintf(path, n, "%s", model);
    struct stat sb;
    if (stat(model, &sb) == 0)
        return HEARTH_OK;
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", model);
    HLOG_INFO("writing the demo generation model (a tiny llama, random weights) to %s", model);
    int rc = write_demo_vocab(vocab, err);
    if (rc)
        return rc;
    hearth_llama_demo d;
    hearth_llama_demo_tiny(&d, "llama");
    d.wtype = HEARTH_Q8_0;
    d.vocab_path = vocab;
    d.n_ctx = 4096;
    rc = hearth_llama_demo_write(&d, tmp, err);
    if (rc)
        return rc;
    if (rename(tmp, model) != 0)
        return hearth_err_sys(err, 5, "cannot rename %s", tmp);
    return HEARTH_OK;
}
