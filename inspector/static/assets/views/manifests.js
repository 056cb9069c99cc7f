// Live manifests and pins: the current manifest and each older one an
// apply --pin kept for the instances pinned to it (GET /v1/manifests), the
// instances pinned to each (GET /v1/cells/{workflow}?pin=HASH), and retire
// (POST /v1/manifests/{hash}/retire) for a drained older one. Everything
// shown is what those answers say.
import { h, replace, table, pretty, errorBox } from '../dom.js';
import { get, post, APIError, Unauthorized } from '../api.js';
import { cellPath, cellsPath, journalPath } from '../links.js';
import { dryRunButton } from './upgrade.js';

// PINNED_SHOWN is how many pinned instances of one workflow a list links;
// more are a link to the workflow's cells filtered by the pin.
const PINNED_SHOWN = 20;
const STATUSES = ['running', 'waiting', 'completed', 'failed', 'parked'];

export function shortHash(hash) {
  return typeof hash === 'string' && hash.startsWith('sha256:') ? hash.slice(0, 19) + '…' : String(hash);
}

// pinCounts is a manifest's instances by status, e.g. "waiting 1, completed 2 (1 at rest)".
function pinCounts(m) {
  const p = m.pinned || {};
  const parts = STATUSES.filter((s) => p[s]).map((s) => s + ' ' + p[s]);
  if (m.pinned_at_rest) parts.push(m.pinned_at_rest + ' pinned at rest');
  return parts.length ? parts.join(', ') : 'none';
}

// manifestsTable lists live manifests; retire, when given, is called with
// a drained older manifest to offer a button for it.
export function manifestsTable(ms, retire) {
  const head = ['Name', 'Hash', 'Applied at seq', 'Current', 'Instances on it', 'Intents in flight', 'Drained'];
  if (retire) head.push('');
  return table(head, ms.map((m) => {
    const row = [
      m.name,
      h('span', { class: 'mono', title: m.hash }, m.hash),
      h('a', { href: journalPath(m.seq) }, '#' + m.seq),
      h('span', { class: 'pill ' + (m.current ? 'yes' : 'pinned') }, m.current ? 'current' : 'older (pinned)'),
      pinCounts(m),
      String(m.intents),
      m.current ? '—' : h('span', { class: 'pill ' + (m.drained ? 'yes' : 'no') }, m.drained ? 'drained' : 'not drained'),
    ];
    if (retire) row.push(!m.current && m.drained ? retire(m) : '');
    return row;
  }), (i) => ({ 'data-manifest': ms[i].hash, 'data-current': String(!!ms[i].current), class: ms[i].current ? '' : 'pinned-row' }));
}

// pinnedInstances lists, for each workflow, the instances pinned to the
// manifest hash, each linking its cell page.
export async function pinnedInstances(hash, workflows, signal) {
  const pages = await Promise.all(workflows.map((wf) =>
    get('/v1/cells/' + encodeURIComponent(wf) + '?' + new URLSearchParams({ pin: hash, limit: String(PINNED_SHOWN) }), signal)
      .then((p) => [wf, p], (err) => {
        if (err instanceof APIError && err.status === 404) return [wf, { cells: [] }]; // not in the current manifest
        throw err;
      })));
  const items = [];
  for (const [wf, p] of pages) {
    for (const c of p.cells || []) {
      items.push(h('li', { 'data-pinned-cell': wf + ' ' + JSON.stringify(c.key) },
        h('a', { href: cellPath(wf, c.key) }, wf + ' ' + JSON.stringify(c.key)),
        ' ', h('span', { class: 'status-' + c.status }, c.status),
        c.pin_reason ? h('span', { class: 'muted' }, ' (stays pinned at rest: ' + c.pin_reason + ')') : null));
    }
    if (p.next) items.push(h('li', {}, h('a', { href: cellsPath(wf) + '?pin=' + encodeURIComponent(hash) }, 'more of ' + wf + ' pinned to it…')));
  }
  return items.length ? h('ul', { class: 'pinned-list', 'data-pinned-to': hash }, items) :
    h('p', { class: 'muted', 'data-pinned-to': hash }, 'No instance is pinned to it.');
}

// liveManifestsSection is the manifest page's section: every live
// manifest, the instances pinned to each older one, and retire.
export async function liveManifestsSection(ctx, root) {
  const result = h('div', { id: 'retire-result' });
  const upgradeOut = h('div', { id: 'upgrade-result' });
  const load = async () => {
    const [page, status] = await Promise.all([get('/v1/manifests', ctx.signal), get('/v1/status', ctx.signal)]);
    const ms = page.manifests || [];
    const wfs = Object.keys(status.cells || {}).sort();
    const older = ms.filter((m) => !m.current);
    const lists = await Promise.all(older.map((m) => pinnedInstances(m.hash, wfs, ctx.signal)));
    const retire = (m) => {
      const btn = h('button', { type: 'button', class: 'retire', 'data-retire': m.hash }, 'Retire');
      btn.addEventListener('click', async () => {
        btn.disabled = true;
        replace(result, h('p', { class: 'muted' }, 'Retiring ' + m.name + '…'));
        try {
          const r = await post('/v1/manifests/' + encodeURIComponent(m.hash) + '/retire', undefined, ctx.signal);
          const b = r.body || {};
          replace(result, r.ok ?
            h('p', { class: 'ok', id: 'retire-ok' }, 'Retired ' + b.name + ' (' + b.hash + ') at seq ', h('a', { href: journalPath(b.seq) }, '#' + b.seq), '.') :
            errorBox(new Error(r.status + ' ' + (b.error ? b.error.code + ': ' + b.error.message + (b.error.where ? ' (' + b.error.where + ')' : '') : pretty(b)))));
          await load(); // what the world says now
        } catch (e) {
          if (e instanceof Unauthorized) ctx.fail(e);
          else replace(result, errorBox(e));
        }
      });
      return btn;
    };
    replace(root,
      h('p', { class: 'muted' }, ms.length > 1 ?
        'An apply with pin keeps the manifest it replaced live while instances are pinned to it; each steps under its own manifest. An older manifest can be retired once drained.' :
        'One live manifest: no instance is pinned to an older one.'),
      ms.length === 0 ? h('p', { class: 'muted' }, 'No manifest applied yet.') : manifestsTable(ms, retire),
      result,
      older.map((m, i) => [h('h3', {}, 'Pinned to ' + m.name + ' (' + shortHash(m.hash) + ')'), lists[i],
        m.drained ? null : h('div', { class: 'toolbar' }, dryRunButton(ctx, m, wfs, upgradeOut),
          h('span', { class: 'muted' }, 'replays each cell pinned to it under the current code and says whether it could move (nothing is journaled)'))]),
      upgradeOut);
    root.dataset.loaded = String(Number(root.dataset.loaded || '0') + 1);
  };
  await load();
}
