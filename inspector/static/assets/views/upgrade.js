// The upgrade dry run of the manifest page: for an older live manifest
// with instances pinned to it, POST /v1/upgrade with dry_run for each
// workflow that has some, and the report per cell: would move, or where
// the current code diverges from its history (the record's seq and both
// hashes). Nothing is journaled; moving is `aosd upgrade` (or the same
// request without dry_run).
import { h, replace, table, errorBox } from '../dom.js';
import { get, post, APIError, Unauthorized } from '../api.js';
import { cellPath, journalPath, intentPath } from '../links.js';

// dryRunButton offers the dry run for manifest m; workflows are the
// world's; the report goes into out.
export function dryRunButton(ctx, m, workflows, out) {
  const btn = h('button', { type: 'button', class: 'upgrade-dry-run', 'data-upgrade-dry-run': m.hash }, 'Upgrade dry run');
  btn.addEventListener('click', async () => {
    btn.disabled = true;
    replace(out, h('p', { class: 'muted' }, 'Replaying the cells pinned to ' + m.name + ' under the current manifest…'));
    try {
      replace(out, await dryRun(ctx, m, workflows));
    } catch (e) {
      if (e instanceof Unauthorized) ctx.fail(e);
      else replace(out, errorBox(e));
    } finally { btn.disabled = false; }
  });
  return btn;
}

async function dryRun(ctx, m, workflows) {
  // The workflows with an instance pinned to m.
  const has = await Promise.all(workflows.map((wf) =>
    get('/v1/cells/' + encodeURIComponent(wf) + '?' + new URLSearchParams({ pin: m.hash, limit: '1' }), ctx.signal)
      .then((p) => (p.cells || []).length > 0, (err) => { if (err instanceof APIError && err.status === 404) return false; throw err; })));
  const wfs = workflows.filter((_, i) => has[i]);
  if (wfs.length === 0) return h('p', { class: 'muted', id: 'upgrade-report' }, 'No instance is pinned to ' + m.name + ': nothing to move.');
  const rows = [];
  const errors = [];
  let current = '';
  for (const wf of wfs) {
    const r = await post('/v1/upgrade', { workflow: wf, all: true, dry_run: true }, ctx.signal);
    const b = r.body || {};
    if (!r.ok) { errors.push(errorBox(new Error(wf + ': ' + r.status + ' ' + (b.error ? b.error.code + ': ' + b.error.message : JSON.stringify(b))))); continue; }
    current = b.manifest_name ? b.manifest_name + ' (' + b.manifest_hash + ')' : current;
    for (const c of b.cells || []) if (!c.from || c.from === m.hash) rows.push([wf, c]);
  }
  const counts = {};
  for (const [, c] of rows) counts[c.outcome] = (counts[c.outcome] || 0) + 1;
  return h('div', { id: 'upgrade-report', 'data-manifest': m.hash },
    h('h3', {}, 'Upgrade dry run: ' + m.name + ' → ' + (current || 'the current manifest')),
    h('p', { class: 'muted' }, 'Each cell pinned to it, replayed under the current code beside its history; nothing was journaled. ' +
      Object.entries(counts).map(([k, v]) => v + ' ' + k.replace('_', ' ')).join(', ') + '.'),
    errors,
    rows.length === 0 ? null : table(['Workflow', 'Key', 'Status', 'Outcome', 'Why'], rows.map(([wf, c]) => [
      wf, h('a', { href: cellPath(wf, c.key) }, JSON.stringify(c.key)), h('span', { class: 'status-' + c.status }, c.status || ''),
      h('span', { class: 'pill ' + (c.outcome === 'would_move' ? 'yes' : 'no') }, outcomeText(c.outcome)), why(c)]),
    (i) => ({ 'data-upgrade-cell': JSON.stringify(rows[i][1].key), 'data-outcome': rows[i][1].outcome })));
}

function outcomeText(o) {
  switch (o) {
    case 'would_move': return 'could move';
    case 'diverged': return 'diverges';
    default: return o ? o.replace('_', ' ') : '';
  }
}

// why explains a cell's outcome: a divergence's record and both hashes.
function why(c) {
  const d = c.divergence;
  if (d) {
    const hash = (x) => (typeof x === 'string' && x.startsWith('sha256:') && d.what === 'intent' ? h('a', { href: intentPath(x), class: 'mono' }, x) : h('span', { class: 'mono' }, String(x)));
    return h('div', { class: 'divergence' }, 'diverges at ', h('a', { href: journalPath(d.seq) }, 'seq ' + d.seq),
      ` (${d.kind || ''}${d.input ? ', input #' + d.input : ''}): ${d.what}${d.field ? ' field ' + d.field : ''}`,
      d.want !== undefined ? h('div', {}, 'journal: ', hash(d.want)) : null,
      d.got !== undefined ? h('div', {}, 'current code: ', hash(d.got)) : null,
      d.message ? h('div', { class: 'muted' }, d.message) : null);
  }
  if (c.reason) return c.reason;
  if (c.outcome === 'would_move') {
    // inputs: the seqs of the cell's inputs replayed; since: where its
    // history starts ("creation", or a snapshot's seq).
    const n = Array.isArray(c.inputs) ? c.inputs.length : (c.inputs || 0);
    const since = /^\d+$/.test(String(c.since)) ? 'seq ' + c.since : String(c.since || 'creation');
    return `reproduces its ${n} input${n === 1 ? '' : 's'} (since ${since}); state ${c.state_hash || ''}`;
  }
  return '';
}
