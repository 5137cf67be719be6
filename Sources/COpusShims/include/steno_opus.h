#ifndef STENO_OPUS_H
#define STENO_OPUS_H
#include <opus.h>

/* opus_decoder_ctl is variadic, which Swift cannot call: reset a decoder's state. */
int steno_opus_decoder_reset(OpusDecoder *dec);
/* opus_encoder_ctl is variadic: set the bitrate (bits per second). */
int steno_opus_encoder_set_bitrate(OpusEncoder *enc, opus_int32 bitrate);
/* opus_encoder_ctl is variadic: the encoder's look-ahead in samples (the tests align decoded
 * audio with it). */
int steno_opus_encoder_lookahead(OpusEncoder *enc, opus_int32 *out);
/* opus_encoder_ctl is variadic: discontinuous transmission on (1) or off (0). */
int steno_opus_encoder_set_dtx(OpusEncoder *enc, opus_int32 on);

#endif
