// Part of steno-client.js, the module to import (its header documents all of this): the
// addresses of a server's routes (stream, listen, captions, models), and what its plain HTTP
// answers say (the models it has, why a WebSocket would be refused).

import { DEFAULT_LISTEN_PATH, DEFAULT_STREAM_PATH, isChannelName } from './protocol.js';

/** The WebSocket URL for a server address, with ?token= added when given. */
export function streamUrl(base, { token, path = DEFAULT_STREAM_PATH } = {}) {
  const url = new URL(String(base), globalThis.location?.href);
  if (url.protocol === 'http:') url.protocol = 'ws:';
  else if (url.protocol === 'https:') url.protocol = 'wss:';
  if (url.protocol !== 'ws:' && url.protocol !== 'wss:') {
    throw new TypeError(`not a WebSocket or HTTP address: ${base}`);
  }
  if (url.pathname === '' || url.pathname === '/') url.pathname = path;
  if (token != null && token !== '') url.searchParams.set('token', token);
  url.hash = '';
  return url.toString();
}

/** `base` as a URL with the scheme set for `kind` ('ws' or 'http'), keeping the security. */
function serverUrl(base, kind) {
  const url = new URL(String(base), globalThis.location?.href);
  const secure = url.protocol === 'https:' || url.protocol === 'wss:';
  if (!['http:', 'https:', 'ws:', 'wss:'].includes(url.protocol)) {
    throw new TypeError(`not a WebSocket or HTTP address: ${base}`);
  }
  url.protocol = kind === 'ws' ? (secure ? 'wss:' : 'ws:') : (secure ? 'https:' : 'http:');
  url.hash = '';
  url.search = '';
  return url;
}

/** The path in front of the server's own routes: '' for 'https://host/v1/stream', '/steno' for '…/steno/v1/listen'. */
function routePrefix(pathname) {
  for (const route of [DEFAULT_STREAM_PATH, DEFAULT_LISTEN_PATH]) {
    if (pathname.endsWith(route)) return pathname.slice(0, -route.length);
  }
  return pathname.replace(/\/+$/, '');
}

/** `token` and `language` on an address, each when given (`language`: a tag the channel carries, or
 * "original"; without one, the publisher's own captions). */
function withAccess(url, { token, language }) {
  if (token != null && token !== '') url.searchParams.set('token', token);
  if (language != null && language !== '') url.searchParams.set('language', language);
  return url.toString();
}

/**
 * The viewer WebSocket URL of a channel: `base` may be the server (`https://host`), its stream
 * address (`wss://host/v1/stream`, as the publishing page shows it) or its listen address.
 */
export function listenUrl(base, channel, { token, language } = {}) {
  if (!isChannelName(channel)) throw new TypeError(`not a channel name: ${channel}`);
  const url = serverUrl(base, 'ws');
  url.pathname = routePrefix(url.pathname) + DEFAULT_LISTEN_PATH;
  url.searchParams.set('channel', channel);
  return withAccess(url, { token, language });
}

/** The HTTP address of a channel's captions so far: format 'vtt', 'srt' or 'txt'. */
export function captionsUrl(base, channel, format = 'vtt', { token, language } = {}) {
  if (!isChannelName(channel)) throw new TypeError(`not a channel name: ${channel}`);
  if (!['vtt', 'srt', 'txt'].includes(format)) throw new TypeError(`no captions format ${format}`);
  const url = serverUrl(base, 'http');
  url.pathname = `${routePrefix(url.pathname)}/v1/channels/${channel}/captions.${format}`;
  return withAccess(url, { token, language });
}

/** The HTTP address of the server's models (`/v1/models`). */
export function modelsUrl(base, { token } = {}) {
  const url = serverUrl(base, 'http');
  url.pathname = `${routePrefix(url.pathname)}/v1/models`;
  if (token != null && token !== '') url.searchParams.set('token', token);
  return url.toString();
}

/**
 * The server's models, as `/v1/models` lists them (each {name, language, engine, default, …}),
 * the default first; [] when the server cannot be asked (no fetch, unreachable, refused, not
 * JSON): a client then leaves `model` to the server.
 */
export async function fetchModels(base, { token, fetch = globalThis.fetch, timeout = 10 } = {}) {
  if (typeof fetch !== 'function') return [];
  try {
    return await withTimeout(timeout, async (signal) => {
      const response = await fetch(modelsUrl(base, { token }), { signal });
      if (!response.ok) return [];
      const body = await response.json();
      const models = Array.isArray(body?.models) ? body.models : [];
      const named = models.filter((m) => m && typeof m.name === 'string' && m.name);
      return [...named.filter((m) => m.default === true), ...named.filter((m) => m.default !== true)];
    });
  } catch {
    return [];
  }
}

/** `request(signal)`, its signal aborted after `timeout` seconds (where the runtime has AbortController). */
async function withTimeout(timeout, request) {
  const abort = typeof AbortController === 'function' ? new AbortController() : null;
  const timer = abort ? setTimeout(() => abort.abort(), timeout * 1000) : null;
  try {
    return await request(abort?.signal);
  } finally {
    if (timer) clearTimeout(timer);
  }
}

/**
 * The plain HTTP address that tells why a WebSocket to `wsUrl` would be refused: the same
 * path and query (the token too) over http(s). Browsers cannot read the HTTP status of a
 * refused WebSocket handshake; the server answers this GET with what the handshake would get.
 */
export function probeUrl(wsUrl) {
  const url = new URL(String(wsUrl), globalThis.location?.href);
  if (url.protocol === 'ws:') url.protocol = 'http:';
  else if (url.protocol === 'wss:') url.protocol = 'https:';
  url.hash = '';
  return url.toString();
}

/**
 * Asks the server why a WebSocket to `wsUrl` failed: a plain `GET` of the same address.
 * Resolves (never rejects) with {reason, status, retryAfter}: reason is
 *   'unauthorized' (401: missing or wrong token), 'forbidden' (403: origin not allowed),
 *   'full' (503 with {"status":"full"}), 'draining' (503 with {"status":"draining"}: shutting
 *   down or restarting), 'accepting' (426: a WebSocket would be accepted now),
 *   'unknown' (any other answer, e.g. a server without this check) or
 *   'unreachable' (no answer: down, wrong address, blocked, or no fetch in this runtime);
 * retryAfter is the server's Retry-After in seconds (JSON `retryAfter`, else the header), or null.
 */
export async function probeStream(wsUrl, { fetch = globalThis.fetch, timeout = 10 } = {}) {
  if (typeof fetch !== 'function') return { reason: 'unreachable', status: null, retryAfter: null };
  try {
    return await withTimeout(timeout, async (signal) => {
      const response = await fetch(probeUrl(wsUrl), { cache: 'no-store', redirect: 'manual', signal });
      let body = null;
      try {
        body = await response.json();
      } catch {
        body = null; // not JSON: only the status counts
      }
      const seconds = (value) => {
        const n = Number(value);
        return value !== null && value !== '' && Number.isFinite(n) && n >= 0 ? n : null;
      };
      const retryAfter = seconds(body?.retryAfter) ?? seconds(response.headers?.get?.('retry-after') ?? null);
      let reason = 'unknown';
      if (response.status === 401) reason = 'unauthorized';
      else if (response.status === 403) reason = 'forbidden';
      else if (response.status === 426) reason = 'accepting';
      else if (response.status === 503) reason = body?.status === 'draining' ? 'draining' : 'full';
      return { reason, status: response.status, retryAfter };
    });
  } catch {
    return { reason: 'unreachable', status: null, retryAfter: null };
  }
}
