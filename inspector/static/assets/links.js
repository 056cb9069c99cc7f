// Deep links. A workflow name holds "/", so each path segment is
// URI-encoded; a key is its JSON text ("o-1" with the quotes), as the API's
// /v1/cells/{workflow}/{key} takes it.

const enc = encodeURIComponent;

export function cellsPath(wf) { return '/cells/' + enc(wf); }
export function cellPath(wf, key) { return '/cells/' + enc(wf) + '/' + enc(JSON.stringify(key === undefined ? null : key)); }
export function intentPath(hash) { return '/intents/' + enc(hash); }
export function journalPath(seq) { return '/journal/' + seq; }

// apiCell is the API path of a cell's resource (cells, trace, timeline).
export function apiCell(base, wf, key) { return '/v1/' + base + '/' + enc(wf) + '/' + enc(JSON.stringify(key)); }

// segments splits a pathname into decoded segments.
export function segments(pathname) {
  return pathname.split('/').filter((s) => s !== '').map((s) => {
    try { return decodeURIComponent(s); } catch { return s; }
  });
}

// parseKey reads a key segment: JSON when it parses, else the string.
export function parseKey(s) {
  try { return JSON.parse(s); } catch { return s; }
}
