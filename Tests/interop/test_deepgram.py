"""Deepgram's live API on /v1/listen, driven by Deepgram's own Python SDK (deepgram-sdk, pinned
in scripts/test-requirements.txt) against a real `steno serve` with real speech: interim
results, SpeechStarted, UtteranceEnd, Finalize and CloseStream, Metadata, μ-law audio, the
handshake's refusals and Deepgram's close codes. Every message is checked against the SDK's
own models (validated, not just constructed)."""

import hashlib
import subprocess
import threading
import time

import numpy as np
import pytest
import websockets.sync.client as ws_client
from deepgram import DeepgramClient
from deepgram.core.api_error import ApiError
from deepgram.core.events import EventType
from deepgram.environment import DeepgramClientEnvironment
from deepgram.listen.v1.types import (ListenV1Error, ListenV1Metadata, ListenV1Results, ListenV1SpeechStarted,
                                      ListenV1UtteranceEnd)
from websockets.exceptions import ConnectionClosed, InvalidStatus

from conftest import SENTENCES, TOKEN, speech, word_errors, words

MODELS = {"Results": ListenV1Results, "Metadata": ListenV1Metadata, "SpeechStarted": ListenV1SpeechStarted,
          "UtteranceEnd": ListenV1UtteranceEnd, "Error": ListenV1Error}


def client(server, key=TOKEN):
    port = server.port
    environment = DeepgramClientEnvironment(base=f"http://127.0.0.1:{port}", production=f"ws://127.0.0.1:{port}",
                                            agent=f"ws://127.0.0.1:{port}", agent_rest=f"http://127.0.0.1:{port}")
    return DeepgramClient(api_key=key, environment=environment)


def stream(server, chunks, pace, after=None, **options):
    """Streams `chunks` (bytes), `pace` seconds apart, through the SDK's live client; `after(conn)`
    runs once they are sent. Returns every message, validated by the SDK's own model of its type."""
    messages, closed = [], threading.Event()
    with client(server).listen.v1.connect(model="nova-3", **options) as conn:
        def on_message(message):
            raw = message.model_dump(by_alias=True, exclude_unset=True)
            model = MODELS[raw["type"]]
            assert isinstance(message, model), f"the SDK did not read a {raw['type']} as its model: {message!r}"
            messages.append(model.model_validate(raw))
        conn.on(EventType.MESSAGE, on_message)
        conn.on(EventType.CLOSE, lambda _: closed.set())
        listener = threading.Thread(target=conn.start_listening, daemon=True)
        listener.start()
        for chunk in chunks:
            conn.send_media(chunk)
            time.sleep(pace)
        if after:
            after(conn)
        conn.send_close_stream()
        assert closed.wait(60), "the server did not close after CloseStream"
        listener.join(5)
    return messages


def chunked(pcm, rate, seconds=0.1, width=2):
    step = int(rate * seconds) * width
    return [pcm[i:i + step] for i in range(0, len(pcm), step)]


def refusal_status(connect):
    """The HTTP status the handshake was refused with. This SDK reports it as an `ApiError`, or
    lets websockets' `InvalidStatus` through (its sync client catches only the legacy exception)."""
    try:
        with connect():
            pass
    except ApiError as error:
        return error.status_code
    except InvalidStatus as error:
        return error.response.status_code
    raise AssertionError("the handshake was accepted")


def finals_text(messages):
    return " ".join(m.channel.alternatives[0].transcript for m in messages
                    if isinstance(m, ListenV1Results) and m.is_final)


