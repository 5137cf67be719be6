#include "steno_ps.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sphinxbase/err.h>
#include <sphinxbase/ngram_model.h>

static _Atomic(FILE *) steno_ps_log = NULL;
static _Thread_local char steno_ps_error[512];

static void steno_ps_log_callback(void *user_data, err_lvl_t level, const char *fmt, ...) {
    (void)user_data;
    FILE *out = atomic_load(&steno_ps_log);
    int keep = level >= ERR_ERROR;
    if (out == NULL && !keep)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (keep) {
        size_t n = strlen(line);
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        size_t used = strlen(steno_ps_error);
        if (used == 0)
            snprintf(steno_ps_error, sizeof steno_ps_error, "%s", line);
        else if (used + 3 < sizeof steno_ps_error)
            snprintf(steno_ps_error + used, sizeof steno_ps_error - used, "; %s", line);
    }
    if (out != NULL)
        fputs(line, out);
}

void steno_ps_install_log_callback(void) {
    err_set_callback(steno_ps_log_callback, NULL);
}

int steno_ps_set_log_file(const char *path) {
    FILE *out = NULL;
    if (path != NULL) {
        out = fopen(path, "a");
        if (out == NULL)
            return -1;
        setvbuf(out, NULL, _IOLBF, 0);
    }
    /* sphinxbase also prints some things (the configuration) straight to its own log
       stream; NULL there disables them. */
    err_set_logfp(out);
    /* The previous file is flushed but never closed: another thread may be writing to it. */
    FILE *old = atomic_exchange(&steno_ps_log, out);
    if (old != NULL)
        fflush(old);
    return 0;
}

const char *steno_ps_last_error(void) { return steno_ps_error; }

void steno_ps_clear_last_error(void) { steno_ps_error[0] = '\0'; }

/* The leading fields of pocketsphinx_internal.h's ps_decoder_s, ps_search_s and
   ps_searchfuncs_s in 0.8+5prealpha+1 (the structures themselves are private). */
struct steno_ps_searchfuncs {
    int (*start)(void *search);
    int (*step)(void *search, int frame_idx);
    int (*finish)(void *search);
    int (*reinit)(void *search, void *dict, void *d2p);
};

struct steno_ps_search {
    struct steno_ps_searchfuncs *vt;
    char *type;
    char *name;
    void *pls;
    cmd_ln_t *config;
    void *acmod;
    void *dict;
    void *d2p;
    char *hyp_str;
    void *dag;
    void *last_link;
    int32 post;
    int32 n_words;
    int32 start_wid;
    int32 silence_wid;
    int32 finish_wid;
};

/* The leading fields of ngram_search.h's ngram_search_s. */
struct steno_ngram_search {
    struct steno_ps_search base;
    ngram_model_t *lmset;
    void *hmmctx;
    uint8 fwdtree;
    uint8 fwdflat;
    uint8 bestpath;
    uint8 done;
};

struct steno_ps_decoder {
    cmd_ln_t *config;
    int refcount;
    void *acmod;
    void *dict;
    void *d2p;
    logmath_t *lmath;
    void *searches;
    struct steno_ps_search *search;
};

int steno_ps_layout_ok(ps_decoder_t *ps) {
    struct steno_ps_decoder *d = (struct steno_ps_decoder *)ps;
    if (ps == NULL || d->config != ps_get_config(ps) || d->lmath != ps_get_logmath(ps))
        return 0;
    struct steno_ps_search *s = d->search;
    const char *name = ps_get_search(ps);
    if (s == NULL || name == NULL || s->name == NULL || strcmp(s->name, name) != 0)
        return 0;
    if (s->type == NULL || strcmp(s->type, "ngram") != 0)
        return 0;
    return s->config == d->config && s->dict == d->dict && s->d2p == d->d2p && s->vt != NULL && s->vt->reinit != NULL;
}

int steno_ps_reinit_search(ps_decoder_t *ps) {
    if (!steno_ps_layout_ok(ps))
        return -1;
    struct steno_ps_decoder *d = (struct steno_ps_decoder *)ps;
    return d->search->vt->reinit(d->search, d->dict, d->d2p);
}

/* The active n-gram search, when its layout is the known one and its flags are those of the
   decoder's configuration. */
static struct steno_ngram_search *steno_ps_ngram_search(ps_decoder_t *ps) {
    if (!steno_ps_layout_ok(ps))
        return NULL;
    struct steno_ps_decoder *d = (struct steno_ps_decoder *)ps;
    struct steno_ngram_search *ngs = (struct steno_ngram_search *)d->search;
    cmd_ln_t *config = ps_get_config(ps);
    if (ngs->base.acmod != d->acmod || ngs->lmset == NULL || ngs->lmset != ps_get_lm(ps, ps_get_search(ps)))
        return NULL;
    if (ngs->fwdtree != (cmd_ln_boolean_r(config, "-fwdtree") ? 1 : 0)
        || ngs->fwdflat != (cmd_ln_boolean_r(config, "-fwdflat") ? 1 : 0)
        || ngs->bestpath != (cmd_ln_boolean_r(config, "-bestpath") ? 1 : 0) || ngs->done > 1)
        return NULL;
    return ngs;
}

ps_seg_t *steno_ps_first_pass_seg_iter(ps_decoder_t *ps) {
    struct steno_ngram_search *ngs = steno_ps_ngram_search(ps);
    if (ngs == NULL)
        return NULL;
    uint8 bestpath = ngs->bestpath;
    ngs->bestpath = 0;
    ps_seg_t *seg = ps_seg_iter(ps);
    ngs->bestpath = bestpath;
    return seg;
}
