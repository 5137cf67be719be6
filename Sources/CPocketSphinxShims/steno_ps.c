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

/* hmm.h's hmm_t and ngram_search.h's root_chan_t. */
struct steno_ps_hmm {
    void *ctx;
    int32 score[5];
    int32 history[5];
    int32 out_score;
    int32 out_history;
    uint16 ssid;
    uint16 senid[5];
    int32 bestscore;
    int16 tmatid;
    int32 frame;
    uint8 mpx;
    uint8 n_emit_state;
};

struct steno_ps_root_chan {
    struct steno_ps_hmm hmm;
    void *next;
    int32 penult_phn_wid;
    int32 this_phn_wid;
    int16 ciphone;
    int16 ci2phone;
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
    void *chan_alloc;
    void *root_chan_alloc;
    void *latnode_alloc;
    struct steno_ps_root_chan *root_chan;
    int32 n_root_chan_alloc;
    int32 n_root_chan;
    int32 n_nonroot_chan;
    int32 max_nonroot_chan;
    struct steno_ps_root_chan *rhmm_1ph;
    struct steno_ps_root_chan **word_chan;
    void *word_active;
    int32 *homophone_set;
    int32 *single_phone_wid;
    int32 n_1ph_words;
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

/* A multiplexed HMM's states after the first take their senone sequence from the path that
   enters them, and hmm_clear leaves the last ones there; this puts them back as hmm_init made
   them. 1 if it was a multiplexed HMM of the search, else 0. */
static int steno_ps_reset_mpx(struct steno_ngram_search *ngs, struct steno_ps_hmm *hmm) {
    if (hmm == NULL || hmm->ctx != ngs->hmmctx || hmm->mpx != 1 || hmm->n_emit_state < 1 || hmm->n_emit_state > 5)
        return 0;
    for (int i = 1; i < hmm->n_emit_state; ++i)
        hmm->senid[i] = 0xffff; /* BAD_SSID */
    return 1;
}

int steno_ps_reset_search_hmms(ps_decoder_t *ps) {
    struct steno_ngram_search *ngs = steno_ps_ngram_search(ps);
    if (ngs == NULL || ngs->hmmctx == NULL || ngs->root_chan == NULL || ngs->n_root_chan < 0
        || ngs->n_root_chan > ngs->n_root_chan_alloc || ngs->word_chan == NULL || ngs->single_phone_wid == NULL
        || ngs->n_1ph_words < 0 || ngs->n_1ph_words > ngs->base.n_words)
        return -1;
    /* Check every one before changing any: a layout this does not know changes nothing. */
    for (int i = 0; i < ngs->n_root_chan; ++i) {
        struct steno_ps_hmm *hmm = &ngs->root_chan[i].hmm;
        if (hmm->ctx != ngs->hmmctx || hmm->mpx != 1)
            return -1;
    }
    for (int i = 0; i < ngs->n_1ph_words; ++i) {
        int32 wid = ngs->single_phone_wid[i];
        if (wid < 0 || wid >= ngs->base.n_words || ngs->word_chan[wid] == NULL || ngs->word_chan[wid]->hmm.ctx != ngs->hmmctx)
            return -1;
    }
    int reset = 0;
    for (int i = 0; i < ngs->n_root_chan; ++i)
        reset += steno_ps_reset_mpx(ngs, &ngs->root_chan[i].hmm);
    for (int i = 0; i < ngs->n_1ph_words; ++i)
        reset += steno_ps_reset_mpx(ngs, &ngs->word_chan[ngs->single_phone_wid[i]]->hmm);
    return reset;
}
