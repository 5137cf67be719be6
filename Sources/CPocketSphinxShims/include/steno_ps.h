#ifndef STENO_PS_H
#define STENO_PS_H

#include <pocketsphinx.h>

/* sphinxbase reports through err_cb_f, a variadic callback type that Swift cannot implement.
   This installs one (once per process) that keeps the errors of the calling
   thread, so that a failed ps_init can say why, and that writes every message to the log
   file set below, or nowhere. */
void steno_ps_install_log_callback(void);

/* Where the callback above writes pocketsphinx messages: a file opened for appending, or
   nothing when path is NULL; also sphinxbase's own log stream (err_set_logfp), which it
   prints its configuration to. Process-wide; call it while no decoder is being made.
   Returns 0, or -1 if the file cannot be opened (logging is then left as it was). */
int steno_ps_set_log_file(const char *path);

/* The errors pocketsphinx reported on the calling thread since the last
   steno_ps_clear_last_error(), joined by "; " (at most 511 bytes), or "" if none. Valid until
   the next message on this thread. */
const char *steno_ps_last_error(void);
void steno_ps_clear_last_error(void);

/* A session's vocabulary changes which words the decoder's language model knows, and the
   search's lexicon tree holds only known words; pocketsphinx rebuilds that tree only inside
   ps_add_word (which also adds the word to every language model) or ps_load_dict. These two
   call the active search's own rebuild through the decoder layout of pocketsphinx
   0.8+5prealpha+1 (Debian 12), after checking that layout against the public getters. */

/* 1 when the decoder's layout is the one steno_ps_reinit_search expects (its configuration,
   logmath and active n-gram search are where they should be), else 0. */
int steno_ps_layout_ok(ps_decoder_t *ps);

/* Rebuilds the active search for the decoder's dictionary and language model (what
   ps_add_word does with update=TRUE), without adding a word anywhere. Returns <0 on error,
   or when steno_ps_layout_ok says no. */
int steno_ps_reinit_search(ps_decoder_t *ps);

/* The best path of the search's own backpointer table (the one partial results show), for an
   utterance that has ended but whose lattice has no end to find a best path to, so that
   ps_seg_iter gives NULL: with -fwdflat no, an utterance cut where its last frames have no
   word exit (pocketsphinx then takes the best exit before them, a </s>, and finds no lattice
   node for it, since the lattice keeps only the last frame's </s>). ps_seg_iter does not
   fall back to this path by itself once the utterance is done; this asks it with the
   search's bestpath flag off for the call. Its segments carry no posterior (ps_seg_prob gives
   0). NULL when there is no path, or the search's layout is not the known one. */
ps_seg_t *steno_ps_first_pass_seg_iter(ps_decoder_t *ps);

/* Puts the first pass's multiplexed HMMs (the roots of the lexicon tree and the single-phone
   words) back as a fresh decoder has them. Their states after the first keep the senone
   sequence of the last path that entered them (hmm_clear does not reset it), and the search
   activates those senones whenever the HMM is active: a decoder that has searched before
   evaluates more senones than a fresh one, which with a PTM model makes more codebooks'
   top-N exact and so changes other senones' scores a little. With -fwdflat yes the second
   pass hides it; with -fwdflat no some words' posteriors depended on what the decoder had
   recognized before (measured: cards/001.wav, 248,065 senones evaluated fresh, 249,389
   after any other utterance). Call it before ps_start_utt. Returns how many HMMs it reset,
   or -1 (nothing changed) when the search's layout is not the known one. */
int steno_ps_reset_search_hmms(ps_decoder_t *ps);

#endif
