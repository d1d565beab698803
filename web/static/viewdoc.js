// viewdoc.js — the only part of the dashboard that knows the wire format of
// the fanout's `view` mode. It keeps a thread's view document (the reducer's
// AppendView shape: threadId, seq, status, messages, state, runs, steps,
// subagents, warnings, error) up to date from the SSE payloads
//
//   {"type":"view","seq":S,"view":{...}}                   a whole document
//   {"type":"changes","seq":S,"prev":P,"changes":{...}}    a change document
//
// (change documents are specified in web/viewchange/viewchange.go) and says
// what changed, so that the renderer touches only that. No AG-UI semantics
// live here: the server has already reduced the events.
//
// Anything that cannot be applied exactly — a gap in seq, a message count
// that does not match, a patch that does not apply, a payload it does not
// understand — throws ResyncNeeded: the caller then fetches the whole view.

export class ResyncNeeded extends Error {}

// Dirty says what a payload changed.
export class Dirty {
  constructor() {
    this.all = false;          // re-render everything
    this.messages = new Map(); // index -> appended text (string) or null (re-render the message)
    this.list = false;         // the message list changed shape (re-render the list)
    this.state = false;
    this.runs = false;         // runs, steps or subagents
    this.meta = false;         // status, warnings, error, seq
  }
  get empty() {
    return !this.all && !this.list && !this.state && !this.runs && !this.meta && this.messages.size === 0;
  }
  merge(o) {
    this.all ||= o.all; this.list ||= o.list; this.state ||= o.state; this.runs ||= o.runs; this.meta ||= o.meta;
    for (const [i, t] of o.messages) {
      const prev = this.messages.get(i);
      // Two appends add up; anything else means "re-render the message".
      this.messages.set(i, this.messages.has(i) ? (prev != null && t != null ? prev + t : null) : t);
    }
  }
}

// apply applies one SSE payload (already JSON-parsed) to doc, a holder
// {view: <document or null>}, and returns a Dirty. It throws ResyncNeeded.
export function apply(holder, payload) {
  const d = new Dirty();
  if (payload && payload.type === 'view') {
    if (!isObject(payload.view)) throw new ResyncNeeded('view payload without a document');
    holder.view = payload.view;
    if (typeof payload.seq === 'number') holder.view.seq = payload.seq;
    d.all = true;
    return d;
  }
  if (!payload || payload.type !== 'changes') throw new ResyncNeeded('unknown payload type');
  const v = holder.view;
  if (!v) throw new ResyncNeeded('changes before any view');
  if (payload.prev !== v.seq) throw new ResyncNeeded(`gap: prev ${payload.prev}, held ${v.seq}`);
  const ch = payload.changes;
  if (ch == null) {
    // A frame that changed nothing the view shows, or a server that sends
    // no change documents: either way only the caller can tell (refetch).
    v.seq = payload.seq;
    d.meta = true;
    d.unknown = true;
    return d;
  }
  if (!isObject(ch)) throw new ResyncNeeded('changes is not an object');
  applyChanges(v, ch, d);
  if (ch.seq !== payload.seq) throw new ResyncNeeded('changes.seq differs from the frame seq');
  return d;
}

function applyChanges(v, ch, d) {
  if (Array.isArray(ch.messages)) {
    v.messages = ch.messages;
    d.list = true;
  } else if (Array.isArray(ch.changed)) {
    for (const c of ch.changed) {
      const i = c.index;
      if (!Number.isInteger(i) || i < 0 || i > v.messages.length) throw new ResyncNeeded(`message index ${i} out of range`);
      if (typeof c.append === 'string') {
        const m = v.messages[i];
        if (!m || typeof m.content !== 'string') throw new ResyncNeeded(`append to message ${i} without string content`);
        m.content += c.append;
        const prev = d.messages.get(i);
        d.messages.set(i, d.messages.has(i) ? (prev != null ? prev + c.append : null) : c.append);
      } else if (isObject(c.message)) {
        if (i === v.messages.length) d.list = true;
        v.messages[i] = c.message;
        d.messages.set(i, null);
      } else {
        throw new ResyncNeeded('changed entry without append or message');
      }
    }
  }
  if (ch.count !== v.messages.length) throw new ResyncNeeded(`message count ${v.messages.length}, want ${ch.count}`);
  if ('state' in ch) {
    v.state = ch.state;
    d.state = true;
  } else if (Array.isArray(ch.statePatch)) {
    let s = v.state;
    for (const p of ch.statePatch) s = applyPatch(s, p);
    v.state = s;
    d.state = true;
  }
  for (const k of ['runs', 'steps', 'subagents']) {
    if (Array.isArray(ch[k])) { v[k] = ch[k]; d.runs = true; }
  }
  v.seq = ch.seq;
  v.status = ch.status;
  v.warnings = ch.warnings;
  v.error = ch.error;
  d.meta = true;
}

