#ifndef STENO_OPUS_H
#define STENO_OPUS_H
#include <opus.h>

/* opus_decoder_ctl is variadic, which Swift cannot call: reset a decoder's state. */
int steno_opus_decoder_reset(OpusDecoder *dec);
/* opus_decoder_ctl is variadic: duration in samples of the last decoded packet. */
int steno_opus_decoder_last_packet_duration(OpusDecoder *dec, opus_int32 *out);
/* opus_encoder_ctl is variadic: set the bitrate (bits per second). */
int steno_opus_encoder_set_bitrate(OpusEncoder *enc, opus_int32 bitrate);
/* opus_encoder_ctl is variadic: set the complexity (0-10). */
int steno_opus_encoder_set_complexity(OpusEncoder *enc, opus_int32 complexity);
/* opus_encoder_ctl is variadic: the encoder's look-ahead in samples. */
int steno_opus_encoder_lookahead(OpusEncoder *enc, opus_int32 *out);
/* opus_encoder_ctl is variadic: discontinuous transmission on (1) or off (0). */
int steno_opus_encoder_set_dtx(OpusEncoder *enc, opus_int32 on);

#endif
