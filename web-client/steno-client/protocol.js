// Part of steno-client.js, the module to import (its header documents all of this): the
// protocol's constants and rules — its version and paths, close codes, errors and a sentence for
// each, whether to reconnect after a close, the bounds of phrases, channel names.

export const PROTOCOL_VERSION = 1;
export const DEFAULT_STREAM_PATH = '/v1/stream';
export const DEFAULT_LISTEN_PATH = '/v1/listen';

/** Close codes of the protocol, by name. */
export const CloseCode = Object.freeze({
  NORMAL: 1000,
  SHUTTING_DOWN: 1001,
  UNSUPPORTED_AUDIO: 1003,
  NO_STATUS: 1005,
  ABNORMAL: 1006,
  TOO_LARGE: 1009,
  INTERNAL: 1011,
  SERVICE_RESTART: 1012,
  TRY_AGAIN_LATER: 1013,
  SLOW_CONSUMER: 4008,
  SESSION_LIMIT: 4009,
  IDLE: 4010,
  NOT_STARTED: 4400,
  RESUME_FAILED: 4404,
});

export const CLOSE_CODE_TO_ERROR = new Map([
  [1001, 'shutting_down'],
  [1003, 'unsupported_audio'],
  [1009, 'too_large'],
  [1011, 'internal'],
  [4008, 'slow_consumer'],
  [4009, 'session_limit'],
  [4010, 'idle'],
  [4400, 'not_started'],
  [4404, 'resume_failed'],
]);

const ERROR_SENTENCES = {
  bad_message: 'The server did not understand a message from this client.',
  bad_audio: 'Some audio could not be decoded, so a few words may be missing.',
  not_started: 'The client sent audio or a command before starting the session (a client bug).',
  unsupported_audio: 'The server cannot accept this audio format.',
  too_large: 'A piece of audio was larger than the server accepts.',
  slow_consumer: 'The connection could not keep up with the captions, so the server closed it.',
  session_limit: 'The session reached its maximum length; its captions were finalized.',
  idle: 'The session was closed because no audio arrived for a while.',
  shutting_down: 'The server is shutting down; captions so far were finalized.',
  internal: 'The server had an internal error; the captions finalized so far are kept.',
  resume_failed: 'The server could no longer continue the session after the connection dropped.',
  connection_failed: 'Could not connect to the captioning server.',
  unauthorized: 'The captioning server refused the access token.',
  forbidden: 'The captioning server does not accept connections from this page (its origin is not allowed).',
  connection_lost: 'The connection to the captioning server was lost.',
  closed: 'The session is closed.',
};

/**
 * A plain-language sentence for a protocol error code ('idle', …) or a close code (4010, …).
 */
export function describeError(code) {
  if (typeof code === 'number') code = CLOSE_CODE_TO_ERROR.get(code) ?? (code === 1005 || code === 1006 ? 'connection_lost' : '');
  return ERROR_SENTENCES[code] ?? `The captioning server reported a problem (${code || 'unknown'}).`;
}

/**
 * Whether a client should open a new session after the connection closed with this code
 * while it still had audio to send. Retry: a dropped connection (1006/1005), a server going
 * away or restarting (1001, 1012, 1013), an internal error (1011, a fresh session may work),
 * a slow link (4008), the maximum session length (4009: carry on in a new session) and a
 * session that could not be resumed (4404: start a new one). Never: a normal close (1000),
 * or codes that would only repeat (1003 unsupported audio, 1009 too large, 4400 protocol
 * misuse) or mean nobody is sending (4010 idle).
 */
export function shouldReconnect(closeCode) {
  switch (closeCode) {
    case 1001: case 1005: case 1006: case 1011: case 1012: case 1013: case 1014:
    case 4008: case 4009: case 4404:
      return true;
    default:
      return false;
  }
}

/** The most phrases a `start` may carry, and words in one (the server's bounds). */
export const MAX_PHRASES = 1000;
export const MAX_PHRASE_WORDS = 10;

/**
 * Phrases from text with one per line (as `steno transcribe --phrases FILE` reads them):
 * lines trimmed, blank lines and lines starting with # skipped. Returns {phrases, problem}:
 * `problem` is a sentence when the list is over the server's bounds (more than MAX_PHRASES,
 * or a phrase of more than MAX_PHRASE_WORDS words), else null.
 */
export function parsePhrases(text) {
  const phrases = String(text ?? '').split(/\r?\n/).map((line) => line.trim())
    .filter((line) => line && !line.startsWith('#'));
  let problem = null;
  if (phrases.length > MAX_PHRASES) {
    problem = `${phrases.length} phrases; at most ${MAX_PHRASES} are allowed`;
  } else {
    const long = phrases.find((phrase) => phrase.split(/\s+/).length > MAX_PHRASE_WORDS);
    if (long) problem = `"${long.slice(0, 40)}" has more than ${MAX_PHRASE_WORDS} words`;
  }
  return { phrases, problem };
}

/** Whether `name` is a valid broadcast channel name: 1–64 letters, digits, '-', '_', '.', not '.' or '..'. */
export function isChannelName(name) {
  return typeof name === 'string' && /^[A-Za-z0-9._-]{1,64}$/.test(name) && name !== '.' && name !== '..';
}

/**
 * Whether a viewer should connect again after its connection closed with this code. Only
 * closes that a new connection would repeat end a viewer: 1000 (the server ended it), 1002,
 * 1003, 1007, 1008, 1009, 1010 and 4400 (protocol or policy problems). Everything else — a
 * lost connection (1006), the server shutting down or restarting (1001, 1012), an internal
 * error (1011), a slow link (4008) — is worth another try.
 */
export function viewerShouldReconnect(closeCode) {
  return ![1000, 1002, 1003, 1007, 1008, 1009, 1010, 4400].includes(closeCode);
}

/** An error of a Steno session: a protocol code, a message, and the close code if any. */
export class StenoError extends Error {
  constructor(code, message, { closeCode = null, fatal = true, status = null } = {}) {
    super(message || describeError(code));
    this.name = 'StenoError';
    this.code = code;
    this.closeCode = closeCode;
    this.fatal = fatal;
    this.status = status; // the HTTP status that explained a refused connection, if asked
  }
}
