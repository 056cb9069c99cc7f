// World status: the manifest, height, quiescence, instance counts, in-flight
// intents, queued effects, and live rates computed from two polls of the
// Prometheus counters (/metrics), the status's journaled counts and the
// journal height.
import { h, replace, card, table } from '../dom.js';
import { get, text } from '../api.js';
import { cellsPath } from '../links.js';
import { manifestsTable, pinnedInstances, shortHash } from './manifests.js';

const POLL_MS = 2000;

// sums adds up each metric's samples over its labels.
export function sums(prom) {
  const out = {};
  for (const line of prom.split('\n')) {
    if (line === '' || line[0] === '#') continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const v = Number(m[3]);
    if (Number.isFinite(v)) out[m[1]] = (out[m[1]] || 0) + v;
  }
  return out;
}

function rate(now, prev, name) {
  if (!prev) return '…';
  const dt = (now.t - prev.t) / 1000;
  const d = (now.m[name] || 0) - (prev.m[name] || 0);
  return dt > 0 ? (d / dt).toFixed(1) + '/s' : '…';
}

export async function statusView(ctx) {
  const root = h('div', { id: 'status-view' });
  replace(ctx.main, h('h1', {}, 'World status'), root);
  let prev = null;
  let timer = null;
  ctx.onCleanup(() => clearTimeout(timer));
  const tick = async () => {
    try {
      const [s, prom] = await Promise.all([get('/v1/status', ctx.signal), text('/metrics', ctx.signal).catch(() => '')]);
      const now = { t: performance.now(), m: sums(prom) };
      now.m.__height = s.journal_height;
      now.m.__receipts = (s.journaled || {}).receipt || 0;
      const live = (s.pinned || []).length > 0 ? await liveManifests(s, ctx.signal) : null;
      draw(root, s, now, prev, live);
      prev = now;
    } catch (err) {
      ctx.fail(err);
      return;
    }
    if (!ctx.signal.aborted) timer = setTimeout(tick, POLL_MS);
  };
  await tick();
}

// liveManifests is the status page's section when an apply --pin keeps
// older manifests live (the status's pinned): every live manifest and the
// instances pinned to each older one, linked.
async function liveManifests(s, signal) {
  const ms = (await get('/v1/manifests', signal)).manifests || [];
  const wfs = Object.keys(s.cells || {}).sort();
  const older = ms.filter((m) => !m.current);
  const lists = await Promise.all(older.map((m) => pinnedInstances(m.hash, wfs, signal)));
  return h('div', { id: 'live-manifests' },
    h('h2', {}, 'Live manifests (', h('a', { href: '/manifest' }, 'retire on the manifest page'), ')'),
    manifestsTable(ms),
    older.map((m, i) => [h('h3', {}, 'Pinned to ' + m.name + ' (' + shortHash(m.hash) + ')'), lists[i]]));
}

function draw(root, s, now, prev, live) {
  const inst = s.instances || {};
  const wfs = Object.keys(s.cells || {}).sort();
  replace(root,
    h('div', { class: 'cards' },
      card('Manifest', s.manifest_name || '(none applied)', { id: 'manifest-name' }),
      card('Manifest hash', s.manifest_hash || '—', { id: 'manifest-hash', small: true }),
      card('Journal height', String(s.journal_height), { id: 'height' }),
      card('Quiescent', h('span', { class: 'pill ' + (s.quiescent ? 'yes' : 'no') }, s.quiescent ? 'yes' : 'no'), { id: 'quiescent' }),
      card('Running', String(inst.running || 0), { id: 'running' }),
      card('Waiting', String(inst.waiting || 0), { id: 'waiting' }),
      card('Completed', String(inst.completed || 0), { id: 'completed' }),
      card('Failed', String(inst.failed || 0), { id: 'failed' }),
      card('Parked', String(inst.parked || 0), { id: 'parked' }),
      card('Parked events', String(s.parked || 0), { id: 'parked-events' }),
      card('Modules set aside', (s.aside || []).length === 0 ? 'none' :
        (s.aside || []).map((m) => h('div', {}, m.name + ': ' + m.waiting + ' waiting')), { id: 'aside' }),
      card('In-flight intents', String(s.inflight), { id: 'inflight' }),
      card('Queued effects', String(s.queued_effects), { id: 'queued' }),
      card('Events in', rate(now, prev, 'aos_events_ingested_total'), { id: 'rate-events' }),
      card('Steps', rate(now, prev, 'aos_steps_total'), { id: 'rate-steps' }),
      card('Receipts', rate(now, prev, '__receipts'), { id: 'rate-receipts' }),
      card('Journal records', rate(now, prev, '__height'), { id: 'rate-records' }),
      card('Since snapshot', String(s.records_since_snapshot) + ' records', { id: 'since-snapshot' })),
    live,
    h('h2', {}, 'Workflows'),
    wfs.length === 0 ? h('p', { class: 'muted' }, 'No workflows yet: apply a manifest.') :
      table(['Workflow', 'Cells'], wfs.map((wf) => [h('a', { href: cellsPath(wf), 'data-workflow': wf }, wf), String(s.cells[wf])])),
    h('p', { class: 'muted' }, 'Rates are computed from two polls ' + POLL_MS / 1000 + ' s apart of /metrics (events in, steps), the status\'s journaled receipts, and the journal height.'));
}
