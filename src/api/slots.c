/* slots.c: llama-server's slot routes. GET /slots (with --slots) lists the
 * KV-cache slots of the first generation model; POST /slots/{id}?action=
 * save|restore|erase (with --slot-save-path DIR) writes a slot's cache to
 * DIR/<filename>, reads one back, or empties the slot.
 *
 * The list is a snapshot from the scheduler (hearth_gen_sched_slots), in
 * llama-server's shape: id, n_ctx, is_processing, speculative and
 * non_causal (false: hearth has neither), params (the sampling of the
 * request in the slot, or of the last one; the server's defaults for a slot
 * never used), prompt (the live request's, as text; left out when idle,
 * where llama-server shows the last prompt and hearth no longer has it) and
 * next_token (has_next_token, n_remain, n_decoded). hearth's cache has
 * --parallel + --cache-slots slots, any of which may run a request (it takes
 * the idle one holding the longest prefix of its prompt), at most --parallel
 * at once; the list has llama-server's length, --parallel: every slot
 * running a request, then idle ones by id, each under its own id (so an id
 * may be past --parallel - 1; a completion's id_slot may name any slot).
 * Rejected: listing every slot (clients, llama.cpp's tests among them, read
 * the list's length as --parallel); listing slots 0..--parallel-1 only (a
 * running request could be missing from it). ?fail_on_no_slot=1 answers 503
 * when --parallel requests are running, as llama-server when none is idle.
 *
 * Actions run as jobs on the scheduler thread (it owns the cache), on an
 * idle slot only: a busy one is a 409 (llama-server waits for it instead;
 * an answer now lets the client choose). Errors as llama-server's: 501 with
 * no --slot-save-path, 400 for a bad slot id, action or filename. A
 * filename is one path component: 1..255 bytes of valid UTF-8, no control
 * character, none of / \ : * ? " < > |, not starting with '.' or ' ' (no
 * "..", no hidden files) nor ending with '.' or ' '. Rejected: accepting
 * sub-folders (every check a path walk needs, for a feature no client uses). */
#include "gen_common.h"
#include "respond.h"

#include "base/clock.h"
#include "text/unicode.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ACT_SAVE, ACT_RESTORE, ACT_ERASE };

typedef struct slot_job {
    hearth_gen_slot_job job;   /* first: the scheduler hands back this pointer */
    hearth_server *server;
    hearth_reply reply;
    hearth_gen_entry *model;
    int action;
    int err_code, err_sys;     /* the failure's hearth_err code and errno */
    int64_t n_tokens;          /* saved, restored or erased */
    size_t bytes;
    double ms;
    char filename[256];
    char path[4352];
} slot_job;

/* The value of key in the query string, copied to out (n bytes); false when absent. */
static bool query_value(hearth_request *req, const char *key, char *out, size_t n)
{
    size_t qlen;
    const char *q = hearth_request_query(req, &qlen);
    size_t klen = strlen(key);
    for (size_t i = 0; i + klen < qlen; i++) {
        if ((i == 0 || q[i - 1] == '&') && !strncmp(q + i, key, klen) && q[i + klen] == '=') {
            size_t start = i + klen + 1, end = start;
            while (end < qlen && q[end] != '&')
                end++;
            snprintf(out, n, "%.*s", (int)(end - start), q + start);
            return true;
        }
    }
    return false;
}

/* Why name is not a plain file name, or NULL when it is one. */
static const char *bad_filename(const char *name)
{
    size_t n = strlen(name);
    if (n == 0)
        return "it is empty";
    if (n > 255)
        return "it is longer than 255 bytes";
    if (hearth_utf8_validate(name, n, NULL) != HEARTH_OK)
        return "it is not valid UTF-8";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c < 0x20 || c == 0x7f)
            return "it holds a control character";
        if (strchr("/\\:*?\"<>|", c))
            return "it holds one of / \\ : * ? \" < > | (a file name, not a path)";
    }
    if (name[0] == '.' || name[0] == ' ')
        return "it starts with '.' or ' '";
    if (name[n - 1] == '.' || name[n - 1] == ' ')
        return "it ends with '.' or ' '";
    return NULL;
}

static int job_run(hearth_gen_slot_job *job, int32_t *tokens, int64_t *n, int64_t cap, char *msg, size_t msg_size)
{
    slot_job *j = (slot_job *)job;
    hearth_decoder *d = j->model->dec;
    hearth_err err = {0};
    uint64_t t0 = hearth_now_ns();
    int rc = 0;
    switch (j->action) {
    case ACT_SAVE:
        rc = hearth_decoder_slot_save(d, job->slot, tokens, *n, j->path, &j->bytes, &err);
        j->n_tokens = *n;
        break;
    case ACT_RESTORE:
        rc = hearth_decoder_slot_restore(d, job->slot, j->path, tokens, cap, n, &j->bytes, &err);
        j->n_tokens = *n;
        break;
    default: {
        const hearth_gen_batch_model *bm = hearth_decoder_batch_model(d);
        j->n_tokens = *n;
        *n = bm->truncate(bm->ctx, job->slot, 0);
        break;
    }
    }
    j->ms = (double)(hearth_now_ns() - t0) / 1e6;
    j->err_code = err.code;
    j->err_sys = err.sys;
    if (rc)
        snprintf(msg, msg_size, "%s", err.msg[0] ? err.msg : hearth_status_name(rc));
    return rc;
}

