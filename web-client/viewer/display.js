// The viewer page's display: text size (A−/A+, or the - and + keys), theme (automatic, light,
// dark, high contrast) and full screen. Size and theme come from the page address (`size=`,
// `theme=`), else from the last choice on this device (localStorage), and are remembered.

const SIZES = [0.7, 0.85, 1, 1.15, 1.3, 1.5, 1.75, 2, 2.5, 3]; // text size steps (1 = the default)
const THEMES = ['auto', 'light', 'dark', 'contrast'];

function remembered(key) {
  try { return localStorage.getItem(`steno-viewer-${key}`); } catch { return null; }
}
function remember(key, value) {
  try { localStorage.setItem(`steno-viewer-${key}`, value); } catch { /* private mode: not remembered */ }
}

/**
 * Sets the display up and keeps it: `ui` holds the page's elements, `params` its address's
 * parameters; `followIfStuck` keeps the captions at their end when a change moves them.
 */
export function setUpDisplay(ui, params, followIfStuck) {
  let sizeIndex = SIZES.indexOf(1);

  function nearestSize(scale) {
    let best = SIZES.indexOf(1);
    for (let i = 0; i < SIZES.length; i++) if (Math.abs(SIZES[i] - scale) < Math.abs(SIZES[best] - scale)) best = i;
    return best;
  }

  function applySize(index, { save = true } = {}) {
    sizeIndex = Math.max(0, Math.min(SIZES.length - 1, index));
    const scale = SIZES[sizeIndex];
    document.documentElement.style.setProperty('--caption-scale', String(scale));
    ui.size.textContent = `${Math.round(scale * 100)}%`;
    ui.size.dataset.scale = String(scale);
    ui.smaller.disabled = sizeIndex === 0;
    ui.larger.disabled = sizeIndex === SIZES.length - 1;
    if (save) remember('size', String(scale));
    followIfStuck();
  }

  function applyTheme(theme, { save = true } = {}) {
    const value = THEMES.includes(theme) ? theme : 'auto';
    if (value === 'auto') delete document.documentElement.dataset.theme;
    else document.documentElement.dataset.theme = value;
    ui.theme.value = value;
    if (save) remember('theme', value);
  }

  const sizeParam = Number(params.get('size'));
  applySize(sizeParam > 0 ? nearestSize(sizeParam / 100) : nearestSize(Number(remembered('size')) || 1), { save: false });
  applyTheme(params.get('theme') || remembered('theme') || 'auto', { save: false });

  ui.smaller.addEventListener('click', () => applySize(sizeIndex - 1));
  ui.larger.addEventListener('click', () => applySize(sizeIndex + 1));
  ui.theme.addEventListener('change', () => applyTheme(ui.theme.value));

  document.addEventListener('keydown', (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.target.closest?.('input, select, textarea')) return;
    if (event.key === '+' || event.key === '=') { applySize(sizeIndex + 1); event.preventDefault(); }
    else if (event.key === '-' || event.key === '_') { applySize(sizeIndex - 1); event.preventDefault(); }
  });

  if (document.fullscreenEnabled) {
    ui.fullscreen.hidden = false;
    ui.fullscreen.addEventListener('click', () => {
      if (document.fullscreenElement) document.exitFullscreen().catch(() => {});
      else document.documentElement.requestFullscreen().catch(() => {});
    });
    document.addEventListener('fullscreenchange', () => {
      const on = !!document.fullscreenElement;
      ui.fullscreen.setAttribute('aria-pressed', String(on));
      ui.fullscreen.textContent = on ? 'Exit full screen' : 'Full screen';
      followIfStuck();
    });
  }
}
