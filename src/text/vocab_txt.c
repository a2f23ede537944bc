/* vocab_txt.c: BERT's vocab.txt into a hearth_vocab.
 *
 * The whole file is read at once (it is small: bert-base-uncased's is 226 KiB)
 * and split in two passes, one to count lines so the vocab is allocated once,
 * one to copy the tokens. Rejected: mmapping it, since the vocab copies every
 * token anyway and the file can then be closed at once. Duplicate lines keep
 * the lowest id (hearth_vocab_finish's rule); Python's dict would keep the
 * highest, but BERT vocabularies have no duplicates. */
#include "text/vocab_txt.h"

#include "base/file.h"
#include "text/unicode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int32_t count_lines(const char *data, size_t len)
{
    size_t lines = 0;
    for (size_t i = 0; i < len; i++)
        lines += data[i] == '\n';
    if (len > 0 && data[len - 1] != '\n')
        lines++;
    return lines > INT32_MAX ? INT32_MAX : (int32_t)lines;
}

int hearth_vocab_load_txt(hearth_vocab *v, const char *path, hearth_err *err)
{
    static const char *const special_text[5] = {"[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"};
    char *data = NULL;
    size_t len = 0;
    memset(v, 0, sizeof *v);
    int rc = hearth_file_read(path, HEARTH_VOCAB_TXT_MAX_BYTES, &data, &len, err);
    if (rc)
        return rc;
    int32_t n = count_lines(data, len);
    if (n == 0) {
        rc = hearth_err_set(err, HEARTH_EINVAL, "%s: empty vocab.txt", path);
        goto fail;
    }
    rc = hearth_vocab_init(v, n, err);
    if (rc) {
        hearth_err_prefix(err, "%s", path);
        goto fail;
    }
    size_t pos = 0;
    for (int32_t id = 0; id < n; id++) {
        const char *line = data + pos;
        const char *nl = memchr(line, '\n', len - pos);
        size_t line_len = nl ? (size_t)(nl - line) : len - pos;
        pos += line_len + (nl ? 1 : 0);
        if (line_len > 0 && line[line_len - 1] == '\r')
            line_len--;
        if (line_len > HEARTH_VOCAB_TXT_MAX_TOKEN) {
            rc = hearth_err_set(err, HEARTH_ELIMIT, "%s: line %d: token of %zu bytes (max %d)", path,
                                (int)id + 1, line_len, HEARTH_VOCAB_TXT_MAX_TOKEN);
            goto fail;
        }
        rc = hearth_utf8_validate(line, line_len, err);
        if (rc) {
            hearth_err_prefix(err, "%s: line %d", path, (int)id + 1);
            goto fail;
        }
        rc = hearth_vocab_set_token(v, id, line, line_len, err);
        if (rc) {
            hearth_err_prefix(err, "%s", path);
            goto fail;
        }
    }
    rc = hearth_vocab_finish(v, err);
    if (rc) {
        hearth_err_prefix(err, "%s", path);
        goto fail;
    }
    int32_t *special[5] = {&v->unk, &v->cls, &v->sep, &v->pad, &v->mask};
    for (int k = 0; k < 5; k++)
        *special[k] = hearth_vocab_find(v, special_text[k], strlen(special_text[k]));
    snprintf(v->model, sizeof v->model, "bert");
    free(data);
    return HEARTH_OK;
fail:
    free(data);
    hearth_vocab_deinit(v);
    return rc;
}
