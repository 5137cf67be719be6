#include "steno_av.h"

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>
#include <libavutil/opt.h>
#include <libswresample/swresample.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct memory { const uint8_t *data; size_t size; size_t position; };

static int read_memory(void *opaque, uint8_t *buffer, int wanted) {
    struct memory *m = opaque;
    size_t left = m->size - m->position;
    if (left == 0) return AVERROR_EOF;
    size_t n = (size_t)wanted < left ? (size_t)wanted : left;
    memcpy(buffer, m->data + m->position, n);
    m->position += n;
    return (int)n;
}

static int64_t seek_memory(void *opaque, int64_t offset, int whence) {
    struct memory *m = opaque;
    if (whence == AVSEEK_SIZE) return (int64_t)m->size;
    int64_t base = whence == SEEK_CUR ? (int64_t)m->position : whence == SEEK_END ? (int64_t)m->size : 0;
    int64_t target = base + offset;
    if (target < 0 || target > (int64_t)m->size) return -1;
    m->position = (size_t)target;
    return target;
}

struct output { float *samples; size_t count; size_t capacity; };

static int grow(struct output *out, size_t more) {
    if (out->count + more <= out->capacity) return 0;
    size_t capacity = out->capacity ? out->capacity : 16000;
    while (capacity < out->count + more) capacity *= 2;
    float *bigger = realloc(out->samples, capacity * sizeof(float));
    if (!bigger) return -1;
    out->samples = bigger;
    out->capacity = capacity;
    return 0;
}

/// Resamples one decoded frame (or, with frame NULL, what the resampler still holds).
static int convert(SwrContext *swr, AVFrame *frame, int rate, struct output *out) {
    int in = frame ? frame->nb_samples : 0;
    int room = swr_get_out_samples(swr, in);
    if (room < 0) return room;
    if (grow(out, (size_t)room + 1) != 0) return AVERROR(ENOMEM);
    uint8_t *target = (uint8_t *)(out->samples + out->count);
    int n = swr_convert(swr, &target, room, frame ? (const uint8_t **)frame->extended_data : NULL, in);
    if (n < 0) return n;
    out->count += (size_t)n;
    (void)rate;
    return 0;
}

int steno_av_decode(const uint8_t *data, size_t size, int rate, double max_seconds,
                    float **samples, size_t *count, char *error, size_t error_size) {
    struct memory memory = { data, size, 0 };
    struct output out = { NULL, 0, 0 };
    AVFormatContext *format = NULL;
    AVIOContext *io = NULL;
    AVCodecContext *codec = NULL;
    SwrContext *swr = NULL;
    AVPacket *packet = av_packet_alloc();
    AVFrame *frame = av_frame_alloc();
    int status = -1;
    const char *why = "the file is not audio this server can read";
    unsigned char *io_buffer = av_malloc(64 * 1024);
    if (!packet || !frame || !io_buffer) { why = "out of memory"; goto done; }
    io = avio_alloc_context(io_buffer, 64 * 1024, 0, &memory, read_memory, NULL, seek_memory);
    if (!io) { av_free(io_buffer); why = "out of memory"; goto done; }
    format = avformat_alloc_context();
    if (!format) { why = "out of memory"; goto done; }
    format->pb = io;
    format->flags |= AVFMT_FLAG_CUSTOM_IO;
    if (avformat_open_input(&format, NULL, NULL, NULL) < 0) { format = NULL; goto done; }
    if (avformat_find_stream_info(format, NULL) < 0) goto done;
    const AVCodec *decoder = NULL;
    int stream = av_find_best_stream(format, AVMEDIA_TYPE_AUDIO, -1, -1, &decoder, 0);
    if (stream < 0 || !decoder) { why = "the file has no audio stream this server can decode"; goto done; }
    codec = avcodec_alloc_context3(decoder);
    if (!codec || avcodec_parameters_to_context(codec, format->streams[stream]->codecpar) < 0) goto done;
    if (avcodec_open2(codec, decoder, NULL) < 0) { why = "the file's audio codec cannot be opened"; goto done; }
    if (codec->ch_layout.nb_channels == 0) av_channel_layout_default(&codec->ch_layout, 1);
    AVChannelLayout mono = AV_CHANNEL_LAYOUT_MONO;
    if (swr_alloc_set_opts2(&swr, &mono, AV_SAMPLE_FMT_FLT, rate, &codec->ch_layout, codec->sample_fmt,
                            codec->sample_rate, 0, NULL) < 0) {
        why = "the file's audio cannot be resampled"; goto done;
    }
    /* The channels' mean, as Steno mixes a stereo session (FFmpeg's default mix weighs them -3 dB). */
    int channels = codec->ch_layout.nb_channels;
    double weights[64];
    if (channels > 64) { why = "the file has too many channels"; goto done; }
    for (int i = 0; i < channels; i++) weights[i] = 1.0 / channels;
    if (swr_set_matrix(swr, weights, channels) < 0 || swr_init(swr) < 0) {
        why = "the file's audio cannot be resampled"; goto done;
    }
    size_t limit = max_seconds > 0 ? (size_t)(max_seconds * rate) : 0;
    int flushing = 0;
    for (;;) {
        if (!flushing) {
            int r = av_read_frame(format, packet);
            if (r < 0) { flushing = 1; avcodec_send_packet(codec, NULL); }
            else {
                if (packet->stream_index == stream) avcodec_send_packet(codec, packet);
                av_packet_unref(packet);
            }
        }
        int r;
        while ((r = avcodec_receive_frame(codec, frame)) == 0) {
            if (convert(swr, frame, rate, &out) < 0) { why = "the file's audio cannot be resampled"; goto done; }
            av_frame_unref(frame);
            if (limit && out.count > limit) { status = -2; why = "the audio is too long"; goto done; }
        }
        if (r == AVERROR_EOF) break;
        if (r != AVERROR(EAGAIN)) { why = "the file's audio is damaged"; goto done; }
        if (flushing && r == AVERROR(EAGAIN)) break;
    }
    if (convert(swr, NULL, rate, &out) < 0) goto done;
    if (out.count == 0) { why = "the file holds no audio"; goto done; }
    status = 0;
done:
    if (status == 0) {
        *samples = out.samples;
        *count = out.count;
    } else {
        free(out.samples);
        if (error && error_size) snprintf(error, error_size, "%s", why);
    }
    swr_free(&swr);
    avcodec_free_context(&codec);
    if (format) avformat_close_input(&format);
    if (io) { av_freep(&io->buffer); avio_context_free(&io); }
    av_frame_free(&frame);
    av_packet_free(&packet);
    return status;
}

void steno_av_free(float *samples) { free(samples); }
