// A cell: its current row and its timeline, a page at a time: events in,
// steps, intents, frames, receipts, drops, faults, recovers. Selecting a
// step shows the state after it and the diff (RFC 6902) from the step
// before: time travel through the cell's history.
import { h, replace, table, pretty, compact, errorBox } from '../dom.js';
import { get, APIError } from '../api.js';
import { apiCell, cellsPath, intentPath, journalPath } from '../links.js';
import { manifestNames } from './cells.js';
import { timeCell, duration, isoTime, ago } from '../time.js';
import { intentLane, waitingWhy } from './lane.js';

const PAGE = 100;

export async function cellView(ctx, wf, key) {
  const head = h('div', { id: 'cell-head' });
  const tl = h('div', { id: 'timeline' });
  const panel = h('div', { id: 'step-panel', class: 'panel' }, h('p', { class: 'muted' }, 'Select a step to see the state after it.'));
  replace(ctx.main,
    h('h1', {}, h('a', { href: cellsPath(wf) }, wf), ' / ', h('span', { class: 'mono', id: 'cell-key' }, JSON.stringify(key))),
    head,
    h('h2', {}, 'Timeline'),
    h('div', { class: 'split' }, tl, panel));
  const summary = Promise.all([get(apiCell('cells', wf, key), ctx.signal), manifestNames(ctx.signal)]).then(([c, names]) => drawHead(head, c, names, ctx.signal), (err) => {
    if (err instanceof APIError && err.status === 404) replace(head, h('p', { class: 'muted', id: 'no-cell' }, 'No cell and no instance at this key now; its history follows.'));
    else if (err instanceof APIError) replace(head, errorBox(err));
    else throw err;
  });
  await Promise.all([summary, timeline(ctx, wf, key, tl, panel)]);
}

function drawHead(root, c, names, signal) {
  const inflight = c.inflight || [];
  replace(root, h('div', { class: 'cards' },
    c.pin ? h('div', { class: 'card pinned', id: 'cell-pin', 'data-pin': c.pin },
      h('div', { class: 'label' }, 'Pinned to an older manifest'),
      h('div', { class: 'value small' }, h('a', { href: '/manifest' }, names.get(c.pin) || 'manifest'), ' ', h('span', { class: 'mono' }, c.pin)),
      c.pin_reason ? h('div', { class: 'pin-reason', id: 'cell-pin-reason' }, 'Stays pinned at rest: ' + c.pin_reason) :
        h('div', { class: 'muted' }, 'Steps under it until at rest, then moves to the current manifest.')) :
      h('div', { class: 'card', id: 'cell-pin', 'data-pin': '' }, h('div', { class: 'label' }, 'Manifest'), h('div', { class: 'value small' }, 'current')),
    h('div', { class: 'card' }, h('div', { class: 'label' }, 'Status'),
      h('div', { class: 'value status-' + c.status, id: 'cell-status' }, c.status + (c.reason ? ': ' + c.reason : ''))),
    h('div', { class: 'card' }, h('div', { class: 'label' }, 'State hash'), h('div', { class: 'value small mono' }, c.state_hash || '—')),
    h('div', { class: 'card' }, h('div', { class: 'label' }, 'Size'), h('div', { class: 'value' }, String(c.size) + ' B')),
    h('div', { class: 'card' }, h('div', { class: 'label' }, 'In-flight intents'),
      h('div', { class: 'value small', id: 'cell-inflight' }, inflight.length === 0 ? 'none' :
        inflight.map((x) => h('div', {}, h('a', { class: 'mono', href: intentPath(x) }, x))))),
    h('div', { class: 'card' }, h('div', { class: 'label' }, 'Parked events'),
      h('div', { class: 'value', id: 'cell-parked' }, String(c.parked || 0) +
        (c.aside_module ? ' (module ' + c.aside_module + ' set aside)' : '')))),
  c.status === 'waiting' && inflight.length ? waitingWhy(inflight, signal) : null,
  h('h2', {}, 'State now'), h('pre', { class: 'json', id: 'cell-state' }, pretty(c.state)));
}

