// Part of steno-client.js, the module to import (its header documents StenoPublisher): the audio
// a StenoPublisher holds while there is no session, and the audio it sent and keeps until the
// server says it has it, to send again on a resumed connection. These are StenoPublisher's own
// methods (publisher.js puts them on its prototype), using its fields as its other methods do;
// what each field holds is said in its constructor.

import { StenoError } from './protocol.js';
import { opusPacketSamples, pcmPieces, toBytes } from './audio-data.js';

/**
 * Slack when comparing a time the server wrote (to the millisecond) with one of the client's
 * own: the server's count of what it received always falls between two audio messages.
 */
export const TIME_SLACK = 0.0006;

/** Seconds of audio a held or sent item carries: declared silence carries none. */
function audioSeconds(item) {
  return item.silence ? 0 : item.seconds;
}

/** StenoPublisher's methods for its held and sent audio. */
export const publisherAudio = {
  /**
   * The session continues on this connection. The server has its audio up to `received`: send
   * what it lacks from there on — what the old connection may not have delivered, then what
   * was held meanwhile. Audio no longer kept is declared as a `gap` first, so the session's
   * timeline stays the publisher's timeline less `offset`.
   */
  _onResumed(client, event) {
    this.resumes += 1;
    this._connected();
    const offset = this.offset ?? 0;
    const at = offset + (typeof event.received === 'number' ? event.received : 0);
    const send = [];
    let resent = 0;
    for (const item of this._held) {
      if (item.finalize) {
        // One placed before `at` reached the server (audio after it did); one at `at` may not
        // have, and is sent again (a second `finalized` for it is harmless).
        if (item.at >= at - TIME_SLACK) send.push(item);
      } else if (item.t0 + item.seconds / 2 > at) {
        // The server's count falls between two messages: this one is after it.
        send.push(item);
        if (item.sent) resent += audioSeconds(item);
      }
    }
    this._pendingFinalizes = this._pendingFinalizes.filter((item) => !send.includes(item));
    const firstAudio = send.find((item) => !item.finalize);
    const lacking = (firstAudio ? firstAudio.t0 : this.timeline) - at;
    const lost = lacking > TIME_SLACK ? lacking : 0;
    // Of what is lost, what was sent and never arrived has not been counted yet (held audio
    // that was given up has been, as 'buffer_full').
    const uncounted = Math.min(firstAudio ? firstAudio.t0 : this.timeline, this._sentThrough) - at;
    if (uncounted > TIME_SLACK) this._dropped(uncounted, 'connection_lost');
    this._held = [];
    this._heldSeconds = 0;
    this._setState(this._ending ? 'ending' : 'open', { resumed: true });
    this._deliver({ ...event, offset, lost, resent });
    if (lost > 0) client.gap(lost).catch(() => {});
    for (const item of send) {
      if (item.finalize) this._sendFinalize(client, item);
      else this._sendAudioOn(client, item);
    }
    if (this._ending === 'end') client.end().catch(() => {});
  },

  /**
   * One piece of audio in the current format as the messages it will be sent in, each
   * {data, bytes, seconds}: an Opus packet as it is; PCM in whole sample frames of at most
   * maxFrameBytes (a partial frame waits for the next piece). Each one is a copy.
   */
  _pieces(data) {
    const { encoding, sampleRate, channels = 1 } = this.audio;
    if (encoding === 'opus') {
      if (data instanceof Float32Array) throw new TypeError('sendAudio: Opus takes encoded packets, not samples');
      const packet = toBytes(data, 'opus').slice();
      const samples = opusPacketSamples(packet) || this._lastOpusSamples;
      this._lastOpusSamples = samples;
      return [{ data: packet, bytes: packet.byteLength, seconds: samples / 48000 }];
    }
    const { pieces, frameBytes, carry } = pcmPieces(data, encoding, channels, this._carry, this.options.maxFrameBytes);
    this._carry = carry;
    return pieces.map((piece) => ({ data: piece, bytes: piece.byteLength, seconds: piece.byteLength / frameBytes / sampleRate }));
  },

  /** Sends one message of audio and keeps it until the server says it has it. */
  _sendAudioOn(client, item) {
    if (item.silence) client.silence(item.seconds);
    else client.sendAudio(item.data);
    item.sent = true;
    this._sent.push(item);
    this._sentSeconds += audioSeconds(item);
    this._sentThrough = item.t0 + item.seconds;
    this._trimSent();
  },

  _sendFinalize(client, item) {
    const offset = this.offset ?? 0;
    const through = item.through == null ? undefined : Math.max(0, item.through - offset);
    client.finalize(through).catch(() => {}); // answered by `finalized`, on this connection or a resumed one
    this._pendingFinalizes.push(item);
    this._sent.push(item);
  },

  /** The server has the session's audio up to `received`: what was sent before it is not kept. */
  _acknowledge(received) {
    if (typeof received !== 'number') return;
    const at = (this.offset ?? 0) + received;
    while (this._sent.length) {
      const item = this._sent[0];
      const arrived = item.finalize ? item.at < at - TIME_SLACK : item.t0 + item.seconds / 2 <= at;
      if (!arrived) break;
      this._sent.shift();
      if (!item.finalize) this._sentSeconds -= audioSeconds(item);
    }
  },

  /** Keeps at most `bufferSeconds` of sent audio to send again; older is given up. */
  _trimSent() {
    while (this._sentSeconds > this.options.bufferSeconds && this._sent.length > 1) {
      const item = this._sent.shift();
      if (!item.finalize) this._sentSeconds -= audioSeconds(item);
    }
  },

  /** The connection dropped: what it may not have delivered goes before what is held. */
  _keepUnacknowledged() {
    if (this._sent.length === 0) return;
    for (const item of this._sent) if (!item.finalize) this._heldSeconds += audioSeconds(item);
    this._held = [...this._sent, ...this._held];
    this._sent = [];
    this._sentSeconds = 0;
    this._trimHeld();
  },

  /**
   * The session is over on the server (it closed it, or it cannot be resumed): the next
   * connection starts a new one, with what no final of the old one covered.
   */
  _endSession() {
    this._resume = null;
    this._lostAt = null;
    const unanswered = this._pendingFinalizes.filter((item) => !this._held.includes(item));
    this._pendingFinalizes = [];
    const error = new StenoError('connection_lost', 'The session ended before it could finalize this.');
    for (const item of unanswered) item.waiter.reject(error);
    const through = this._captionedThrough;
    this._held = this._held.filter((item) => {
      if (item.finalize || !item.sent || item.t0 + item.seconds > through + TIME_SLACK) return true;
      this._heldSeconds -= audioSeconds(item);
      return false;
    });
  },

  /** Keeps the latest `bufferSeconds` of held audio. */
  _trimHeld() {
    let dropped = 0;
    while (this._heldSeconds > this.options.bufferSeconds) {
      const index = this._held.findIndex((item) => !item.finalize);
      if (index < 0 || this._held.length - index <= 1) break;
      const [item] = this._held.splice(index, 1);
      this._heldSeconds -= audioSeconds(item);
      if (!item.sent) dropped += audioSeconds(item); // sent audio may have arrived: a resume tells
    }
    if (dropped > 0) this._dropped(dropped, 'buffer_full');
  },

  _dropped(seconds, why) {
    this.droppedSeconds += seconds;
    this._emit('dropped', { seconds, total: this.droppedSeconds, reason: why });
  },

  _discardHeld(why) {
    const seconds = this._held.reduce((n, item) => n + (item.finalize || item.sent ? 0 : audioSeconds(item)), 0);
    const error = new StenoError('closed', 'The publisher stopped before a session could finalize this.');
    for (const item of this._held) if (item.finalize) item.waiter.reject(error);
    this._held = [];
    this._heldSeconds = 0;
    if (seconds > 0) this._dropped(seconds, why);
  },
};
