// The viewer page's language (view.html?language=): which values a viewer may ask for, the
// channel list's address, and the picker made of a channel's `languages` in `/v1/channels`
// (docs/protocol.md, "A channel's languages"). Pure: unit_viewer.test.mjs tests them in Node.

import { captionsUrl } from '../steno-client.js';

/** `value` if a viewer may ask for it (a language tag or "original", as the server checks), else ''. */
export function languageChoice(value) {
  const choice = String(value ?? '').trim();
  return choice.length <= 35 && /^(?:original|[A-Za-z]{2,8}(?:[-_][A-Za-z0-9]{1,8})*)$/.test(choice) ? choice : '';
}

/** The server's list of channels (`/v1/channels`), beside the channel's caption files. */
export function channelsUrl(server, channel, { token } = {}) {
  const address = new URL(captionsUrl(server, channel, 'txt', { token }));
  address.pathname = address.pathname.slice(0, -`/${channel}/captions.txt`.length);
  return address.href;
}

/** The picker for a channel's entry in `/v1/channels` (`languages`: the captions', then the original's tag or
 * "original"): `options` and `selected`, what the server sends for `wanted` (on the primary subtag), else the first. */
export function languageOptions(entry, wanted = '') {
  const values = (Array.isArray(entry?.languages) ? entry.languages : []).filter((v) => v && languageChoice(v) === v);
  const primary = (tag) => tag.split(/[-_]/)[0].toLowerCase();
  let selected = wanted === 'original' && values.length > 1 ? 1
    : values.findIndex((v) => v !== 'original' && wanted && primary(v) === primary(wanted));
  if (selected < 0 && values.length) selected = 0;
  return { options: values.map((value) => ({ value, label: value === 'original' ? 'Original' : value })), selected };
}
