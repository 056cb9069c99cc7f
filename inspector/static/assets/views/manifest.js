// The manifest in force, and what a proposed one would do: the diff a dry
// run of POST /v1/apply reports (nothing is applied), and a shadow run
// (POST /v1/shadow: the proposal run on a copy of the world).
import { h, replace, table, pretty, errorBox } from '../dom.js';
import { get, post, APIError, Unauthorized } from '../api.js';
import { cellPath, intentPath } from '../links.js';
import { liveManifestsSection } from './manifests.js';

export async function manifestView(ctx) {
  const current = h('div', { id: 'manifest-current' }, h('p', { class: 'muted' }, 'Loading…'));
  const files = h('input', { type: 'file', id: 'manifest-files', multiple: true, accept: '.json,application/json' });
  const name = h('input', { type: 'text', id: 'manifest-name', value: 'manifest.json', size: 20 });
  const area = h('textarea', { id: 'manifest-text', placeholder: 'or paste one manifest JSON file here', spellcheck: 'false' });
  const windowIn = h('input', { type: 'number', id: 'shadow-window', min: 0, value: '1000', size: 6 });
  const dry = h('button', { type: 'button', class: 'primary', id: 'dry-run' }, 'Diff (dry-run apply)');
  const shadow = h('button', { type: 'button', id: 'shadow-run' }, 'Shadow run');
  const out = h('div', { id: 'proposal-result' });
  const live = h('div', { id: 'live-manifests' }, h('p', { class: 'muted' }, 'Loading…'));
  replace(ctx.main, h('h1', {}, 'Manifest'), current,
    h('h2', {}, 'Live manifests'), live,
    h('h2', {}, 'Propose a manifest'),
    h('p', { class: 'muted' }, 'Upload the manifest\'s JSON files (a directory\'s *.json, merged in name order) or paste one. Wasm artifacts the world already stores need not be sent. Nothing here changes the world: the diff is a dry run, the shadow run works on a copy.'),
    h('div', { class: 'toolbar' }, h('label', { for: 'manifest-files' }, 'Files'), files),
    h('div', { class: 'toolbar' }, h('label', { for: 'manifest-name' }, 'Pasted file name'), name), area,
    h('div', { class: 'toolbar' }, dry, shadow, h('label', { for: 'shadow-window' }, 'Shadow: re-feed the last'), windowIn, h('span', { class: 'muted' }, 'ingress events')),
    out);

  const proposal = async () => {
    const list = [];
    const picked = [...files.files].sort((a, b) => a.name.localeCompare(b.name));
    for (const f of picked) list.push({ name: f.name, content: parse(await f.text(), f.name) });
    if (area.value.trim() !== '') list.push({ name: name.value.trim() || 'manifest.json', content: parse(area.value, name.value || 'the pasted text') });
    if (list.length === 0) throw new Error('no manifest: choose files or paste JSON');
    return list;
  };
  const run = async (btn, f) => {
    btn.disabled = true;
    replace(out, h('p', { class: 'muted' }, 'Running…'));
    try { await f(); } catch (e) {
      if (e instanceof Unauthorized) ctx.fail(e);
      else replace(out, errorBox(e));
    } finally { btn.disabled = false; }
  };
  dry.addEventListener('click', () => run(dry, async () => {
    const r = await post('/v1/apply', { files: await proposal(), dry_run: true }, ctx.signal);
    replace(out, applyReport(r));
  }));
  shadow.addEventListener('click', () => run(shadow, async () => {
    const r = await post('/v1/shadow', { files: await proposal(), window: Number(windowIn.value || '0') }, ctx.signal);
    replace(out, shadowReport(r));
  }));

  const liveDone = liveManifestsSection(ctx, live).catch((e) => {
    if (e instanceof APIError) replace(live, errorBox(e));
    else throw e;
  });
  try {
    const m = await get('/v1/manifest', ctx.signal);
    let src = m.source;
    replace(current, h('div', { class: 'cards' },
      h('div', { class: 'card' }, h('div', { class: 'label' }, 'Name'), h('div', { class: 'value', id: 'current-name' }, m.name || '—')),
      h('div', { class: 'card' }, h('div', { class: 'label' }, 'Hash'), h('div', { class: 'value small mono', id: 'current-hash' }, m.hash || '—')),
      h('div', { class: 'card' }, h('div', { class: 'label' }, 'Applied at seq'), h('div', { class: 'value' }, m.seq === undefined ? '—' : String(m.seq)))),
    h('h2', {}, 'Source (canonical, as journaled)'), h('pre', { class: 'json', id: 'current-source' }, typeof src === 'string' ? src : pretty(src)));
  } catch (e) {
    if (e instanceof APIError) replace(current, e.status === 409 ? h('p', { class: 'muted' }, 'No manifest applied yet.') : errorBox(e));
    else throw e;
  }
  await liveDone;
}

