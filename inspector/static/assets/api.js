// The API client: every data request is a fetch to /v1 on this origin with
// the token from the login page in the Authorization header. The token lives
// in this tab's sessionStorage, never in a URL.

const TOKEN = 'aos.token';

export class Unauthorized extends Error {}

export class APIError extends Error {
  constructor(status, body, text) {
    const e = body && body.error;
    super(e ? `${status} ${e.code}: ${e.message}${e.where ? ' (' + e.where + ')' : ''}` : `${status}: ${text.slice(0, 300)}`);
    this.status = status;
    this.body = body;
  }
}

export function token() { return sessionStorage.getItem(TOKEN); }
export function setToken(t) { sessionStorage.setItem(TOKEN, t); }
export function clearToken() { sessionStorage.removeItem(TOKEN); }

function headers(extra) {
  return Object.assign({ Authorization: 'Bearer ' + (token() || '') }, extra || {});
}

async function check(resp) {
  if (resp.status === 401) {
    let msg = 'unauthorized';
    try {
      msg = (await resp.json()).error.message;
    } catch (e) {
      if (e.name === 'AbortError') throw e; // the page moved on (another 401 may have shown the login)
    }
    clearToken();
    throw new Unauthorized(msg);
  }
  return resp;
}

// get fetches a JSON answer; a 4xx/5xx is an APIError, 401 Unauthorized.
export async function get(path, signal) {
  const resp = await check(await fetch(path, { headers: headers(), signal }));
  const text = await resp.text();
  let body;
  try { body = JSON.parse(text); } catch { body = undefined; }
  if (!resp.ok) throw new APIError(resp.status, body, text);
  return body;
}

// post sends JSON and returns {status, body}; a 409/400 carrying a report
// is returned too (the caller shows it), other failures throw.
export async function post(path, data, signal) {
  const resp = await check(await fetch(path, {
    method: 'POST', headers: headers({ 'Content-Type': 'application/json' }), body: JSON.stringify(data), signal,
  }));
  const text = await resp.text();
  let body;
  try { body = JSON.parse(text); } catch { body = undefined; }
  if (!resp.ok && !(body && typeof body === 'object')) throw new APIError(resp.status, body, text);
  return { status: resp.status, ok: resp.ok, body };
}

// text fetches a text answer (the Prometheus metrics).
export async function text(path, signal) {
  const resp = await check(await fetch(path, { headers: headers(), signal }));
  const t = await resp.text();
  if (!resp.ok) throw new APIError(resp.status, undefined, t);
  return t;
}

// lines fetches NDJSON and calls onLine with each parsed line as it
// arrives (the journal's live follow streams this way: fetch keeps the
// Authorization header, which EventSource could not send). It returns when
// the stream ends or signal aborts.
// A refusal carries journalFirst, the Aos-Journal-First header (the
// first seq the journal holds), when the answer had one.
export async function lines(path, onLine, signal) {
  const resp = await check(await fetch(path, { headers: headers(), signal }));
  if (!resp.ok) {
    const t = await resp.text();
    let body;
    try { body = JSON.parse(t); } catch { body = undefined; }
    const e = new APIError(resp.status, body, t);
    const first = resp.headers.get('Aos-Journal-First');
    if (first !== null && /^\d+$/.test(first)) e.journalFirst = Number(first);
    throw e;
  }
  const reader = resp.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    let r;
    try { r = await reader.read(); } catch (e) { if (signal && signal.aborted) return; throw e; }
    if (r.done) break;
    buf += dec.decode(r.value, { stream: true });
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      if (line.trim() !== '') onLine(JSON.parse(line));
    }
  }
  if (buf.trim() !== '') onLine(JSON.parse(buf));
}
