// Time on a cell's page: the lane of its intents (each a bar from the
// logical time it was opened to the time it was settled, over the span of
// the timeline page shown), and why a waiting cell waits (each intent in
// flight: its effect, a timer's due time, whether an executor holds it).
import { h } from '../dom.js';
import { get, APIError } from '../api.js';
import { intentPath } from '../links.js';
import { duration, isoTime, ago } from '../time.js';

const TIMER = 'sys/timer.set@1';

// intentLane draws the intents a page of timeline entries opened, each
// from its intent entry's now_ns to the now_ns of the receipt or cancel
// that settled it on the page; one not settled on the page runs to the
// page's end, striped. Null when the page opened none.
export function intentLane(entries) {
  const opened = new Map(); // hash -> { hash, effect, from, to, how }
  let lo = Infinity;
  let hi = -Infinity;
  for (const e of entries) {
    if (e.now_ns) { lo = Math.min(lo, e.now_ns); hi = Math.max(hi, e.now_ns); }
    const x = (e.intents || [])[0];
    if (e.kind === 'intent' && x) opened.set(x, { hash: x, effect: e.effect, from: e.now_ns, to: null, how: 'open' });
    else if ((e.kind === 'receipt' || e.kind === 'cancel') && x && opened.has(x)) {
      const it = opened.get(x);
      it.to = e.now_ns;
      it.how = e.kind === 'cancel' ? 'cancel' : (e.status === 'ok' ? 'ok' : 'error');
    }
  }
  if (opened.size === 0 || !isFinite(lo)) return null;
  const span = Math.max(hi - lo, 1);
  const pct = (t) => ((t - lo) / span) * 100;
  const rows = [...opened.values()].map((it) => {
    const end = it.to || hi;
    const bar = h('a', {
      class: 'lane-bar ' + (it.to ? 'settled-' + it.how : 'open'), href: intentPath(it.hash), 'data-lane-intent': it.hash,
      title: `${it.effect} ${it.hash}\nopened ${isoTime(it.from)}` + (it.to ? `\nsettled (${it.how}) ${isoTime(it.to)} after ${duration(it.to - it.from)}` : '\nnot settled on this page'),
    });
    // CSSOM, not a style attribute: the page's CSP allows no inline style.
    bar.style.left = pct(it.from) + '%';
    bar.style.width = Math.max(pct(end) - pct(it.from), 0.4) + '%';
    const label = h('span', { class: 'lane-label' }, it.effect + (it.to ? ' · ' + duration(it.to - it.from) : ' · open'));
    label.style.left = Math.min(pct(it.from), 70) + '%';
    label.style.top = '-1px';
    label.style.paddingLeft = '4px';
    return h('div', { class: 'lane-row' }, bar, label);
  });
  return h('div', { class: 'lane', id: 'intent-lane', 'data-intents': String(opened.size) },
    h('div', { class: 'lane-axis' }, h('span', {}, isoTime(lo)), h('span', {}, 'intents on this page, opened → settled (' + duration(span) + ')'), h('span', {}, isoTime(hi))),
    rows);
}

// waitingWhy says why a waiting cell waits: each intent in flight (up to
// 20), read with GET /v1/intents/{hash}: its effect, when it was opened,
// a timer's due time (its params' deliver_at_ns, the world's logical
// time), frames so far; filled in as the answers come.
export function waitingWhy(inflight, signal) {
  const shown = inflight.slice(0, 20);
  const list = h('ul', { id: 'waiting-why-list' });
  const root = h('div', { class: 'why', id: 'waiting-why' },
    h('strong', {}, `Waiting for ${inflight.length} intent${inflight.length === 1 ? '' : 's'} in flight`),
    h('span', { class: 'muted' }, ': the cell steps again when one is settled (a receipt, or a cancel).'),
    list, inflight.length > shown.length ? h('p', { class: 'muted' }, `and ${inflight.length - shown.length} more`) : null);
  for (const x of shown) {
    const li = h('li', { 'data-waiting-intent': x }, h('a', { href: intentPath(x), class: 'mono' }, x));
    list.appendChild(li);
    get('/v1/intents/' + encodeURIComponent(x), signal).then((es) => {
      const it = es.find((e) => e.kind === 'intent');
      if (!it) return;
      const frames = es.filter((e) => e.kind === 'frame').length;
      li.append(' ', it.effect);
      if (it.effect === TIMER && it.value && it.value.deliver_at_ns) {
        const due = it.value.deliver_at_ns;
        li.append(h('span', { class: 'due', 'data-due-ns': String(due) }, ` — timer due ${isoTime(due)} (${ago(due)})`));
      }
      if (it.now_ns) li.append(h('span', { class: 'muted' }, `, opened ${ago(it.now_ns)}`));
      if (frames) li.append(h('span', { class: 'muted' }, `, ${frames} frame${frames === 1 ? '' : 's'} so far`));
    }, (err) => {
      if (err instanceof APIError) li.append(h('span', { class: 'error' }, ' ' + err.message));
    });
  }
  return root;
}