// timeline pages through /v1/timeline with its cursor; the first page's
// render time (request to rows in the DOM) is kept on the element as
// data-first-page-ms (of which data-first-fetch-ms is the answer's
// arrival), and to the frame drawn with them as data-first-paint-ms, for the
// browser test to report.
async function timeline(ctx, wf, key, root, panel) {
  const cursors = [''];
  let first = true;
  let selected = null;
  const load = async () => {
    const t0 = performance.now();
    const q = new URLSearchParams({ limit: String(PAGE) });
    const after = cursors[cursors.length - 1];
    if (after !== '') q.set('after', after);
    let page;
    try {
      page = await get(apiCell('timeline', wf, key) + '?' + q, ctx.signal);
    } catch (err) {
      if (err instanceof APIError) { replace(root, errorBox(err)); return; }
      throw err;
    }
    const fetched = performance.now();
    const entries = page.entries || [];
    const rows = [];
    const byRow = [];
    let prevStep = null;
    for (const e of entries) {
      let when = timeCell(e.now_ns);
      if (e.kind === 'step' && prevStep && e.now_ns && prevStep.now_ns) {
        when = [when, h('div', { class: 'delta', 'data-delta-ns': String(e.now_ns - prevStep.now_ns) },
          '+' + duration(e.now_ns - prevStep.now_ns) + ' after step #' + prevStep.seq)];
      }
      if (e.kind === 'step') prevStep = e;
      rows.push([h('a', { href: journalPath(e.seq), class: 'mono' }, String(e.seq)), when, h('span', { class: 'kind kind-' + e.kind }, e.kind), detail(e)]);
      byRow.push(e);
    }
    const tbl = table(['Seq', 'Time', 'Kind', 'What'], rows, (i) => ({
      class: byRow[i].kind === 'step' ? 'selectable' : '', 'data-seq': byRow[i].seq, 'data-kind': byRow[i].kind,
    }));
    tbl.id = 'timeline-table';
    tbl.addEventListener('click', (ev) => {
      if (ev.target.closest('a')) return;
      const tr = ev.target.closest('tr[data-kind="step"]');
      if (!tr) return;
      const e = byRow.find((x) => String(x.seq) === tr.dataset.seq);
      select(tr, e);
    });
    const select = (tr, e) => {
      if (selected) selected.classList.remove('selected');
      selected = tr;
      tr.classList.add('selected');
      drawStep(panel, e);
    };
    const prevBtn = h('button', { type: 'button', id: 'timeline-prev', disabled: cursors.length === 1 }, '← Earlier');
    const nextBtn = h('button', { type: 'button', id: 'timeline-next', disabled: !page.next }, 'Later →');
    prevBtn.addEventListener('click', () => { cursors.pop(); load(); });
    nextBtn.addEventListener('click', () => { cursors.push(String(page.next)); load(); });
    const dropped = page.first && cursors.length === 1
      ? h('p', { class: 'muted', id: 'timeline-retained' }, `The journal starts at seq ${page.first}: retention (aosd gc --drop-journal) dropped what came before, so the timeline starts there.`)
      : null;
    replace(root, dropped, intentLane(entries),
      entries.length === 0 ? h('p', { class: 'muted' }, 'Nothing in the journal reached this cell.') : tbl,
      h('div', { class: 'toolbar' }, prevBtn, h('span', { class: 'muted', id: 'timeline-count' }, 'page ' + cursors.length + ': ' + entries.length + ' entries'), nextBtn));
    if (first) {
      first = false;
      root.dataset.firstPageMs = (performance.now() - t0).toFixed(1);
      root.dataset.firstFetchMs = (fetched - t0).toFixed(1);
      // And once the frame holding the rows is drawn: the callback of the
      // next animation frame runs before that paint, a task queued from it
      // after.
      requestAnimationFrame(() => setTimeout(() => { root.dataset.firstPaintMs = (performance.now() - t0).toFixed(1); }));
    }
    // Select the page's last step, so its state and diff show at once.
    const steps = tbl.querySelectorAll('tr[data-kind="step"]');
    if (steps.length > 0) {
      const tr = steps[steps.length - 1];
      select(tr, byRow.find((x) => String(x.seq) === tr.dataset.seq));
    }
    root.dataset.loaded = String(cursors.length);
  };
  await load();
}

