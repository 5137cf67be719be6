#!/usr/bin/env python3
"""Moves late H.264 SEI NAL units in an FLV file to the front of their access unit.

OBS (libobs obs-output.c add_caption, 29.x and later: "TODO SEI should come after
AUD/SPS/PPS, but before any VCL") appends the caption SEI (CEA-708 cc_data carrying CEA-608)
AFTER the coded slice of the frame it rides on. H.264 wants SEI before the first VCL NAL unit,
and FFmpeg's h264 decoder drops such a "late" SEI ("Late SEI is not implemented" with frame
threads; discarded at the next packet without), so `movie=...[out0+subcc]` finds no captions.

This rewrites each AVC video tag's NAL units in place (same sizes, so no FLV header changes):
NAL units before the first VCL unit stay first, then every SEI found after it, then the rest.
Nothing else is changed.

  flv_sei_fix.py IN.flv OUT.flv     prints: tags, video tags, SEI units moved, caption SEIs
                                    (user_data_registered_itu_t_t35, country 0xB5, "GA94"),
                                    and the timestamp (ms) of each caption SEI
"""

import json
import sys


def sei_is_caption(nal):
    """True if this SEI NAL unit holds an ATSC A/53 (GA94) user_data_registered message."""
    # Strip emulation prevention bytes, then walk the SEI messages.
    raw = bytearray()
    zeros = 0
    for b in nal[1:]:
        if zeros >= 2 and b == 3:
            zeros = 0
            continue
        raw.append(b)
        zeros = zeros + 1 if b == 0 else 0
    i = 0
    while i < len(raw) and raw[i] != 0x80:
        ptype = 0
        while i < len(raw) and raw[i] == 0xFF:
            ptype += 255
            i += 1
        if i >= len(raw):
            break
        ptype += raw[i]
        i += 1
        psize = 0
        while i < len(raw) and raw[i] == 0xFF:
            psize += 255
            i += 1
        if i >= len(raw):
            break
        psize += raw[i]
        i += 1
        payload = raw[i:i + psize]
        if ptype == 4 and len(payload) >= 7 and payload[0] == 0xB5 and payload[3:7] == b"GA94":
            return True
        i += psize
    return False


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1], "rb") as f:
        data = bytearray(f.read())
    if data[:3] != b"FLV":
        print(f"{sys.argv[1]}: not an FLV file", file=sys.stderr)
        return 1
    pos = int.from_bytes(data[5:9], "big") + 4  # header, then PreviousTagSize0
    length_size = 4
    tags = video_tags = moved = 0
    caption_times = []
    while pos + 11 <= len(data):
        tag_type = data[pos] & 0x1F
        size = int.from_bytes(data[pos + 1:pos + 4], "big")
        ts = int.from_bytes(data[pos + 4:pos + 7], "big") | (data[pos + 7] << 24)
        body = pos + 11
        end = body + size
        if end > len(data):
            break  # a truncated last tag (recording cut off): leave it
        tags += 1
        if tag_type == 9 and size >= 5 and (data[body] & 0x0F) == 7:
            video_tags += 1
            packet_type = data[body + 1]
            if packet_type == 0 and size >= 10:
                length_size = (data[body + 5 + 4] & 0x03) + 1
            elif packet_type == 1:
                nals = []
                i = body + 5
                while i + length_size <= end:
                    n = int.from_bytes(data[i:i + length_size], "big")
                    nals.append(bytes(data[i:i + length_size + n]))
                    i += length_size + n
                if i == end:
                    first_vcl = next((k for k, u in enumerate(nals) if 1 <= (u[length_size] & 0x1F) <= 5), None)
                    if first_vcl is not None:
                        head = nals[:first_vcl]
                        late_sei = [u for u in nals[first_vcl:] if (u[length_size] & 0x1F) == 6]
                        rest = [u for u in nals[first_vcl:] if (u[length_size] & 0x1F) != 6]
                        for u in late_sei:
                            if sei_is_caption(u[length_size:]):
                                caption_times.append(ts)
                        if late_sei:
                            moved += len(late_sei)
                            data[body + 5:end] = b"".join(head + late_sei + rest)
                    for u in nals[:first_vcl or 0]:
                        if (u[length_size] & 0x1F) == 6 and sei_is_caption(u[length_size:]):
                            caption_times.append(ts)
        pos = end + 4
    with open(sys.argv[2], "wb") as f:
        f.write(data)
    print(json.dumps({"tags": tags, "videoTags": video_tags, "seiMoved": moved,
                      "captionSei": len(caption_times), "captionSeiTimesMs": caption_times}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
