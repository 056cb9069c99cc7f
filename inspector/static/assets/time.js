// Logical time. Every time the inspector shows is a journaled ingress
// stamp (now_ns, nanoseconds since the Unix epoch) as the API answers it:
// the world's own deterministic time, never the server's clock. "ago" is
// measured against this browser's clock, so it is only as right as the
// two clocks agree.
import { h } from './dom.js';

// nsToMs turns a now_ns (a JSON number, exact only to about a
// microsecond at today's dates) into milliseconds.
export function nsToMs(ns) { return Number(ns) / 1e6; }

// isoTime is a now_ns as an ISO 8601 UTC date with milliseconds.
export function isoTime(ns) { return new Date(nsToMs(ns)).toISOString().replace('T', ' ').replace('Z', ' UTC'); }

// ago is how long before now (this browser's clock) a now_ns was, rounded
// to its largest unit: "3 min ago", "2 h ago", "in 5 s" for a time ahead.
export function ago(ns, nowMs = Date.now()) {
  const d = nowMs - nsToMs(ns);
  const s = Math.abs(d) / 1000;
  let t;
  if (s < 1) t = 'now';
  else if (s < 60) t = Math.floor(s) + ' s';
  else if (s < 3600) t = Math.floor(s / 60) + ' min';
  else if (s < 86400) t = Math.floor(s / 3600) + ' h';
  else t = Math.floor(s / 86400) + ' d';
  if (t === 'now') return 'just now';
  return d >= 0 ? t + ' ago' : 'in ' + t;
}

// duration is a span of nanoseconds, readable: "850 ms", "1.2 s", "3 min 4 s".
export function duration(ns) {
  const ms = Number(ns) / 1e6;
  if (ms < 1) return (Number(ns) / 1e3).toFixed(0) + ' µs';
  if (ms < 1000) return ms.toFixed(ms < 10 ? 1 : 0) + ' ms';
  const s = ms / 1000;
  if (s < 60) return s.toFixed(s < 10 ? 2 : 1) + ' s';
  if (s < 3600) return Math.floor(s / 60) + ' min ' + Math.floor(s % 60) + ' s';
  if (s < 86400) return Math.floor(s / 3600) + ' h ' + Math.floor((s % 3600) / 60) + ' min';
  return Math.floor(s / 86400) + ' d ' + Math.floor((s % 86400) / 3600) + ' h';
}

// timeCell shows a now_ns as its date and, below, how long ago; data-ns
// holds the value as the API gave it. No time: a dash.
export function timeCell(ns) {
  if (!ns) return h('span', { class: 'muted time', 'data-ns': '' }, '—');
  return h('span', { class: 'time', 'data-ns': String(ns), title: 'now_ns ' + ns },
    h('span', { class: 'date' }, isoTime(ns)), h('span', { class: 'ago muted' }, ago(ns)));
}
