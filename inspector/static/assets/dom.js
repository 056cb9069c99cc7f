// Building DOM from data. Every piece of data becomes a text node
// (textContent); nothing here parses a string as HTML.

// h builds an element: props sets attributes (class, href, data-*, ...) or,
// for "on*" keys, listeners; children are nodes, strings (as text), arrays,
// or null/undefined/false (skipped).
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'value') el.value = v;
    else if (k === 'checked' || k === 'disabled' || k === 'hidden' || k === 'multiple' || k === 'selected') el[k] = !!v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

// clear empties a node and fills it with children.
export function replace(node, ...children) {
  node.replaceChildren();
  append(node, children);
  return node;
}

// pretty is a value as indented JSON text.
export function pretty(v) {
  return v === undefined ? '' : JSON.stringify(v, null, 2);
}

// compact is a value as one line of JSON, cut at max characters.
export function compact(v, max = 120) {
  if (v === undefined) return '';
  const s = JSON.stringify(v);
  return s.length > max ? s.slice(0, max - 1) + '…' : s;
}

export function errorBox(err) {
  return h('div', { class: 'error', role: 'alert' }, String(err && err.message ? err.message : err));
}

// table builds a table from header names and rows (arrays of cells; a cell
// is a node or text). rowProps(i) may give a row's attributes.
export function table(head, rows, rowProps) {
  return h('table', {},
    h('thead', {}, h('tr', {}, head.map((x) => h('th', {}, x)))),
    h('tbody', {}, rows.map((r, i) => h('tr', rowProps ? rowProps(i) : {}, r.map((c) => (c instanceof Node && c.tagName === 'TD') ? c : h('td', {}, c))))));
}

export function card(label, value, opts = {}) {
  return h('div', { class: 'card', 'data-card': opts.id || label },
    h('div', { class: 'label' }, label),
    h('div', { class: 'value' + (opts.small ? ' small' : ''), 'data-value': opts.id || label }, value));
}
