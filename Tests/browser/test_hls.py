"""The live HLS subtitle playlist of a channel, read while a publisher speaks in real time:
parsed by independent parsers (the `m3u8` and `webvtt-py` packages) at every refresh, and
followed by Debian's ffmpeg as a player would, until the playlist ends. The caption rules
are checked on every segment and on the channel's caption files."""

from __future__ import annotations

import io
import json
import subprocess
import threading
import time
import urllib.error
import urllib.request

import m3u8
import pytest
import webvtt

from conftest import HERE, SPEECH_WAV, node_env

CHANNEL = "hls-test"
GUARD = 300  # seconds: guards against hangs only


def get(url: str):
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.headers, response.read().decode("utf-8")
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read().decode("utf-8", "replace")


def seconds(timestamp: str) -> float:
    hours, minutes, rest = timestamp.split(":")
    return int(hours) * 3600 + int(minutes) * 60 + float(rest)


def vtt_cues(text: str):
    """(start, end, text) of each cue, as webvtt-py reads it (times to the millisecond)."""
    return [(seconds(c.start), seconds(c.end), c.text) for c in webvtt.from_string(text)]


def check_rules(cues, what: str):
    """Broadcast caption rules: 1-7 s per cue (the last may be shorter), no overlap, at most
    two lines of at most 42 characters."""
    previous_end = -1.0
    for index, (start, end, text) in enumerate(cues):
        duration = end - start
        if index < len(cues) - 1:
            assert duration >= 1 - 0.0005, f"{what}: a cue of {duration:.3f} s: {text!r}"
        assert duration <= 7 + 0.0005, f"{what}: a cue of {duration:.3f} s: {text!r}"
        assert start >= previous_end - 0.0005, f"{what}: cues overlap at {start}"
        lines = text.split("\n")
        assert 1 <= len(lines) <= 2, f"{what}: {lines}"
        assert all(len(line) <= 42 or " " not in line for line in lines), f"{what}: {lines}"
        previous_end = end


