#ifndef STENO_AV_H
#define STENO_AV_H

#include <stddef.h>
#include <stdint.h>

/// Decodes an audio file held in memory (any container and codec FFmpeg reads: WAV, FLAC,
/// Ogg/Opus, MP3, M4A, WebM …) to mono float samples at `rate` Hz. One call does the whole
/// file: FFmpeg's demuxer, decoder and resampler take a dozen calls and three contexts, each
/// freed on every path; Swift gets one function and one buffer.
/// Returns 0 with `*samples` (free it with steno_av_free) and `*count`; -1 with a message in
/// `error` when the bytes are not audio FFmpeg can read; -2 when the audio is longer than
/// `max_seconds` (0: no limit).
int steno_av_decode(const uint8_t *data, size_t size, int rate, double max_seconds,
                    float **samples, size_t *count, char *error, size_t error_size);

void steno_av_free(float *samples);

#endif
