// The inspector's shell: login, navigation, and the router that maps a path
// (every deep link is a path served by the same index.html) to a view.
import { h, replace, errorBox } from './dom.js';
import { get, token, setToken, clearToken, Unauthorized } from './api.js';
import { segments, parseKey } from './links.js';
import { statusView } from './views/status.js';
import { workflowsView, cellsView } from './views/cells.js';
import { cellView } from './views/cell.js';
import { intentView } from './views/intent.js';
import { journalView } from './views/journal.js';
import { manifestView } from './views/manifest.js';
import { pendingView } from './views/pending.js';

const main = document.getElementById('main');
let current = null; // { abort: AbortController, cleanup: [] } of the view shown

// ctx is what a view gets: where to draw, a signal aborted when the page
// changes, onCleanup for timers, and fail to report an error.
function newContext() {
  const ac = new AbortController();
  const cleanup = [];
  const ctx = {
    main, signal: ac.signal,
    onCleanup: (f) => cleanup.push(f),
    fail: (err) => handleError(err),
  };
  current = { ac, cleanup };
  return ctx;
}

function leave() {
  if (!current) return;
  current.ac.abort();
  for (const f of current.cleanup) f();
  current = null;
}

function handleError(err) {
  if (err instanceof Unauthorized) {
    showLogin(err.message);
    return;
  }
  if (err && err.name === 'AbortError') return;
  main.appendChild(errorBox(err));
}

// route picks the view for the current path.
function route() {
  const seg = segments(location.pathname);
  switch (seg[0] || '') {
    case '': case 'status': return ['status', (c) => statusView(c)];
    case 'cells':
      if (seg.length === 1) return ['cells', (c) => workflowsView(c)];
      if (seg.length === 2) return ['cells', (c) => cellsView(c, seg[1])];
      return ['cells', (c) => cellView(c, seg[1], parseKey(seg.slice(2).join('/')))];
    case 'intents': return ['cells', (c) => intentView(c, seg[1] || '')];
    case 'journal': return ['journal', (c) => journalView(c, seg[1])];
    case 'manifest': return ['manifest', (c) => manifestView(c)];
    case 'pending': return ['pending', (c) => pendingView(c)];
    case 'login': return ['login', null];
    default: return ['', (c) => replace(c.main, h('h1', {}, 'No such page'), h('p', {}, location.pathname))];
  }
}

export function render() {
  leave();
  if (!token()) {
    showLogin('');
    return;
  }
  const [nav, view] = route();
  if (!view) { // /login with a token: go home
    history.replaceState(null, '', '/');
    render();
    return;
  }
  document.getElementById('logout').hidden = false;
  for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('active', a.dataset.nav === nav);
  replace(main);
  const ctx = newContext();
  Promise.resolve().then(() => view(ctx)).catch(handleError);
  showWorld(ctx);
}

// showWorld puts the manifest's name and the height in the header.
async function showWorld(ctx) {
  try {
    const s = await get('/v1/status', ctx.signal);
    replace(document.getElementById('world'), (s.manifest_name || 'no manifest') + ' · height ' + s.journal_height);
  } catch (err) {
    if (err instanceof Unauthorized) showLogin(err.message);
  }
}

// showLogin shows the login page with an error, if any. The token is
// checked against /v1/status before it is kept.
export function showLogin(message) {
  leave();
  clearToken();
  document.getElementById('logout').hidden = true;
  replace(document.getElementById('world'));
  const input = h('input', { type: 'password', id: 'token', name: 'token', autocomplete: 'current-password', placeholder: 'token', required: true });
  const err = h('div', { id: 'login-error', class: 'error', role: 'alert', hidden: !message }, message || '');
  const form = h('form', { class: 'login', id: 'login' },
    h('h1', {}, 'aos inspector'),
    h('p', { class: 'muted' }, 'Paste the world\'s token (the file WORLD/token). It is kept in this tab only and sent as Authorization: Bearer with each request.'),
    err, input,
    h('button', { type: 'submit', class: 'primary', id: 'login-submit' }, 'Log in'));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    setToken(input.value.trim());
    try {
      await get('/v1/status');
    } catch (e) {
      clearToken();
      replace(err, e.message);
      err.hidden = false;
      return;
    }
    if (location.pathname === '/login') history.replaceState(null, '', '/');
    render();
  });
  replace(main, form);
  input.focus();
}

export function navigate(path) {
  history.pushState(null, '', path);
  render();
  window.scrollTo(0, 0);
}

// Same-origin links navigate in the page.
document.addEventListener('click', (ev) => {
  const a = ev.target.closest && ev.target.closest('a[href]');
  if (!a || ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || a.target) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || url.pathname.startsWith('/v1/') || url.pathname === '/metrics') return;
  ev.preventDefault();
  navigate(url.pathname + url.search);
});
window.addEventListener('popstate', render);
document.getElementById('logout').addEventListener('click', () => { clearToken(); showLogin(''); });
render();
