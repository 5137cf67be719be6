"""OpenAI's Realtime API in transcription sessions (/v1/realtime?intent=transcription), driven
by the `openai` SDK (pinned in scripts/test-requirements.txt) against a real `steno serve` with
real speech: server VAD's speech and commit events, transcription deltas and completed items,
manual commits with G.711 μ-law, errors. Every server event is validated by the SDK's own
models (its `RealtimeServerEvent` union)."""

import base64
import json
import threading
import time

import numpy as np
import pydantic
import pytest
import websockets.sync.client as ws_client
from openai import OpenAI
from openai.types.realtime import RealtimeServerEvent
from websockets.exceptions import InvalidStatus

from conftest import SENTENCES, TOKEN, speech, word_errors, words
from test_deepgram import mulaw

SERVER_EVENT = pydantic.TypeAdapter(RealtimeServerEvent)


def resampled(pcm, rate, to):
    x = np.frombuffer(pcm, dtype="<i2").astype(np.float64)
    n = int(len(x) * to / rate)
    return np.interp(np.arange(n) * rate / to, np.arange(len(x)), x).astype("<i2").tobytes()


class Session:
    """A Realtime connection through the SDK, its events gathered (validated) as they come."""

    def __init__(self, server):
        client = OpenAI(api_key=TOKEN, base_url=f"http://127.0.0.1:{server.port}/v1")
        self.manager = client.realtime.connect(extra_query={"intent": "transcription"})
        self.connection = self.manager.__enter__()
        self.events, self.raw = [], []
        self.reader = threading.Thread(target=self.read, daemon=True)
        self.reader.start()

    def read(self):
        try:
            while True:
                data = self.connection.recv_bytes()
                raw = json.loads(data)
                self.raw.append(raw)
                if raw["type"].startswith("transcription_session."):
                    self.events.append(raw)  # the beta's events are not in the GA union
                else:
                    self.events.append(SERVER_EVENT.validate_python(raw))
        except Exception:
            pass

    def of(self, kind):
        return [e for e in self.events if (e["type"] if isinstance(e, dict) else e.type) == kind]

    def wait(self, kind, count=1, timeout=60):
        deadline = time.time() + timeout
        while len(self.of(kind)) < count:
            assert time.time() < deadline, f"no {count} {kind} in {timeout} s: {[r['type'] for r in self.raw]}"
            time.sleep(0.05)
        return self.of(kind)

    def append(self, pcm, pace=0.0, chunk=4800):
        for i in range(0, len(pcm), chunk):
            self.connection.input_audio_buffer.append(audio=base64.b64encode(pcm[i:i + chunk]).decode())
            time.sleep(pace)

    def close(self):
        self.manager.__exit__(None, None, None)


def test_server_vad_transcribes_each_utterance_as_an_item(server):
    first, rate = speech("0880")
    second, _ = speech("0930")
    silence = bytes(int(1.5 * rate) * 2)
    audio = resampled(silence + first + silence + second + silence, rate, 24000)
    session = Session(server)
    try:
        created = session.wait("session.created")[0]
        assert created.session.type == "transcription"
        session.connection.session.update(session={
            "type": "transcription",
            "audio": {"input": {"format": {"type": "audio/pcm", "rate": 24000},
                                "transcription": {"model": "gpt-4o-transcribe", "language": "en"},
                                "turn_detection": {"type": "server_vad", "silence_duration_ms": 500}}}})
        updated = session.wait("session.updated")[0]
        assert updated.session.audio.input.transcription.language == "en"
        session.append(audio, pace=0.1)  # 100 ms chunks at real time
        completed = session.wait("conversation.item.input_audio_transcription.completed", 2)
    finally:
        session.close()
    kinds = [r["type"] for r in session.raw]
    assert session.of("input_audio_buffer.speech_started") and session.of("input_audio_buffer.speech_stopped"), kinds
    assert session.of("conversation.item.input_audio_transcription.delta"), kinds
    heard = words(" ".join(c.transcript for c in completed))
    assert word_errors(words(SENTENCES["0880"] + " " + SENTENCES["0930"]), heard) <= 2, heard
    # Each completed item was committed first, and the items chain.
    committed = session.of("input_audio_buffer.committed")
    for c in completed:
        index = next(i for i, r in enumerate(session.raw) if r["type"] == "input_audio_buffer.committed"
                     and r["item_id"] == c.item_id)
        assert index < session.raw.index(next(r for r in session.raw if r.get("item_id") == c.item_id
                                              and r["type"].endswith(".completed")))
        assert c.usage.type == "duration" and c.usage.seconds > 0
    assert committed[0].previous_item_id is None and committed[1].previous_item_id == committed[0].item_id
    # Speech started after the silence, in milliseconds of the buffer's audio.
    assert 1000 <= session.of("input_audio_buffer.speech_started")[0].audio_start_ms <= 2500
    assert len({e.event_id for e in session.events if not isinstance(e, dict)}) == len(session.raw)


def test_manual_commits_of_mulaw_audio_each_get_their_transcript(server):
    pcm, rate = speech("0880")
    audio = mulaw(resampled(pcm, rate, 8000))
    session = Session(server)
    try:
        session.wait("session.created")
        session.connection.session.update(session={
            "type": "transcription",
            "audio": {"input": {"format": {"type": "audio/pcmu"}, "turn_detection": None,
                                "transcription": {"model": "whisper-1", "prompt": "Sense and Sensibility"}}}})
        assert session.wait("session.updated")[0].session.audio.input.turn_detection is None
        session.append(audio, chunk=1600)  # as fast as it goes
        session.connection.input_audio_buffer.commit()
        first = session.wait("conversation.item.input_audio_transcription.completed")
        # A commit with nothing new is answered too, with an empty transcript.
        session.connection.input_audio_buffer.commit()
        both = session.wait("conversation.item.input_audio_transcription.completed", 2)
    finally:
        session.close()
    assert word_errors(words(SENTENCES["0880"]), words(first[0].transcript)) <= 2, first[0].transcript
    assert both[-1].transcript == ""
    assert not session.of("input_audio_buffer.speech_started"), "no speech events without server VAD"


def test_errors_as_openai_clients_read_them(server):
    session = Session(server)
    try:
        session.wait("session.created")
        session.connection.input_audio_buffer.commit()
        empty = session.wait("error")[0]
        assert empty.error.code == "input_audio_buffer_commit_empty"
        session.connection.send({"type": "response.create"})
        unknown = session.wait("error", 2)[1]
        assert "response.create" in unknown.error.message and unknown.error.type == "invalid_request_error"
        session.connection.send({"type": "session.update", "session": {
            "type": "transcription", "audio": {"input": {"format": {"type": "audio/opus"}}}}})
        assert "audio/opus" in session.wait("error", 3)[2].error.message
        # The beta's update is answered in the beta's words.
        session.connection.send({"type": "transcription_session.update", "session": {"input_audio_format": "g711_alaw"}})
        beta = session.wait("transcription_session.updated")[0]
        assert beta["session"]["input_audio_format"] == "g711_alaw"
    finally:
        session.close()
    # Not a transcription session, or a wrong key: refused at the handshake, as OpenAI does.
    for url, headers, status in [
        (f"ws://127.0.0.1:{server.port}/v1/realtime?model=gpt-realtime", {"Authorization": f"Bearer {TOKEN}"}, 400),
        (f"ws://127.0.0.1:{server.port}/v1/realtime?intent=transcription", {"Authorization": "Bearer wrong"}, 401),
    ]:
        with pytest.raises(InvalidStatus) as refused:
            ws_client.connect(url, additional_headers=headers)
        assert refused.value.response.status_code == status
