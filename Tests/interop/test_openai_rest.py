"""OpenAI's REST transcription API (POST /v1/audio/transcriptions, /v1/audio/translations),
driven by the `openai` SDK (pinned in scripts/test-requirements.txt) against a real `steno
serve`: a LibriVox sentence in WAV, FLAC, Ogg/Opus, MP3, M4A and WebM (made by Debian's
ffmpeg), every response format, streamed, and the errors OpenAI's clients expect."""

import os
import subprocess

import openai
import pytest
from openai import OpenAI
from openai.types.audio import (Transcription, TranscriptionTextDeltaEvent, TranscriptionTextDoneEvent,
                                TranscriptionVerbose)

from conftest import LIBRIVOX, SENTENCES, TOKEN, word_errors, words

REFERENCE = words(SENTENCES["0880"])


def client(server, key=TOKEN):
    return OpenAI(api_key=key, base_url=f"http://127.0.0.1:{server.port}/v1", max_retries=0)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The sentence in each container and codec a user would upload."""
    folder = tmp_path_factory.mktemp("uploads")
    source = LIBRIVOX.format("0880")
    out = {"wav": source}
    for name, args in {"flac": [], "ogg": ["-c:a", "libopus"], "mp3": ["-c:a", "libmp3lame"],
                       "m4a": ["-c:a", "aac"], "webm": ["-c:a", "libopus"]}.items():
        path = str(folder / f"sentence.{name}")
        subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-i", source, *args, path], check=True)
        out[name] = path
    return out


@pytest.mark.parametrize("kind", ["wav", "flac", "ogg", "mp3", "m4a", "webm"])
def test_each_container_is_transcribed(server, files, kind):
    with open(files[kind], "rb") as f:
        result = client(server).audio.transcriptions.create(model="whisper-1", file=f)
    assert isinstance(result, Transcription)
    assert word_errors(REFERENCE, words(result.text)) <= 2, (kind, result.text)
    assert result.usage.type == "duration" and abs(result.usage.seconds - 2.99) < 0.1


def test_every_response_format(server, files):
    c = client(server)
    with open(files["wav"], "rb") as f:
        text = c.audio.transcriptions.create(model="gpt-4o-transcribe", file=f, response_format="text")
    assert word_errors(REFERENCE, words(text)) <= 2, text
    with open(files["wav"], "rb") as f:
        srt = c.audio.transcriptions.create(model="whisper-1", file=f, response_format="srt")
    assert srt.startswith("1\n00:00:0") and " --> " in srt
    with open(files["wav"], "rb") as f:
        vtt = c.audio.transcriptions.create(model="whisper-1", file=f, response_format="vtt")
    assert vtt.startswith("WEBVTT\n\n00:00:0")
    with open(files["wav"], "rb") as f:
        verbose = c.audio.transcriptions.create(model="whisper-1", file=f, response_format="verbose_json",
                                                timestamp_granularities=["word", "segment"])
    assert isinstance(verbose, TranscriptionVerbose)
    verbose = TranscriptionVerbose.model_validate(verbose.model_dump())
    assert verbose.language.startswith("en") and abs(verbose.duration - 2.99) < 0.1
    assert verbose.segments and verbose.segments[0].start < verbose.segments[-1].end <= verbose.duration + 0.05
    assert [w.word for w in verbose.words] and word_errors(REFERENCE, words(" ".join(w.word for w in verbose.words))) <= 2
    assert all(a.end <= b.start + 0.01 for a, b in zip(verbose.words, verbose.words[1:]))


def test_streamed_as_server_sent_events_as_the_finals_come(server, tmp_path):
    # Two sentences with a pause between them: two finals, each its own event.
    second = LIBRIVOX.format("0930")
    both = str(tmp_path / "both.mp3")
    subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-i", LIBRIVOX.format("0880"), "-i", second,
                    "-filter_complex", "[0:a]apad=pad_dur=1.5[a];[a][1:a]concat=n=2:v=0:a=1", "-c:a", "libmp3lame", both],
                   check=True)
    with open(both, "rb") as f:
        events = list(client(server).audio.transcriptions.create(model="gpt-4o-transcribe", file=f, stream=True))
    deltas = [e for e in events if isinstance(e, TranscriptionTextDeltaEvent)]
    done = events[-1]
    assert len(deltas) >= 2 and isinstance(done, TranscriptionTextDoneEvent), events
    assert "".join(d.delta for d in deltas) == done.text
    assert word_errors(REFERENCE + words(SENTENCES["0930"]), words(done.text)) <= 3, done.text


def test_errors_as_openai_clients_read_them(server, files, tmp_path):
    c = client(server)
    with pytest.raises(openai.AuthenticationError):
        with open(files["wav"], "rb") as f:
            client(server, key="wrong").audio.transcriptions.create(model="whisper-1", file=f)
    garbage = tmp_path / "noise.mp3"
    garbage.write_bytes(os.urandom(4096))
    with pytest.raises(openai.BadRequestError) as unreadable:
        with open(garbage, "rb") as f:
            c.audio.transcriptions.create(model="whisper-1", file=f)
    assert unreadable.value.body["param"] == "file"
    with pytest.raises(openai.BadRequestError) as fmt:
        with open(files["wav"], "rb") as f:
            c.audio.transcriptions.create(model="whisper-1", file=f, response_format="xml")
    assert "response_format" in fmt.value.message
    # Translation needs a multilingual model, which this test server was started without.
    with pytest.raises(openai.BadRequestError) as translation:
        with open(files["wav"], "rb") as f:
            c.audio.translations.create(model="whisper-1", file=f)
    assert "multilingual" in translation.value.message
    # Over OpenAI's 25 MB: 413 with OpenAI's error body.
    big = tmp_path / "big.wav"
    big.write_bytes(b"\0" * (25 * 1024 * 1024 + 1))
    with pytest.raises(openai.APIStatusError) as large:
        with open(big, "rb") as f:
            c.audio.transcriptions.create(model="whisper-1", file=f)
    assert large.value.status_code == 413 and "limit" in large.value.message