function drawStep(panel, e) {
  const ops = Array.isArray(e.diff) ? e.diff : [];
  replace(panel,
    h('h2', { id: 'step-title' }, 'After step ', h('a', { href: journalPath(e.seq) }, '#' + e.seq), ' (input ', h('a', { href: journalPath(e.input) }, '#' + e.input), ')'),
    e.now_ns ? h('p', { class: 'muted', id: 'step-time' }, 'At ' + isoTime(e.now_ns) + ' (' + ago(e.now_ns) + '), its input\'s logical time.') : null,
    h('p', { class: 'muted', id: 'state-source', 'data-source': e.state_source || '' }, (e.deleted ? 'The step deleted the cell. ' : '') + sourceText(e)),
    h('h2', {}, 'Diff from the step before'),
    ops.length === 0 ? h('p', { class: 'muted', id: 'state-diff' }, e.diff === undefined ? 'No diff available.' : 'No change.') :
      table(['Op', 'Path', 'Value'], ops.map((op) => [op.op, h('span', { class: 'mono' }, op.path + (op.from !== undefined ? ' ← ' + op.from : '')), h('span', { class: 'mono' }, compact(op.value, 200))]),
        (i) => ({ class: 'diff-' + ops[i].op })),
    h('h2', {}, 'State'),
    h('pre', { class: 'json', id: 'step-state' }, e.state === undefined ? '(not available)' : pretty(e.state)));
  const d = panel.querySelector('table');
  if (d) d.id = 'state-diff';
}

function sourceText(e) {
  switch (e.state_source) {
    case 'cas': return 'State read from the content-addressed store.';
    case 'live': return 'State as the cell holds it now.';
    case 'recomputed': return 'State recomputed by re-running the journal in a scratch world (no store keeps it).';
    case 'none': return 'The step left no state.';
    case 'unavailable': return 'State unavailable: ' + (e.state_reason || 'no reason given');
    case undefined: case null: case '': return '';
    default: return 'State source: ' + e.state_source;
  }
}

// detail is one line about an entry, with links to what it names.
export function detail(e) {
  // Each hash its own link, with a separator between them (two side by
  // side read as one).
  const intentLinks = (xs) => (xs || []).map((x, i) => [i > 0 ? h('span', { class: 'sep' }, ', ') : null,
    h('a', { href: intentPath(x), class: 'mono', 'data-intent': x, title: x }, short(x))]);
  switch (e.kind) {
    case 'event': return [e.schema, ' ', h('span', { class: 'mono' }, compact(e.value))];
    case 'step': {
      const parts = ['input ', h('a', { href: journalPath(e.input) }, '#' + e.input), ' → ',
        e.deleted || !e.state_hash ? 'deleted' : h('span', { class: 'mono' }, 'state ' + short(e.state_hash))];
      if (e.emitted && e.emitted.length) parts.push(', emitted ', e.emitted.map((s) => h('a', { href: journalPath(s) }, '#' + s + ' ')));
      if (e.intents && e.intents.length) parts.push(', intents ', intentLinks(e.intents));
      return parts;
    }
    case 'intent': return [e.effect + ' ', intentLinks(e.intents), ' (emitted at ', h('a', { href: journalPath(e.input) }, '#' + e.input), ')'];
    case 'fault': return [h('span', { class: 'status-failed' }, 'fault'), ' at input ', h('a', { href: journalPath(e.input) }, '#' + e.input), ': ' + e.reason];
    case 'recover': return [e.action + ' of fault ', h('a', { href: journalPath(e.fault) }, '#' + e.fault),
      ` (input ${e.input}, ${e.parked || 0} parked ${e.dropped ? 'dropped' : 'delivered'}${e.skipped ? ', ' + e.skipped + ' skipped' : ''})`];
    case 'receipt': case 'drop':
      return [`${e.effect} ${e.status} from ${e.executor}`, e.attempt ? ` (attempt ${e.attempt})` : '', ' for ', intentLinks(e.intents),
        e.reason ? ': ' + e.reason : '', e.value !== undefined ? [' ', h('span', { class: 'mono' }, compact(e.value))] : ''];
    case 'frame': return [`frame ${e.frame_seq} from ${e.executor}: `, h('span', { class: 'mono' }, compact(e.value))];
    case 'cancel': return [`${e.effect} `, intentLinks(e.intents), ` cancelled by ${e.by}`, e.reason ? ': ' + e.reason : ''];
    default: return h('span', { class: 'mono' }, compact(e));
  }
}

export function short(hash) {
  return typeof hash === 'string' && hash.startsWith('sha256:') ? hash.slice(0, 19) + '…' : String(hash);
}