static void job_done(hearth_gen_slot_job *job, int status, const char *msg)
{
    slot_job *j = (slot_job *)job;
    if (status) {
        int http = status == HEARTH_ELIMIT ? 409 : status == HEARTH_ENOTFOUND ? 503 : status == HEARTH_EINVAL ? 400 : 500;
        const char *type = http == 409 || http == 400 ? "invalid_request_error" : http == 503 ? "unavailable_error" : "server_error";
        /* a restore of a file that is not there is the client's mistake */
        if (j->action == ACT_RESTORE && status == HEARTH_EIO && j->err_sys == ENOENT) {
            http = 400;
            type = "invalid_request_error";
        }
        hearth_reply_error(j->server, j->reply, http, type, msg);
        free(j);
        return;
    }
    hearth_buf out;
    hearth_buf_init(&out, 4096);
    int rc;
    if (j->action == ACT_ERASE) {
        rc = hearth_buf_printf(&out, "{\"id_slot\":%d,\"n_erased\":%lld}", job->slot, (long long)j->n_tokens);
    } else {
        bool save = j->action == ACT_SAVE;
        rc = hearth_buf_printf(&out, "{\"id_slot\":%d,\"filename\":", job->slot);
        if (!rc)
            rc = hearth_json_quote(&out, j->filename, strlen(j->filename));
        if (!rc)
            rc = hearth_buf_printf(&out, ",\"%s\":%lld,\"%s\":%zu,\"timings\":{\"%s\":%.3f}}", save ? "n_saved" : "n_restored",
                                   (long long)j->n_tokens, save ? "n_written" : "n_read", j->bytes,
                                   save ? "save_ms" : "restore_ms", j->ms);
    }
    if (rc) {
        hearth_reply_error(j->server, j->reply, 500, "server_error", "the answer did not fit in memory");
    } else {
        hearth_response res = {200, "application/json", NULL, out.data, out.len};
        hearth_reply_send(j->server, j->reply, &res);
    }
    hearth_buf_deinit(&out);
    free(j);
}

/* POST /slots/{id}?action=save|restore|erase, {"filename": "x.bin"} for save and restore. */
static void slot_action(hearth_request *req, void *ctx)
{
    hearth_api *api = ctx;
    const char *dir = api->cfg.slot_save_path;
    if (!dir || !*dir) {
        hearth_respond_error(req, 501, "not_supported_error",
                             "this server does not support slot actions: start it with --slot-save-path DIR");
        return;
    }
    size_t idn;
    const char *idp = hearth_request_rest(req, &idn);
    char idbuf[16];
    char *end = NULL;
    snprintf(idbuf, sizeof idbuf, "%.*s", (int)(idn < 15 ? idn : 15), idp);
    long id = idn && idn < 10 ? strtol(idbuf, &end, 10) : -1;
    if (!end || *end || id < 0) {
        hearth_respond_error(req, 400, "invalid_request_error", "invalid slot id '%.*s': want a number", (int)(idn < 64 ? idn : 64), idp);
        return;
    }
    char action[16] = "";
    query_value(req, "action", action, sizeof action);
    int act = !strcmp(action, "save") ? ACT_SAVE : !strcmp(action, "restore") ? ACT_RESTORE : !strcmp(action, "erase") ? ACT_ERASE : -1;
    if (act < 0) {
        hearth_respond_error(req, 400, "invalid_request_error", "invalid action '%s': want ?action=save, restore or erase", action);
        return;
    }
    hearth_gen_entry *m = hearth_gen_find_or_respond(req, api, NULL);
    if (!m)
        return;
    slot_job *j = calloc(1, sizeof *j);
    if (!j) {
        hearth_respond_error(req, 503, "unavailable_error", "out of memory");
        return;
    }
    if (act != ACT_ERASE) {
        cJSON *doc = hearth_gen_parse_body(req);
        if (!doc) {
            free(j);
            return;
        }
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(doc, "filename");
        const char *why = cJSON_IsString(f) ? bad_filename(f->valuestring) : "'filename' must be a string";
        if (!why)
            snprintf(j->filename, sizeof j->filename, "%s", f->valuestring);
        cJSON_Delete(doc);
        if (why) {
            hearth_respond_error(req, 400, "invalid_request_error", "invalid filename: %s", why);
            free(j);
            return;
        }
        size_t dl = strlen(dir);
        snprintf(j->path, sizeof j->path, "%s%s%s", dir, dl && dir[dl - 1] == '/' ? "" : "/", j->filename);
    }
    j->job.slot = (int)id;
    j->job.run = job_run;
    j->job.on_done = job_done;
    j->action = act;
    j->model = m;
    j->server = api->server;
    hearth_err err = {0};
    /* checked before deferring, so a bad id is an ordinary answer */
    if (id >= hearth_gen_sched_n_slots(m->sched)) {
        hearth_respond_error(req, 400, "invalid_request_error", "invalid slot id %ld: this server has slots 0..%d", id,
                             hearth_gen_sched_n_slots(m->sched) - 1);
        free(j);
        return;
    }
    j->reply = hearth_request_defer(req, NULL, NULL);
    if (hearth_gen_sched_slot_job(m->sched, &j->job, &err) != 0) {
        hearth_reply_error(api->server, j->reply, err.code == HEARTH_EINVAL ? 400 : 503,
                           err.code == HEARTH_EINVAL ? "invalid_request_error" : "unavailable_error", err.msg);
        free(j);
    }
}

