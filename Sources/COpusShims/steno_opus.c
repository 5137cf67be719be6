#include "steno_opus.h"

int steno_opus_decoder_reset(OpusDecoder *dec) { return opus_decoder_ctl(dec, OPUS_RESET_STATE); }
int steno_opus_encoder_set_bitrate(OpusEncoder *enc, opus_int32 bitrate) {
    return opus_encoder_ctl(enc, OPUS_SET_BITRATE(bitrate));
}
int steno_opus_encoder_lookahead(OpusEncoder *enc, opus_int32 *out) {
    return opus_encoder_ctl(enc, OPUS_GET_LOOKAHEAD(out));
}
int steno_opus_encoder_set_dtx(OpusEncoder *enc, opus_int32 on) {
    return opus_encoder_ctl(enc, OPUS_SET_DTX(on));
}
