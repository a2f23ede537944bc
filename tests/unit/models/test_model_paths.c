/* Model paths that are not regular files (issue 16, defect 8): a FIFO where a
 * GGUF, a model.safetensors or one of a folder's JSON or vocab files is
 * expected, a directory named .gguf, /dev/zero. open(2) of a FIFO blocks
 * until a writer comes, so a loader that opened one the plain way hung at
 * "loading" for good; every loader must refuse each at once with a message
 * naming the path and what it is. An alarm of 5 s, armed before the loads
 * of each case, turns a regression (a hang) into a failure instead of a
 * stuck test run. */
#include "harness.h"

#include "models/bert.h"
#include "models/bert_demo.h"
#include "models/gguf.h"
#include "models/hf_folder.h"
#include "models/llama.h"
#include "models/safetensors.h"

#include <ftw.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

static char root[] = "/tmp/hearth-paths-XXXXXX";

static void on_alarm(int sig)
{
    static const char msg[] = "not ok - a loader blocked on a path that is not a regular file (alarm)\n";
    (void)!write(1, msg, sizeof msg - 1);
    _exit(1);
}

static const char *sub(const char *name)
{
    static char path[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(path[k], sizeof path[k], "%s/%s", root, name);
    return path[k];
}

/* The message is an error naming path and kind ("a FIFO"). */
static void expect_refused(int rc, const hearth_err *e, const char *path, const char *kind)
{
    CHECK_MSG(rc == HEARTH_EINVAL, "%s: got %d (%s), want EINVAL", path, rc, e->msg);
    CHECK_MSG(strstr(e->msg, path) != NULL, "message lacks the path %s: %s", path, e->msg);
    char want[64];
    snprintf(want, sizeof want, "not a regular file: %s", kind);
    CHECK_MSG(strstr(e->msg, want) != NULL, "message lacks '%s': %s", want, e->msg);
}

static void gguf_fifo(void)
{
    alarm(5);
    const char *path = sub("fifo.gguf");
    CHECK(mkfifo(path, 0600) == 0);
    hearth_err e = {0};
    hearth_gguf g;
    expect_refused(hearth_gguf_open(&g, path, &e), &e, path, "a FIFO");
    hearth_gguf_close(&g);
    hearth_llama *m = NULL;
    e = (hearth_err){0};
    expect_refused(hearth_llama_open(&m, path, &e), &e, path, "a FIFO");
    CHECK(m == NULL);
    hearth_bert *b = NULL;
    e = (hearth_err){0};
    expect_refused(hearth_bert_open(&b, path, HEARTH_BERT_F32, &e), &e, path, "a FIFO");
    CHECK(b == NULL);
}

static void gguf_directory_and_device(void)
{
    alarm(5);
    const char *dir = sub("dir.gguf");
    CHECK(mkdir(dir, 0700) == 0);
    hearth_err e = {0};
    hearth_gguf g;
    expect_refused(hearth_gguf_open(&g, dir, &e), &e, dir, "a directory");
    hearth_gguf_close(&g);
    e = (hearth_err){0};
    expect_refused(hearth_gguf_open(&g, "/dev/zero", &e), &e, "/dev/zero", "a character device");
    hearth_gguf_close(&g);
    hearth_llama *m = NULL;
    e = (hearth_err){0};
    expect_refused(hearth_llama_open(&m, "/dev/null", &e), &e, "/dev/null", "a character device");
}

static void safetensors_fifo(void)
{
    alarm(5);
    const char *path = sub("fifo.safetensors");
    CHECK(mkfifo(path, 0600) == 0);
    hearth_err e = {0};
    hearth_st st;
    expect_refused(hearth_st_open(&st, path, &e), &e, path, "a FIFO");
    hearth_st_close(&st);
}

/* A demo folder with file replaced by a FIFO: the folder loader (and bert
 * through it) refuses it naming that file. */
static void folder_with_fifo(const char *name, const char *file)
{
    hearth_bert_demo_shape s = {
        .vocab_size = 300, .hidden_size = 32, .num_hidden_layers = 1, .num_attention_heads = 4,
        .intermediate_size = 64, .max_position_embeddings = 64, .type_vocab_size = 2, .layer_norm_eps = 1e-12f,
        .max_seq_len = 48, .tokenizer_json = true, .pooling = HEARTH_POOL_MEAN, .normalize = true,
    };
    const char *dir = sub(name);
    hearth_err e = {0};
    CHECK_MSG(hearth_bert_demo_write(dir, &s, 3, &e) == 0, "%s", e.msg);
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    CHECK(unlink(path) == 0 && mkfifo(path, 0600) == 0);
    alarm(5);
    hearth_hf_folder f;
    e = (hearth_err){0};
    expect_refused(hearth_hf_folder_open(&f, dir, &e), &e, path, "a FIFO");
    hearth_hf_folder_close(&f);
    hearth_bert *b = NULL;
    e = (hearth_err){0};
    expect_refused(hearth_bert_open(&b, dir, HEARTH_BERT_F32, &e), &e, path, "a FIFO");
    CHECK(b == NULL);
}

static void folder_files(void)
{
    folder_with_fifo("f_config", "config.json");
    folder_with_fifo("f_weights", "model.safetensors");
    folder_with_fifo("f_tokenizer", "tokenizer.json");
    folder_with_fifo("f_modules", "modules.json");
    folder_with_fifo("f_pooling", "1_Pooling/config.json");
    folder_with_fifo("f_seq", "sentence_bert_config.json");
    folder_with_fifo("f_tokcfg", "tokenizer_config.json");
}

/* With no tokenizer.json, vocab.txt is read: a FIFO there is refused too. */
static void folder_vocab_txt(void)
{
    hearth_bert_demo_shape s = {
        .vocab_size = 300, .hidden_size = 32, .num_hidden_layers = 1, .num_attention_heads = 4,
        .intermediate_size = 64, .max_position_embeddings = 64, .type_vocab_size = 2, .layer_norm_eps = 1e-12f,
        .max_seq_len = 48, .tokenizer_json = false, .pooling = HEARTH_POOL_MEAN, .normalize = true,
    };
    const char *dir = sub("f_vocab");
    hearth_err e = {0};
    CHECK_MSG(hearth_bert_demo_write(dir, &s, 3, &e) == 0, "%s", e.msg);
    char path[600];
    snprintf(path, sizeof path, "%s/vocab.txt", dir);
    CHECK(unlink(path) == 0 && mkfifo(path, 0600) == 0);
    alarm(5);
    hearth_hf_folder f;
    e = (hearth_err){0};
    expect_refused(hearth_hf_folder_open(&f, dir, &e), &e, path, "a FIFO");
    hearth_hf_folder_close(&f);
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    return remove(p);
}

int main(void)
{
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    signal(SIGALRM, on_alarm);
    RUN(gguf_fifo);
    RUN(gguf_directory_and_device);
    RUN(safetensors_fifo);
    RUN(folder_files);
    RUN(folder_vocab_txt);
    alarm(0);
    nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    TEST_EXIT();
}
