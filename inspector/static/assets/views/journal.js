// The journal: a page of records at a time (from a seq, a limit, kind
// filters), a record's full body, and live follow: the NDJSON stream of
// /v1/journal?follow=true read with fetch, appended as records become
// durable, with at most MAX_ROWS rows kept in the page. Once retention
// (aosd gc --drop-journal) dropped the oldest records, the journal starts
// at the status's journal_first: the page never asks from below it, and a
// link from before it (410 truncated) offers the first record held.
import { h, replace, table, pretty, compact, errorBox } from '../dom.js';
import { get, lines, APIError } from '../api.js';
import { cellPath, intentPath, journalPath } from '../links.js';
import { navigate } from '../app.js';
import { timeCell } from '../time.js';

const PAGE = 100;
const MAX_ROWS = 1000;
const KINDS = ['event', 'step', 'intent', 'receipt', 'drop', 'frame', 'cancel', 'fault', 'recover', 'manifest', 'config', 'checkpoint', 'snapshot', 'world'];

export async function journalView(ctx, seqParam) {
  const params = new URLSearchParams(location.search);
  const kinds = (params.get('kind') || '').split(',').filter((k) => KINDS.includes(k));
  const focus = seqParam !== undefined && /^\d+$/.test(seqParam) ? Number(seqParam) : null;
  let from = focus;
  if (from === null && params.has('from') && /^\d+$/.test(params.get('from'))) from = Number(params.get('from'));
  // The status says where the journal starts and ends; a stopped world
  // does not answer it, and a page from a given seq does without.
  let s = null;
  try { s = await get('/v1/status', ctx.signal); } catch (e) { if (!(e instanceof APIError) || from === null) throw e; }
  const first = s && s.journal_first > 1 ? s.journal_first : 0; // 0: nothing dropped, from the start
  // Seqs start at 1: the default page, and any from below it, starts there.
  if (from === null) from = Math.max(first, 1, s.journal_height - PAGE + 1);
  from = Math.max(from, 1);

  const boxes = KINDS.map((k) => h('label', {}, h('input', { type: 'checkbox', value: k, checked: kinds.includes(k), 'data-kind-filter': k }), ' ' + k));
  const follow = h('input', { type: 'checkbox', id: 'follow' });
  const fromInput = h('input', { type: 'number', id: 'journal-from', min: 1, value: String(from), size: 8 });
  const rows = h('tbody', { id: 'journal-rows' });
  const detailPanel = h('div', { id: 'record', class: 'panel' }, h('p', { class: 'muted' }, 'Select a record to see its body.'));
  const live = h('span', { class: 'pill', id: 'follow-state' }, 'paused');
  const err = h('div', {});
  const nav = h('div', { class: 'toolbar' });
  const go = h('form', { class: 'toolbar', id: 'journal-form' },
    h('label', { for: 'journal-from' }, 'From seq'), fromInput, h('button', { type: 'submit' }, 'Show'),
    h('span', { class: 'muted' }, 'Kinds:'), boxes,
    h('label', {}, follow, ' Follow live'), live);
  const selectedKinds = () => boxes.map((b) => b.querySelector('input')).filter((i) => i.checked).map((i) => i.value);
  const here = (f) => '/journal' + '?from=' + f + (selectedKinds().length ? '&kind=' + selectedKinds().join(',') : '');
  go.addEventListener('submit', (ev) => { ev.preventDefault(); navigate(here(fromInput.value || '1')); });
  for (const b of boxes) b.querySelector('input').addEventListener('change', () => navigate(here(from)));

  replace(ctx.main, h('h1', {}, 'Journal'), go, err,
    h('div', { class: 'split' }, h('div', {}, h('table', { id: 'journal-table' },
      h('thead', {}, h('tr', {}, ['Seq', 'Time', 'Kind', 'Summary'].map((x) => h('th', {}, x)))), rows), nav), detailPanel));

  let last = from - 1;
  // Logical time: a stamped record's own now_ns; a step's is its input's,
  // an intent's its step's, when those are among the records read here.
  const times = new Map();
  const timeOf = (rec) => {
    const b = rec.body || {};
    let t = b.stamp && b.stamp.now_ns;
    if (!t && rec.kind === 'step') t = times.get(b.input);
    if (!t && rec.kind === 'fault') t = times.get(b.input);
    if (!t && rec.kind === 'intent') t = times.get(b.emitted_at);
    if (t) times.set(rec.seq, t);
    return t;
  };
  const add = (rec) => {
    if (rec.error) { replace(err, errorBox(new Error(rec.error.code + ': ' + rec.error.message))); return; }
    last = rec.seq;
    const tr = h('tr', { class: 'selectable' + (rec.seq === focus ? ' highlight' : ''), 'data-seq': rec.seq, 'data-kind': rec.kind },
      h('td', { class: 'mono' }, String(rec.seq)), h('td', {}, timeCell(timeOf(rec))), h('td', {}, h('span', { class: 'kind kind-' + rec.kind }, rec.kind)), h('td', { class: 'wrap' }, summary(rec)));
    if (times.size > 4 * MAX_ROWS) times.clear();
    tr.addEventListener('click', (ev) => { if (!ev.target.closest('a')) showRecord(detailPanel, rec); });
    rows.appendChild(tr);
    while (rows.childElementCount > MAX_ROWS) rows.firstElementChild.remove();
    if (rec.seq === focus) showRecord(detailPanel, rec);
  };

  const q = new URLSearchParams({ from: String(from), limit: String(PAGE) });
  if (kinds.length) q.set('kind', kinds.join(','));
  try {
    await lines('/v1/journal?' + q, add, ctx.signal);
  } catch (e) {
    if (e instanceof APIError && e.journalFirst && e.body && e.body.error && e.body.error.code === 'truncated') {
      replace(err, h('div', { class: 'error', role: 'alert', id: 'journal-truncated' },
        `Records before seq ${e.journalFirst} were dropped by retention (aosd gc --drop-journal). `,
        h('a', { href: here(e.journalFirst), id: 'journal-first' }, `Show from seq ${e.journalFirst}`)));
      return;
    }
    if (e instanceof APIError) { replace(err, errorBox(e)); return; }
    throw e;
  }
  const pageEnd = last;
  const earlier = from > Math.max(first, 1)
    ? h('a', { href: here(Math.max(first, from - PAGE)), id: 'journal-earlier' }, '← Earlier')
    : h('span', { class: 'muted', id: 'journal-earlier' }, first ? `starts at seq ${first} (retention dropped what came before)` : 'the start');
  replace(nav,
    earlier,
    h('span', { class: 'muted', id: 'journal-page' }, rows.childElementCount === 0 ? `no records from seq ${from}` : `seqs ${from}–${pageEnd}`),
    h('a', { href: here(pageEnd + 1), id: 'journal-later' }, 'Later →'));

  // Live follow: stream from after the last record shown.
  let ac = null;
  const stop = () => { if (ac) { ac.abort(); ac = null; } replace(live, 'paused'); live.className = 'pill'; };
  ctx.onCleanup(stop);
  follow.addEventListener('change', () => {
    if (!follow.checked) { stop(); return; }
    ac = new AbortController();
    const mine = ac;
    ctx.signal.addEventListener('abort', () => mine.abort());
    const fq = new URLSearchParams({ from: String(last + 1), follow: 'true' });
    if (kinds.length) fq.set('kind', kinds.join(','));
    replace(live, 'live'); live.className = 'pill live';
    lines('/v1/journal?' + fq, add, mine.signal).catch((e) => {
      if (e.name === 'AbortError' || mine.signal.aborted) return;
      ctx.fail(e);
    });
  });
}

