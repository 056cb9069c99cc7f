// An intent: what it asks (its effect, params as JSON, idempotency key,
// issuer ref, the cell that opened it and when), then its life in journal
// order: the step that opened it, its frames with their payloads, every
// attempt, the receipt (with its payload) or the cancel, drops. The path
// may hold a prefix of the hash (8+ hex digits): the API resolves it, and
// the page names the whole hash.
import { h, replace, table, pretty, compact } from '../dom.js';
import { get } from '../api.js';
import { cellPath, journalPath } from '../links.js';
import { detail } from './cell.js';
import { timeCell, isoTime, ago, duration } from '../time.js';

export async function intentView(ctx, hash) {
  const entries = await get('/v1/intents/' + encodeURIComponent(hash), ctx.signal);
  const it = entries.find((e) => e.kind === 'intent');
  const whole = it && it.intents ? it.intents[0] : ((entries[0] || {}).intents || [hash])[0];
  if (whole !== hash) history.replaceState(null, '', '/intents/' + encodeURIComponent(whole));
  const settled = entries.find((e) => e.kind === 'receipt' || e.kind === 'cancel');
  const frames = entries.filter((e) => e.kind === 'frame');
  const receipts = entries.filter((e) => e.kind === 'receipt' || e.kind === 'drop');
  replace(ctx.main, h('h1', {}, 'Intent ', h('span', { class: 'mono', id: 'intent-hash' }, whole)),
    whole !== hash ? h('p', { class: 'muted', id: 'intent-prefix' }, `Found by the prefix ${hash}.`) : null,
    it ? overview(it, settled) : h('p', { class: 'muted' }, 'The record that opened this intent is not in the journal (retention dropped it).'),
    it ? [h('h2', {}, 'Params'), h('pre', { class: 'json', id: 'intent-params' }, pretty(it.value))] : null,
    h('h2', {}, `Frames (${frames.length})`),
    frames.length === 0 ? h('p', { class: 'muted', id: 'intent-frames' }, 'No frame was posted for it.') :
      withId(table(['Seq', 'Time', 'Frame', 'Executor', 'Payload'], frames.map((f) => [h('a', { href: journalPath(f.seq), class: 'mono' }, String(f.seq)),
        timeCell(f.now_ns), String(f.frame_seq), f.executor, h('pre', { class: 'json' }, pretty(f.value))])), 'intent-frames'),
    h('h2', {}, 'Receipt'),
    receipts.length === 0 && !settled ? h('p', { class: 'muted', id: 'intent-receipt' }, 'Not settled yet: in flight.') :
      withId(table(['Seq', 'Time', 'Kind', 'Status', 'Executor', 'Attempt', 'Payload'], entries.filter((e) => e.kind === 'receipt' || e.kind === 'drop' || e.kind === 'cancel').map((r) => [
        h('a', { href: journalPath(r.seq), class: 'mono' }, String(r.seq)), timeCell(r.now_ns), h('span', { class: 'kind kind-' + r.kind }, r.kind),
        r.kind === 'cancel' ? 'cancelled by ' + r.by : (r.status || ''), r.executor || '', r.attempt ? String(r.attempt) : '',
        r.kind === 'cancel' ? (r.reason || '') : [r.reason ? h('div', { class: 'status-failed' }, r.reason) : null, h('pre', { class: 'json' }, pretty(r.value))]])), 'intent-receipt'),
    h('h2', {}, 'Life'),
    table(['Seq', 'Time', 'Kind', 'What'], entries.map((e) => [h('a', { href: journalPath(e.seq), class: 'mono' }, String(e.seq)),
      timeCell(e.now_ns), h('span', { class: 'kind kind-' + e.kind }, e.kind), detail(e)]), (i) => ({ 'data-kind': entries[i].kind })));
}

function withId(el, id) { el.id = id; return el; }

// overview is what the intent asks and where it came from.
function overview(it, settled) {
  const idem = it.idempotency_key === undefined ? null : it.idempotency_key;
  const row = (label, value, id) => [h('dt', {}, label), h('dd', { id }, value)];
  return h('dl', { class: 'detail', id: 'intent-detail' },
    row('Effect', it.effect, 'intent-effect'),
    row('Opened by', it.origin_workflow ? h('a', { href: cellPath(it.origin_workflow, it.origin_key === undefined ? null : it.origin_key) },
      it.origin_workflow + ' ' + JSON.stringify(it.origin_key === undefined ? null : it.origin_key)) : '—', 'intent-origin'),
    row('In step', h('a', { href: journalPath(it.input) }, '#' + it.input), 'intent-step'),
    row('Opened at', it.now_ns ? isoTime(it.now_ns) + ' (' + ago(it.now_ns) + ')' : '—', 'intent-opened'),
    row('Settled', settled ? [settled.kind === 'cancel' ? 'cancelled' : settled.status, settled.now_ns && it.now_ns ? ' after ' + duration(settled.now_ns - it.now_ns) : '',
      ' at ', h('a', { href: journalPath(settled.seq) }, '#' + settled.seq)] : 'not yet (in flight)', 'intent-settled'),
    row('Idempotency key', idem === null ? '—' : keyText(idem), 'intent-idempotency-key'),
    row('Issuer ref', it.issuer_ref || '—', 'intent-issuer-ref'),
    it.effect === 'sys/timer.set@1' && it.value && it.value.deliver_at_ns ?
      row('Timer due', isoTime(it.value.deliver_at_ns) + ' (' + ago(it.value.deliver_at_ns) + ')', 'intent-due') : null,
    row('Params', h('span', { class: 'mono' }, compact(it.value, 160)), 'intent-params-line'));
}

// keyText shows an idempotency key (base64 bytes in the API) as text when
// its bytes are printable UTF-8, with the base64 beside it.
function keyText(b64) {
  try {
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const s = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    if (/^[\x20-\x7e]*$/.test(s)) return [h('span', { class: 'mono' }, JSON.stringify(s)), h('span', { class: 'muted' }, ' (base64 ' + b64 + ')')];
  } catch { /* not text */ }
  return h('span', { class: 'mono' }, 'base64 ' + b64);
}