def test_live_captions_with_interim_results_finalize_and_close_stream(server):
    first, rate = speech("0880")
    second, _ = speech("0930")
    silence = bytes(2 * rate)  # a second
    audio = silence + first + silence + second
    finalized = []

    def finalize(conn):
        conn.send_finalize()
        deadline = time.time() + 30
        while not finalized and time.time() < deadline:
            finalized.extend(m for m in messages_so_far if isinstance(m, ListenV1Results) and m.from_finalize)
            time.sleep(0.1)

    messages_so_far = []  # as they come, for `finalize` to watch

    def run():
        out = []
        with client(server).listen.v1.connect(model="nova-3", encoding="linear16", sample_rate=rate,
                                              interim_results="true", punctuate="true", vad_events="true",
                                              utterance_end_ms="1000") as conn:
            closed = threading.Event()

            def on_message(message):
                raw = message.model_dump(by_alias=True, exclude_unset=True)
                model = MODELS[raw["type"]]
                validated = model.model_validate(raw)
                out.append(validated)
                messages_so_far.append(validated)
            conn.on(EventType.MESSAGE, on_message)
            conn.on(EventType.CLOSE, lambda _: closed.set())
            listener = threading.Thread(target=conn.start_listening, daemon=True)
            listener.start()
            for chunk in chunked(audio, rate):
                conn.send_media(chunk)
                time.sleep(0.1)  # real time
            finalize(conn)
            conn.send_close_stream()
            assert closed.wait(60), "the server did not close after CloseStream"
        return out

    messages = run()
    types = [type(m).__name__ for m in messages]
    results = [m for m in messages if isinstance(m, ListenV1Results)]
    interim = [m for m in results if not m.is_final]
    finals = [m for m in results if m.is_final and m.channel.alternatives[0].transcript]
    assert interim, f"no interim results: {types}"
    assert finals, f"no final results: {types}"
    assert any(isinstance(m, ListenV1SpeechStarted) for m in messages), types
    assert any(isinstance(m, ListenV1UtteranceEnd) for m in messages), types
    assert finalized, f"Finalize was not answered with from_finalize: {types}"
    # The words, against the reading (tiny.en hears these two sentences all but perfectly).
    reference = words(SENTENCES["0880"] + " " + SENTENCES["0930"])
    heard = words(finals_text(messages))
    assert word_errors(reference, heard) <= 2, heard
    # Punctuated and capitalized as asked; words with times in order, inside their result.
    assert finals[0].channel.alternatives[0].transcript[0].isupper()
    previous_end = 0.0
    for final in finals:
        alternative = final.channel.alternatives[0]
        assert alternative.words and 0 < alternative.confidence <= 1
        for word in alternative.words:
            assert word.punctuated_word and word.word == word.word.lower()
            assert final.start - 0.01 <= word.start <= word.end <= final.start + final.duration + 0.01
            assert word.start >= previous_end - 0.01
            previous_end = word.end
        assert final.channel_index == [0, 1] and final.metadata.request_id
    # The first word comes after the second of silence (Whisper's word times may be early by a little).
    assert finals[0].channel.alternatives[0].words[0].start > 0.6
    # Metadata last: the audio's length and digest, the model.
    metadata = messages[-1]
    assert isinstance(metadata, ListenV1Metadata), types
    assert abs(metadata.duration - len(audio) / 2 / rate) < 0.05
    assert metadata.sha256 == hashlib.sha256(audio).hexdigest()
    assert metadata.channels == 1 and metadata.request_id == finals[0].metadata.request_id


def mulaw(pcm):
    """16-bit PCM as G.711 μ-law (the standard encoder)."""
    x = np.frombuffer(pcm, dtype="<i2").astype(np.int32)
    sign = np.where(x < 0, 0x80, 0)
    magnitude = np.minimum(np.abs(x), 32635) + 0x84
    exponent = np.floor(np.log2(magnitude)).astype(np.int32) - 7
    mantissa = (magnitude >> (exponent + 3)) & 0x0F
    return (~(sign | (exponent << 4) | mantissa) & 0xFF).astype(np.uint8).tobytes()