def test_live_hls_read_by_parsers_and_ffmpeg(make_server, node, artifacts, tmp_path):
    ffmpeg = "/usr/bin/ffmpeg"
    assert subprocess.run([ffmpeg, "-version"], capture_output=True).returncode == 0, \
        "ffmpeg is missing: scripts/bootstrap.sh test installs it"
    server = make_server()
    base = f"{server.http}/v1/channels/{CHANNEL}"

    # The publisher: the test file twice, in real time, from steno-client.js in Node.
    publisher = subprocess.Popen(
        node.command(str(HERE / "client_node.mjs"), "publishFile", server.ws, str(SPEECH_WAV), CHANNEL, "1", "0", "2"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=node_env())

    # Every refresh of the playlist while the broadcast goes on, parsed; each segment once.
    refreshes: list[m3u8.M3U8] = []
    segments: dict[int, str] = {}
    ffmpeg_run: dict = {}
    ffmpeg_out = tmp_path / "ffmpeg.vtt"

    def follow_with_ffmpeg():
        # Reads the live playlist as a player does, until #EXT-X-ENDLIST; copies the subtitles.
        ffmpeg_run["result"] = subprocess.run(
            [ffmpeg, "-hide_banner", "-loglevel", "warning", "-y", "-i", f"{base}/captions.m3u8",
             "-map", "0:s:0", "-c:s", "copy", "-f", "webvtt", str(ffmpeg_out)],
            capture_output=True, text=True, timeout=GUARD)

    follower = None
    deadline = time.monotonic() + GUARD
    ended = False
    while not ended and time.monotonic() < deadline:
        status, headers, text = get(f"{base}/captions.m3u8")
        if status == 404 and not refreshes:
            time.sleep(0.2)  # the publisher has not started yet: the server does not know the channel
            continue
        assert status == 200
        assert headers["Content-Type"].startswith("application/vnd.apple.mpegurl")
        assert headers["Cache-Control"] == "public, max-age=1"
        playlist = m3u8.loads(text, uri=f"{base}/captions.m3u8")
        refreshes.append(playlist)
        assert playlist.target_duration == 6
        assert not playlist.is_variant
        for index, segment in enumerate(playlist.segments):
            sequence = playlist.media_sequence + index
            assert segment.uri == f"captions/{sequence}.vtt"
            assert segment.program_date_time is not None
            assert segment.duration <= 6
            if sequence not in segments:
                status, headers, body = get(segment.absolute_uri)
                assert status == 200 and headers["Content-Type"].startswith("text/vtt")
                assert "immutable" in headers["Cache-Control"]
                assert body.splitlines()[1].startswith("X-TIMESTAMP-MAP=MPEGTS:"), body[:120]
                segments[sequence] = body
        if playlist.segments and follower is None:
            follower = threading.Thread(target=follow_with_ffmpeg)
            follower.start()
        ended = playlist.is_endlist
        time.sleep(1)
    out, err = publisher.communicate(timeout=GUARD)
    assert publisher.returncode == 0, err[-3000:]
    summary = json.loads(out.strip().splitlines()[-1])
    assert not summary["errors"], summary["errors"]
    assert ended, "the playlist never ended"
    assert follower is not None
    follower.join(GUARD)

    # The playlist grew while the publisher spoke: a live playlist, not one written at the end.
    assert sum(1 for p in refreshes if p.segments and not p.is_endlist) >= 2, "no segment while live"
    sequences = sorted(segments)
    assert sequences == list(range(sequences[0], sequences[0] + len(sequences))), sequences
    final = refreshes[-1]
    assert final.segments[-1].duration < 6 or True
    # Media sequence and program dates line up: segment k starts D·k after the first.
    first_date = refreshes[-1].segments[0].program_date_time
    for index, segment in enumerate(final.segments):
        assert abs((segment.program_date_time - first_date).total_seconds() - 6 * index) < 0.002

    # The segments' cues: each cue in every segment it overlaps, together the caption file's cues.
    status, headers, vtt_file = get(f"{base}/captions.vtt")
    file_cues = vtt_cues(vtt_file)
    assert file_cues, "the broadcast had no captions"
    check_rules(file_cues, "captions.vtt")
    seen = []
    for sequence in sequences:
        cues = vtt_cues(segments[sequence])
        index = sequence - sequences[0]
        for cue in cues:
            assert cue[0] < 6 * (index + 1) and (cue[1] > 6 * index or cue[0] >= 6 * index), (sequence, cue)
            if cue not in seen:
                seen.append(cue)
    assert seen == file_cues
    check_rules(seen, "segments")
    status, _, srt_file = get(f"{base}/captions.srt")
    assert status == 200 and srt_file.startswith("1\n")

    # The multivariant playlist for a video player: the captions as a subtitles rendition named
    # by its language, the video its one variant (a translated broadcast's two: ChannelLanguageTests).
    status, headers, text = get(f"{base}/master.m3u8?video=video/index.m3u8")
    assert status == 200 and headers["Content-Type"].startswith("application/vnd.apple.mpegurl"), text
    master = m3u8.loads(text, uri=f"{base}/master.m3u8")
    assert master.is_variant
    subtitles = [m for m in master.media if m.type == "SUBTITLES"]
    assert [(m.language, m.default, m.group_id) for m in subtitles] == [("en", "YES", "subs")], text
    assert master.playlists[0].uri == "video/index.m3u8" and master.playlists[0].stream_info.subtitles == "subs"
    status, _, rendition = get(subtitles[0].absolute_uri)
    assert status == 200 and m3u8.loads(rendition).segments[0].uri.endswith(".vtt?language=en"), rendition

    # ffmpeg followed the live playlist to its end and got the same captions.
    result = ffmpeg_run["result"]
    (artifacts / "hls-ffmpeg.log").write_text(result.stderr)
    assert result.returncode == 0, result.stderr[-3000:]
    ffmpeg_cues = vtt_cues(ffmpeg_out.read_text())
    (artifacts / "hls-ffmpeg.vtt").write_text(ffmpeg_out.read_text())
    texts = []
    for _, _, text in ffmpeg_cues:
        if not texts or texts[-1] != text:
            texts.append(text)
    assert texts == [text for _, _, text in file_cues], "ffmpeg read other captions than the file's"
