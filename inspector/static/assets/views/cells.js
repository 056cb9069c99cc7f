// Workflows and their cells: one page at a time with the API's cursor,
// filtered by status, and a search by exact key.
import { h, replace, table, errorBox } from '../dom.js';
import { get, APIError } from '../api.js';
import { cellsPath, cellPath, intentPath, parseKey } from '../links.js';
import { navigate } from '../app.js';
import { shortHash } from './manifests.js';

const PAGE = 50;
const STATUSES = ['', 'running', 'waiting', 'completed', 'failed'];

export async function workflowsView(ctx) {
  const s = await get('/v1/status', ctx.signal);
  const wfs = Object.keys(s.cells || {}).sort();
  // An intent by its hash or a prefix of 8+ hex digits, as git takes a
  // short commit id: the intent's page asks the API, which resolves it
  // (or says it is ambiguous, listing the matches).
  const hashInput = h('input', { type: 'text', id: 'intent-search', placeholder: 'sha256:… or a prefix of 8+ hex digits', size: 40, spellcheck: 'false' });
  const find = h('form', { id: 'intent-form', class: 'toolbar' },
    h('label', { for: 'intent-search' }, 'Intent'), hashInput, h('button', { type: 'submit' }, 'Open intent'));
  find.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const raw = hashInput.value.trim();
    if (raw !== '') navigate(intentPath(raw));
  });
  replace(ctx.main, h('h1', {}, 'Workflows'), find,
    wfs.length === 0 ? h('p', { class: 'muted' }, 'No workflows yet: apply a manifest.') :
      table(['Workflow', 'Cells'], wfs.map((wf) => [h('a', { href: cellsPath(wf), 'data-workflow': wf }, wf), String(s.cells[wf])])));
}

export async function cellsView(ctx, wf) {
  const params = new URLSearchParams(location.search);
  const status = params.get('status') || '';
  const pin = params.get('pin') || '';
  const cursors = ['']; // the cursor of each page shown so far: Previous pops
  const body = h('div', { id: 'cells-page' });
  const keyInput = h('input', { type: 'text', id: 'key-search', placeholder: 'exact key, e.g. o-1 or "o-1" or 42', size: 32 });
  const search = h('form', { id: 'key-form', class: 'toolbar' },
    h('label', { for: 'key-search' }, 'Key'), keyInput, h('button', { type: 'submit' }, 'Open cell'));
  search.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const raw = keyInput.value.trim();
    if (raw !== '') navigate(cellPath(wf, parseKey(raw)));
  });
  const filter = h('select', { id: 'status-filter' }, STATUSES.map((st) => h('option', { value: st, selected: st === status }, st || 'any status')));
  filter.addEventListener('change', () => {
    const q = new URLSearchParams();
    if (filter.value) q.set('status', filter.value);
    if (pin) q.set('pin', pin);
    const qs = q.toString();
    navigate(cellsPath(wf) + (qs ? '?' + qs : ''));
  });
  const pinBox = h('span', {});
  replace(ctx.main, h('h1', {}, wf), search,
    h('div', { class: 'toolbar' }, h('label', { for: 'status-filter' }, 'Status'), filter, pinBox),
    body);
  // The live manifests, to name each row's pin.
  const names = await manifestNames(ctx.signal);
  if (pin) {
    replace(pinBox, h('span', { id: 'pin-filter', class: 'pill pinned' }, 'only instances pinned to ' + (names.get(pin) || 'a manifest no longer live') + ' (' + shortHash(pin) + ') ',
      h('a', { href: cellsPath(wf) + (status ? '?status=' + status : '') }, 'show all')));
  }

  const load = async () => {
    const after = cursors[cursors.length - 1];
    const q = new URLSearchParams({ limit: String(PAGE) });
    if (after) q.set('after', after);
    if (status) q.set('status', status);
    if (pin) q.set('pin', pin);
    let page;
    try {
      page = await get('/v1/cells/' + encodeURIComponent(wf) + '?' + q, ctx.signal);
    } catch (err) {
      if (err instanceof APIError) replace(body, errorBox(err));
      else ctx.fail(err); // unauthorized: the login page
      return;
    }
    const rows = (page.cells || []).map((c) => [
      h('a', { href: cellPath(wf, c.key), class: 'mono', 'data-key': JSON.stringify(c.key) }, JSON.stringify(c.key)),
      h('span', { class: 'status-' + c.status }, c.status + (c.reason ? ': ' + c.reason : '')),
      pinCell(c, names),
      h('span', { class: 'mono' }, c.state_hash),
      String(c.size),
    ]);
    const prevBtn = h('button', { type: 'button', id: 'prev-page', disabled: cursors.length === 1 }, '← Previous');
    const nextBtn = h('button', { type: 'button', id: 'next-page', disabled: !page.next }, 'Next →');
    prevBtn.addEventListener('click', () => { cursors.pop(); load(); });
    nextBtn.addEventListener('click', () => { cursors.push(page.next); load(); });
    replace(body,
      rows.length === 0 ? h('p', { class: 'muted' }, 'No cells' + (status ? ' with status ' + status : '') + '.') :
        table(['Key', 'Status', 'Manifest', 'State hash', 'Bytes'], rows, (i) => ({ 'data-pin': (page.cells[i].pin || '') })),
      h('div', { class: 'toolbar' }, prevBtn, h('span', { class: 'muted' }, 'page ' + cursors.length + ', ' + rows.length + ' rows'), nextBtn));
  };
  await load();
}

// manifestNames maps each live manifest's hash to its name.
export async function manifestNames(signal) {
  const page = await get('/v1/manifests', signal);
  return new Map((page.manifests || []).map((m) => [m.hash, m.name]));
}

// pinCell says which manifest a row steps under: the current one, or the
// older one it is pinned to (and, at rest, why it stays there).
export function pinCell(c, names) {
  if (!c.pin) return h('span', { class: 'muted' }, 'current');
  return h('span', { class: 'pin', title: c.pin }, 'pinned to ' + (names.get(c.pin) || 'manifest') + ' ' + shortHash(c.pin),
    c.pin_reason ? h('span', { class: 'pin-reason' }, ' (stays at rest: ' + c.pin_reason + ')') : null);
}