/* One slot's object of the GET /slots list. */
static int append_slot(hearth_buf *out, hearth_gen_entry *m, const hearth_gen_slot_info *si)
{
    hearth_gen_req shown = {.n_predict = m->n_predict, .cache_prompt = true, .sampling = m->sampling};
    if (si->used) {
        shown.sampling = si->sampling;
        shown.n_predict = si->n_predict;
        shown.n_probs = si->n_probs;
        shown.cache_prompt = si->cache_prompt;
    }
    int rc = hearth_buf_printf(out, "{\"id\":%d,\"n_ctx\":%lld,\"speculative\":false,\"is_processing\":%s,\"non_causal\":false,"
                                    "\"params\":",
                               si->id, (long long)si->n_ctx, si->processing ? "true" : "false");
    if (!rc)
        rc = hearth_gen_append_settings(out, &shown, si->used ? si->grammar : NULL);
    if (!rc && si->prompt) {
        hearth_buf text;
        hearth_buf_init(&text, (size_t)64 << 20);
        rc = hearth_tokenizer_decode(hearth_decoder_tokenizer(m->dec), si->prompt, (size_t)si->n_prompt, true, &text);
        if (!rc)
            rc = hearth_buf_appends(out, ",\"prompt\":");
        if (!rc)
            rc = hearth_json_quote(out, text.data ? text.data : "", text.len);
        hearth_buf_deinit(&text);
    }
    long long remain = shown.n_predict < 0 ? -1 : (long long)shown.n_predict - (long long)si->n_decoded;
    if (!rc)
        rc = hearth_buf_printf(out, ",\"next_token\":{\"has_next_token\":%s,\"n_remain\":%lld,\"n_decoded\":%lld}}",
                               si->processing ? "true" : "false", remain, (long long)si->n_decoded);
    return rc;
}

/* GET /slots: 501 without --slots, as llama-server's. */
static void slots_list(hearth_request *req, void *ctx)
{
    hearth_api *api = ctx;
    if (!api->cfg.slots) {
        hearth_respond_error(req, 501, "not_supported_error",
                             "this server does not support the slots endpoint: start it with --slots");
        return;
    }
    hearth_gen_entry *m = hearth_gen_find_or_respond(req, api, NULL);
    if (!m)
        return;
    int n_slots = hearth_gen_sched_n_slots(m->sched);
    hearth_gen_slot_info *info = calloc((size_t)n_slots, sizeof *info);
    int n = info ? hearth_gen_sched_slots(m->sched, info, n_slots) : HEARTH_ENOMEM;
    if (n < 0) {
        free(info);
        hearth_respond_error(req, 503, "unavailable_error", "out of memory");
        return;
    }
    char fail[8] = "";
    int n_show = m->n_parallel < n ? m->n_parallel : n, n_busy = 0;
    for (int i = 0; i < n; i++)
        n_busy += info[i].processing;
    if (query_value(req, "fail_on_no_slot", fail, sizeof fail) && strcmp(fail, "0") != 0 && strcmp(fail, "false") != 0 &&
        n_busy >= n_show) {
        for (int i = 0; i < n; i++) {
            free(info[i].prompt);
            free(info[i].grammar);
        }
        free(info);
        hearth_respond_error(req, 503, "unavailable_error", "no slot available");
        return;
    }
    hearth_buf out;
    hearth_buf_init(&out, (size_t)256 << 20);
    int rc = hearth_buf_appends(&out, "[");
    int idle_left = n_show - n_busy, shown = 0;
    for (int i = 0; i < n && !rc; i++) {
        if (!info[i].processing && idle_left-- <= 0)
            continue;
        if (shown++)
            rc = hearth_buf_appends(&out, ",");
        if (!rc)
            rc = append_slot(&out, m, &info[i]);
    }
    if (!rc)
        rc = hearth_buf_appends(&out, "]");
    for (int i = 0; i < n; i++) {
        free(info[i].prompt);
        free(info[i].grammar);
    }
    free(info);
    hearth_api_send_buf(req, &out, rc, "answer");
    hearth_buf_deinit(&out);
}

int hearth_api_register_slots(hearth_api *api, hearth_server *s)
{
    int rc = hearth_server_route(s, "GET", "/slots", slots_list, api);
    if (!rc)
        rc = hearth_server_route(s, "POST", "/slots/{id}", slot_action, api);
    return rc;
}
