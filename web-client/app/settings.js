// The main page's Settings: filled from the page address, the server's models listed (again
// when the server changes), the viewer link of the channel, and no reload on Enter.

import { fetchModels, isChannelName } from '../steno-client.js';
import { defaultStreamUrl, fillLanguageChoice, fillModelChoice } from '../page.js';
import { ui } from './state.js';

// ---- settings from the page address -------------------------------------------------------

const params = new URLSearchParams(location.search);
export const token = params.get('token') || '';
// Next to the page, so that the page works under a sub-path (behind a proxy) as at the root.
const defaultServer = defaultStreamUrl(location.href);
ui.server.value = params.get('server') || defaultServer;
ui.encoding.value = ['auto', 'opus', 'pcm'].includes(params.get('encoding')) ? params.get('encoding') : 'auto';
// English unless the address says otherwise; the languages come with the models.
fillLanguageChoice(ui.language, [], params.get('language') || 'en');
// The server's models, asked for now and whenever the server changes (the address's `model` kept).
fillModelChoice(ui.model, [], params.get('model') || '');
async function loadModels() {
  const wanted = ui.model.value;
  const models = await fetchModels(ui.server.value.trim() || defaultServer, { token });
  fillModelChoice(ui.model, models, wanted);
  fillLanguageChoice(ui.language, models, ui.language.value);
}
loadModels();
ui.server.addEventListener('change', loadModels);
ui.channel.value = params.get('channel') || '';
ui.profanity.value = ['keep', 'mask', 'remove'].includes(params.get('profanity')) ? params.get('profanity') : '';
// Pauses are left out and declared (`silence`) unless the address says suppression=off.
export const suppressSilence = params.get('suppression') !== 'off';

// ---- the viewer link -------------------------------------------------------------------------

/** view.html?channel=NAME for the channel in Settings (and ?server= when it is not this one).
 * The access token is left out: it may publish. For a server with tokens, add a --viewer-token. */
function updateShareLink() {
  const name = ui.channel.value.trim();
  ui.share.hidden = !isChannelName(name);
  if (ui.share.hidden) return;
  const link = new URL('view.html', location.href);
  link.search = '';
  link.hash = '';
  link.searchParams.set('channel', name);
  const server = ui.server.value.trim();
  if (server && server !== defaultServer) link.searchParams.set('server', server);
  ui.shareChannel.textContent = name;
  ui.viewerLink.href = link.href;
  ui.copyViewerLink.hidden = !navigator.clipboard;
}

ui.channel.addEventListener('input', updateShareLink);
ui.server.addEventListener('input', updateShareLink);
ui.copyViewerLink.addEventListener('click', async () => {
  try {
    await navigator.clipboard.writeText(ui.viewerLink.href);
    ui.copyViewerLink.textContent = 'Copied';
  } catch {
    ui.copyViewerLink.textContent = 'Copy failed';
  }
  setTimeout(() => { ui.copyViewerLink.textContent = 'Copy link'; }, 2000);
});
updateShareLink();

// The settings form has no submit: pressing Enter in a field must not reload the page.
document.getElementById('settings').addEventListener('submit', (event) => event.preventDefault());