// applyPatch applies an RFC 6902 patch to value and returns the result. It
// works in place (the server applied the same patch successfully, so a
// failure means we lost track, and the caller throws the whole document
// away), except for operations on the root, which return a new value.
export function applyPatch(value, ops) {
  if (!Array.isArray(ops)) throw new ResyncNeeded('patch is not an array');
  for (const op of ops) value = applyOp(value, op);
  return value;
}

function applyOp(root, op) {
  const path = parsePointer(op.path);
  switch (op.op) {
    case 'add': return put(root, path, clone(op.value), true);
    case 'replace': get(root, path); return put(root, path, clone(op.value), false);
    case 'remove': return del(root, path).root;
    case 'move': {
      const from = parsePointer(op.from);
      if (op.from === op.path) return root;
      if (op.path.startsWith(op.from + '/')) throw new ResyncNeeded('move into its own child');
      const r = del(root, from);
      return put(r.root, path, r.value, true);
    }
    case 'copy': return put(root, path, clone(get(root, parsePointer(op.from))), true);
    case 'test':
      if (!deepEqual(get(root, path), op.value)) throw new ResyncNeeded(`test failed at ${op.path}`);
      return root;
    default: return root; // unknown ops were dropped by the server already
  }
}

function parsePointer(p) {
  if (typeof p !== 'string') throw new ResyncNeeded('pointer is not a string');
  if (p === '') return [];
  if (p[0] !== '/') throw new ResyncNeeded(`bad pointer ${p}`);
  return p.slice(1).split('/').map(s => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

function arrayIndex(arr, tok, forAdd) {
  if (forAdd && tok === '-') return arr.length;
  if (!/^(0|[1-9][0-9]*)$/.test(tok)) throw new ResyncNeeded(`bad array index ${tok}`);
  const i = Number(tok);
  if (i > arr.length || (!forAdd && i === arr.length)) throw new ResyncNeeded(`index ${i} out of range`);
  return i;
}

function parent(root, path) {
  let cur = root;
  for (let k = 0; k < path.length - 1; k++) cur = child(cur, path[k]);
  if (cur === null || typeof cur !== 'object') throw new ResyncNeeded('parent is not a container');
  return cur;
}

function child(cur, tok) {
  if (Array.isArray(cur)) return cur[arrayIndex(cur, tok, false)];
  if (isObject(cur) && Object.prototype.hasOwnProperty.call(cur, tok)) return cur[tok];
  throw new ResyncNeeded(`no member ${tok}`);
}

function get(root, path) {
  let cur = root;
  for (const tok of path) cur = child(cur, tok);
  return cur;
}

function put(root, path, value, insert) {
  if (path.length === 0) return value;
  const par = parent(root, path);
  const tok = path[path.length - 1];
  if (Array.isArray(par)) {
    const i = arrayIndex(par, tok, insert);
    if (insert) par.splice(i, 0, value); else par[i] = value;
  } else {
    if (!insert && !Object.prototype.hasOwnProperty.call(par, tok)) throw new ResyncNeeded(`no member ${tok}`);
    // defineProperty keeps a member named __proto__ an ordinary member.
    Object.defineProperty(par, tok, { value, writable: true, enumerable: true, configurable: true });
  }
  return root;
}

function del(root, path) {
  if (path.length === 0) throw new ResyncNeeded('cannot remove the root');
  const par = parent(root, path);
  const tok = path[path.length - 1];
  let value;
  if (Array.isArray(par)) {
    const i = arrayIndex(par, tok, false);
    value = par.splice(i, 1)[0];
  } else {
    if (!Object.prototype.hasOwnProperty.call(par, tok)) throw new ResyncNeeded(`no member ${tok}`);
    value = par[tok];
    delete par[tok];
  }
  return { root, value };
}

function clone(v) { return v === undefined ? null : JSON.parse(JSON.stringify(v)); }

function isObject(v) { return v !== null && typeof v === 'object' && !Array.isArray(v); }

export function deepEqual(a, b) {
  if (a === b) return true;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== 'object') return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) return a.length === b.length && a.every((x, i) => deepEqual(x, b[i]));
  const ka = Object.keys(a), kb = Object.keys(b);
  return ka.length === kb.length && ka.every(k => Object.prototype.hasOwnProperty.call(b, k) && deepEqual(a[k], b[k]));
}