def test_mulaw_at_8khz_without_punctuation_with_keyterms(server):
    pcm, rate = speech("0880")
    x = np.frombuffer(pcm, dtype="<i2")
    narrow = x[::2].tobytes() if rate == 16000 else pcm  # telephone rate (the sentence has little above 4 kHz)
    audio = mulaw(narrow)
    # Sent fast, in pieces of odd sizes: Steno keeps up and loses nothing.
    chunks = [audio[i:i + 777] for i in range(0, len(audio), 777)]
    messages = stream(server, chunks, 0.0, encoding="mulaw", sample_rate=8000, keyterm="disposed")
    finals = [m for m in messages if isinstance(m, ListenV1Results) and m.is_final]
    transcript = finals_text(messages).strip()
    assert transcript == transcript.lower() and "," not in transcript and "." not in transcript, transcript
    assert word_errors(words(SENTENCES["0880"]), words(transcript)) <= 2, transcript
    assert not any(isinstance(m, ListenV1Results) and not m.is_final for m in messages), "interim results not asked for"
    assert isinstance(messages[-1], ListenV1Metadata)
    assert abs(messages[-1].duration - len(audio) / 8000) < 0.05
    for final in finals:
        for word in final.channel.alternatives[0].words:
            assert word.punctuated_word == word.word


@pytest.mark.parametrize("query, says", [
    ({"encoding": "flac", "sample_rate": 16000}, "encoding"),
    ({"encoding": "linear16"}, "sample_rate"),
    ({"encoding": "linear16", "sample_rate": 16000, "channels": 9, "multichannel": "true"}, "multichannel"),
    ({"encoding": "linear16", "sample_rate": 16000, "interim_results": "maybe"}, "interim_results"),
    ({"encoding": "linear16", "sample_rate": 16000, "language": "tlh"}, "language"),
])
def test_a_query_this_server_cannot_serve_is_refused_with_400(server, query, says):
    assert refusal_status(lambda: client(server).listen.v1.connect(model="nova-3", **query)) == 400
    # The body says why, as Deepgram's does (read without the SDK, which keeps only the status).
    url = f"ws://127.0.0.1:{server.port}/v1/listen?" + "&".join(f"{k}={v}" for k, v in query.items())
    with pytest.raises(InvalidStatus) as raw:
        ws_client.connect(url, additional_headers={"Authorization": f"Token {TOKEN}"})
    assert raw.value.response.status_code == 400
    assert says in raw.value.response.body.decode()


def test_keys_as_deepgram_clients_send_them(server):
    url = f"ws://127.0.0.1:{server.port}/v1/listen?encoding=linear16&sample_rate=16000"
    # A wrong key: 401, which the SDK reports as such.
    assert refusal_status(lambda: client(server, key="wrong").listen.v1.connect(
        model="nova-3", encoding="linear16", sample_rate=16000)) == 401
    # A browser cannot set headers: its key travels as the subprotocols "token, KEY", and the
    # server answers "token".
    with ws_client.connect(url, subprotocols=["token", TOKEN]) as conn:
        assert conn.subprotocol == "token"
        conn.send('{"type":"CloseStream"}')
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                conn.recv(10)
        assert closed.value.rcvd.code == 1000


def test_no_audio_for_ten_seconds_closes_with_net_0001_and_keepalive_holds_it_open(server):
    url = f"ws://127.0.0.1:{server.port}/v1/listen?encoding=linear16&sample_rate=16000&model=nova-3"
    headers = {"Authorization": f"Token {TOKEN}"}
    with ws_client.connect(url, additional_headers=headers) as kept, \
            ws_client.connect(url, additional_headers=headers) as idle:
        started = time.time()
        # One client says KeepAlive every 3 s; the other says nothing.
        while time.time() - started < 13:
            kept.send('{"type":"KeepAlive"}')
            time.sleep(3)
        said = []
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                said.append(idle.recv(5))
        assert closed.value.rcvd.code == 1011 and closed.value.rcvd.reason == "NET-0001"
        # Before the close, an Error says why in words.
        assert [ListenV1Error.model_validate_json(m).variant for m in said] == ["idle"], said
        # A message the server does not know gets Deepgram's Error, and the session goes on.
        kept.send('{"type":"Configure","thresholds":{}}')
        error = ListenV1Error.model_validate_json(kept.recv(5))
        assert error.variant == "SchemaError" and "Configure" in error.description
        kept.send('{"type":"CloseStream"}')
        metadata = ListenV1Metadata.model_validate_json(kept.recv(10))
        assert metadata.duration == 0