function parse(text, where) {
  try { return JSON.parse(text); } catch (e) { throw new Error(where + ': not JSON: ' + e.message); }
}

function list(title, xs, id) {
  return xs && xs.length ? [h('h2', {}, title), h('ul', { id }, xs.map((x) => h('li', { class: 'mono' }, typeof x === 'string' ? x : JSON.stringify(x))))] : null;
}

function applyReport(r) {
  const b = r.body || {};
  const c = b.changes || {};
  const none = !['added', 'removed', 'changed', 'subscriptions_added', 'subscriptions_removed'].some((k) => c[k] && c[k].length);
  return h('div', { id: 'apply-report' },
    b.error ? errorBox(new Error(b.error.code + ': ' + b.error.message + (b.error.where ? ' (' + b.error.where + ')' : ''))) : null,
    h('p', {}, b.unchanged ? 'Unchanged: this is the manifest in force.' :
      `Would change ${b.previous_hash || '(no manifest)'} → ${b.manifest_hash || '?'} (${b.manifest_name || ''}).`),
    none && !b.unchanged ? h('p', { class: 'muted' }, 'No definitions differ.') : null,
    list('Added', c.added, 'added'), list('Removed', c.removed, 'removed'), list('Changed', c.changed, 'changed'),
    list('Subscriptions added', c.subscriptions_added, 'subs-added'), list('Subscriptions removed', c.subscriptions_removed, 'subs-removed'),
    b.blocked_by && b.blocked_by.length ? [h('h2', {}, 'Blocked by (the world is not quiescent)'),
      table(['Kind', 'Cell', 'Status / intent'], b.blocked_by.map((x) => [x.kind, h('a', { href: cellPath(x.workflow, x.key) }, x.workflow + ' ' + JSON.stringify(x.key)),
        x.intent ? h('a', { href: intentPath(x.intent), class: 'mono' }, x.effect + ' ' + x.intent) : (x.status || '')]))] : null,
    h('h2', {}, 'Full answer (' + r.status + ')'), h('pre', { class: 'json' }, pretty(b)));
}

function shadowReport(r) {
  const b = r.body || {};
  const inp = b.inputs || {};
  const eff = b.effects || {};
  const inst = b.instances || {};
  const counts = inst.counts || {};
  const byEffect = Object.keys(eff.by_effect || {}).sort();
  return h('div', { id: 'shadow-report' },
    b.error ? errorBox(new Error(b.error.code + ': ' + b.error.message)) : null,
    b.apply ? h('p', {}, b.apply.applied ? `Applied in the copy at its seq ${b.apply.seq}: ${b.apply.previous_hash || '(no manifest)'} → ${b.apply.manifest_hash}.` :
      b.apply.unchanged ? 'Unchanged: the copy already runs this manifest.' : 'Not applied in the copy.') : null,
    b.apply ? list('Definitions added', (b.apply.changes || {}).added, 'shadow-added') : null,
    b.apply ? list('Definitions changed', (b.apply.changes || {}).changed, 'shadow-changed') : null,
    b.apply ? list('Definitions removed', (b.apply.changes || {}).removed, 'shadow-removed') : null,
    b.inputs ? h('p', { id: 'shadow-inputs' }, `Inputs (${inp.source}${inp.source === 'window' ? ' of ' + inp.window : ''}): ${inp.submitted} submitted, ${inp.duplicates} duplicates, ${inp.refused_total} refused.`) : null,
    byEffect.length ? [h('h2', {}, `Effects opened (${eff.total})`), table(['Effect', 'Intents'], byEffect.map((e) => [e, String(eff.by_effect[e])])), ] : null,
    b.instances ? [h('h2', {}, 'Instances at the end'),
      h('p', { id: 'shadow-instances' }, `running ${counts.running || 0}, waiting ${counts.waiting || 0}, completed ${counts.completed || 0}, failed ${counts.failed || 0}`)] : null,
    (b.allowlist || []).length ? [h('h2', {}, 'Effect allowlist changes'),
      table(['Workflow', 'Added', 'Removed'], b.allowlist.map((a) => [a.workflow, (a.added || []).join(', '), (a.removed || []).join(', ')]))] : null,
    (b.deltas || []).length ? [h('h2', {}, 'Cells stepped'),
      table(['Workflow', 'Stepped', 'Created', 'Changed', 'Deleted', 'Unchanged'], b.deltas.map((d) => [d.workflow, String(d.stepped), String(d.created), String(d.changed), String(d.deleted), String(d.unchanged)]))] : null,
    h('h2', {}, 'Full report (' + r.status + ')'), h('pre', { class: 'json' }, pretty(b)));
}