function summary(rec) {
  const b = rec.body || {};
  switch (rec.kind) {
    case 'event': return [b.schema + ' ', h('span', { class: 'mono' }, compact(b.value, 90)),
      (b.targets || []).map((t) => [' → ', h('a', { href: cellPath(t.workflow, t.key) }, t.workflow + ' ' + JSON.stringify(t.key))])];
    case 'step': return [h('a', { href: cellPath(b.workflow, b.key) }, b.workflow + ' ' + JSON.stringify(b.key)), ' input ', h('a', { href: journalPath(b.input) }, '#' + b.input)];
    case 'intent': return [b.effect + ' ', h('a', { href: intentPath(b.hash), class: 'mono' }, b.hash.slice(0, 19) + '…'), ' from ', h('a', { href: cellPath(b.origin_workflow, b.origin_key) }, JSON.stringify(b.origin_key))];
    case 'receipt': case 'drop': {
      const r = b.receipt || {};
      return [`${r.effect} ${r.status} from ${r.executor} for `, h('a', { href: intentPath(r.intent_hash), class: 'mono' }, String(r.intent_hash).slice(0, 19) + '…'), b.reason ? ': ' + b.reason : ''];
    }
    case 'frame': return [`frame ${b.seq} from ${b.executor} for `, h('a', { href: intentPath(b.intent), class: 'mono' }, String(b.intent).slice(0, 19) + '…')];
    case 'fault': return [h('a', { href: cellPath(b.workflow, b.key) }, b.workflow + ' ' + JSON.stringify(b.key)), ': ' + b.reason];
    case 'manifest': return [b.name + ' ', h('span', { class: 'mono' }, b.hash)];
    case 'world': return ['identity ', h('span', { class: 'mono' }, b.id)];
    case 'recover': return [b.action + ' ', h('a', { href: cellPath(b.workflow, b.key) }, b.workflow + ' ' + JSON.stringify(b.key)),
      ` (${b.parked} parked ${b.drop_parked ? 'dropped' : 'delivered'})`];
    case 'module': return [`${b.action} ${b.module} (${(b.workflows || []).join(', ')})`, b.action === 'resume' ? `: ${b.parked} parked delivered` : ''];
    case 'cancel': return [`${b.effect} `, h('a', { href: intentPath(b.intent), class: 'mono' }, String(b.intent).slice(0, 19) + '…'), ' of ',
      h('a', { href: cellPath(b.workflow, b.key) }, b.workflow + ' ' + JSON.stringify(b.key)), ` cancelled by ${b.by}`, b.reason ? ': ' + b.reason : ''];
    default: return h('span', { class: 'mono' }, compact(b, 120));
  }
}

function showRecord(panel, rec) {
  replace(panel, h('h2', {}, 'Record ', h('a', { href: journalPath(rec.seq) }, '#' + rec.seq), ' (' + rec.kind + ')'),
    h('pre', { class: 'json', id: 'record-body' }, pretty(rec.body)));
}