@pytest.mark.parametrize("kind", ["wav", "ogg-opus"])
def test_a_container_without_encoding_is_read_from_its_header(server, tmp_path, kind):
    source = speech_path = "/usr/share/pocketsphinx/test/data/librivox/sense_and_sensibility_01_austen_64kb-0880.wav"
    if kind == "ogg-opus":
        speech_path = str(tmp_path / "sentence.ogg")
        subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-i", source, "-c:a", "libopus",
                        "-page_duration", "100000", speech_path], check=True)
    with open(speech_path, "rb") as f:
        data = f.read()
    # Sent in pieces of odd sizes, as a file is read: the header may be cut anywhere.
    chunks = [data[i:i + 1001] for i in range(0, len(data), 1001)]
    query = {} if kind == "wav" else {"encoding": "ogg-opus"}
    messages = stream(server, chunks, 0.0, **query)
    assert word_errors(words(SENTENCES["0880"]), words(finals_text(messages))) <= 2, finals_text(messages)
    assert isinstance(messages[-1], ListenV1Metadata) and abs(messages[-1].duration - 2.99) < 0.1
    assert messages[-1].sha256 == hashlib.sha256(data).hexdigest()


def test_a_stream_that_is_no_container_closes_with_data_0000(server):
    url = f"ws://127.0.0.1:{server.port}/v1/listen?model=nova-3"
    with ws_client.connect(url, additional_headers={"Authorization": f"Token {TOKEN}"}) as conn:
        conn.send(b"this is not audio at all, neither WAV nor Ogg")
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                conn.recv(10)
    assert closed.value.rcvd.code == 1008 and closed.value.rcvd.reason == "DATA-0000"


def test_multichannel_hears_each_channel_on_its_own(server):
    # A call: one sentence on the left, another on the right, at the same time.
    left, rate = speech("0880")
    right, _ = speech("0930")
    a = np.frombuffer(left, dtype="<i2")
    b = np.frombuffer(right, dtype="<i2")
    n = max(len(a), len(b)) + rate
    stereo = np.zeros((n, 2), dtype="<i2")
    stereo[:len(a), 0] = a
    stereo[:len(b), 1] = b
    audio = stereo.tobytes()
    chunks = [audio[i:i + 6401] for i in range(0, len(audio), 6401)]  # not whole frames
    messages = stream(server, chunks, 0.0, encoding="linear16", sample_rate=rate, channels=2, multichannel="true")
    finals = [m for m in messages if isinstance(m, ListenV1Results) and m.is_final and m.channel.alternatives[0].transcript]
    heard = {index: words(" ".join(m.channel.alternatives[0].transcript for m in finals if m.channel_index == [index, 2]))
             for index in (0, 1)}
    assert word_errors(words(SENTENCES["0880"]), heard[0]) <= 2, heard
    assert word_errors(words(SENTENCES["0930"]), heard[1]) <= 2, heard
    assert {tuple(m.channel_index) for m in finals} == {(0, 2), (1, 2)}
    metadata = [m for m in messages if isinstance(m, ListenV1Metadata)]
    assert len(metadata) == 1 and metadata[0].channels == 2 and metadata[0] is messages[-1]
    assert metadata[0].sha256 == hashlib.sha256(audio).hexdigest()
    assert abs(metadata[0].duration - n / rate) < 0.05
