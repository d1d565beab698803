// dom.js — the only way the dashboard builds DOM. Strings always become
// text nodes: model output, tool arguments, state and activity content are
// untrusted (AG-UI security rules), so nothing is ever parsed as HTML.

// h creates an element. attrs may hold class, title, and data-* or aria-*
// attributes (set with setAttribute, never as HTML); children are nodes,
// strings (text nodes), or null/undefined (skipped).
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v == null || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k === 'title' || k.startsWith('data-') || k.startsWith('aria-') || k === 'role') el.setAttribute(k, String(v));
      else throw new Error(`dom: attribute ${k} not allowed`);
    }
  }
  for (const c of children) {
    if (c == null) continue;
    el.append(typeof c === 'string' ? document.createTextNode(c) : c);
  }
  return el;
}

// link makes an anchor to an untrusted URL: only http(s) URLs become links
// (a javascript: or data: URL would be code); anything else is shown as text.
export function link(url, label) {
  let u = null;
  try { u = new URL(String(url)); } catch { /* not a URL */ }
  if (!u || (u.protocol !== 'http:' && u.protocol !== 'https:')) return h('span', null, String(label));
  const a = document.createElement('a');
  a.href = u.href;
  a.target = '_blank';
  a.rel = 'noopener noreferrer nofollow';
  a.textContent = String(label);
  return a;
}

// pretty returns JSON text for display: a string that parses as JSON is
// re-indented, anything else is shown as it is.
export function pretty(v) {
  if (typeof v === 'string') {
    try { return JSON.stringify(JSON.parse(v), null, 2); } catch { return v; }
  }
  return JSON.stringify(v, null, 2);
}

// colour gives a stable colour for an id (subagent badges).
export function colour(id) {
  let x = 2166136261;
  for (let i = 0; i < id.length; i++) { x ^= id.charCodeAt(i); x = Math.imul(x, 16777619); }
  return `hsl(${(x >>> 0) % 360} 70% 68%)`;
}

// ago formats the time since t (ms) compactly.
export function ago(t, now) {
  const s = Math.max(0, Math.round((now - t) / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}
