// Pending work: everything in flight, a page at a time (GET /v1/pending),
// oldest first: each intent's effect, the cell that opened it, a timer's
// due time, and who holds it (a built-in timer or run, queued for an
// external executor, or claimed by one until its lease ends). Filtered by
// effect and workflow; each row links to its cell and its intent. The
// first page's time (request to rows in the DOM) is kept on the element as
// data-first-page-ms for the browser test to report.
import { h, replace, table, errorBox } from '../dom.js';
import { get, APIError } from '../api.js';
import { cellPath, intentPath, journalPath } from '../links.js';
import { navigate } from '../app.js';
import { timeCell } from '../time.js';
import { short } from './cell.js';

const PAGE = 50;

export async function pendingView(ctx) {
  const params = new URLSearchParams(location.search);
  const effect = params.get('effect') || '';
  const workflow = params.get('workflow') || '';
  const effectIn = h('input', { type: 'text', id: 'pending-effect', value: effect, placeholder: 'any effect, e.g. sys/timer.set@1', size: 30 });
  const wfIn = h('input', { type: 'text', id: 'pending-workflow', value: workflow, placeholder: 'any workflow', size: 30 });
  const form = h('form', { id: 'pending-form', class: 'toolbar' },
    h('label', { for: 'pending-effect' }, 'Effect'), effectIn, h('label', { for: 'pending-workflow' }, 'Workflow'), wfIn,
    h('button', { type: 'submit' }, 'Filter'));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams();
    if (effectIn.value.trim()) q.set('effect', effectIn.value.trim());
    if (wfIn.value.trim()) q.set('workflow', wfIn.value.trim());
    const qs = q.toString();
    navigate('/pending' + (qs ? '?' + qs : ''));
  });
  const body = h('div', { id: 'pending-page' });
  replace(ctx.main, h('h1', {}, 'Pending work'),
    h('p', { class: 'muted' }, 'Every intent in flight, oldest first: timers with their due time, effects queued for an executor or claimed by one (until its lease ends), built-in effects running. Times are the world\'s logical time; a lease is the daemon\'s clock.'),
    form, body);
  const cursors = [''];
  let first = true;
  const load = async () => {
    const t0 = performance.now();
    const q = new URLSearchParams({ limit: String(PAGE) });
    if (effect) q.set('effect', effect);
    if (workflow) q.set('workflow', workflow);
    const after = cursors[cursors.length - 1];
    if (after) q.set('after', after);
    let page;
    try {
      page = await get('/v1/pending?' + q, ctx.signal);
    } catch (err) {
      if (err instanceof APIError) { replace(body, errorBox(err)); return; }
      throw err;
    }
    const fetched = performance.now();
    const rows = page.intents || [];
    const prev = h('button', { type: 'button', id: 'pending-prev', disabled: cursors.length === 1 }, '← Previous');
    const next = h('button', { type: 'button', id: 'pending-next', disabled: !page.next }, 'Next →');
    prev.addEventListener('click', () => { cursors.pop(); load(); });
    next.addEventListener('click', () => { cursors.push(page.next); load(); });
    const start = (cursors.length - 1) * PAGE;
    replace(body,
      h('p', { id: 'pending-total' }, `${page.total} in flight` + (effect || workflow ? ' (filtered)' : '') + (rows.length ? `; ${start + 1}–${start + rows.length} shown` : '')),
      rows.length === 0 ? h('p', { class: 'muted' }, 'Nothing in flight.') :
        table(['Intent', 'Effect', 'Cell', 'Opened in', 'Due', 'Held by'], rows.map((it) => [
          h('a', { href: intentPath(it.hash), class: 'mono', title: it.hash }, short(it.hash)),
          h('a', { href: '/pending?effect=' + encodeURIComponent(it.effect) }, it.effect),
          h('a', { href: cellPath(it.workflow, it.key === undefined ? null : it.key) }, it.workflow + ' ' + JSON.stringify(it.key === undefined ? null : it.key)),
          h('a', { href: journalPath(it.emitted_at) }, 'step #' + it.emitted_at),
          it.due_ns ? timeCell(it.due_ns) : '',
          held(it)]), (i) => ({ 'data-pending': rows[i].hash, 'data-state': rows[i].state, 'data-due-ns': rows[i].due_ns ? String(rows[i].due_ns) : '' })),
      h('div', { class: 'toolbar' }, prev, h('span', { class: 'muted' }, 'page ' + cursors.length), next));
    if (first) {
      first = false;
      body.dataset.firstPageMs = (performance.now() - t0).toFixed(1);
      body.dataset.firstFetchMs = (fetched - t0).toFixed(1);
    }
    body.dataset.loaded = String(cursors.length);
  };
  await load();
}

function held(it) {
  switch (it.state) {
    case 'timer': return h('span', { class: 'pill' }, 'timer (built-in)');
    case 'running': return h('span', { class: 'pill live' }, 'running (built-in)');
    case 'claimed': return [h('span', { class: 'pill yes' }, 'claimed by ' + it.executor), h('div', { class: 'muted' }, 'lease until ' + new Date(it.lease_until).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC'))];
    case 'queued': return h('span', { class: 'pill no' }, 'queued for an executor');
    default: return it.state;
  }
}
