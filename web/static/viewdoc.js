// viewdoc.js — the only part of the dashboard that knows the wire format of
// the fanout's `view` mode. It keeps a thread's view document (the reducer's
// AppendView shape: threadId, seq, status, messages, state, runs, steps,
// subagents, warnings, error) up to date from the SSE payloads
//
//   {"type":"view","seq":S,"view":{...}}                   a whole document
//   {"type":"changes","seq":S,"prev":P,"changes":C}        what changed in (P, S]
//
// where C is null (nothing the view shows changed) or the pipeline's change
// document (pipeline/reduce.go, appendChanges):
//
//   {"messages":[{"index":i,"op":"add"|"replace","message":{..}} |
//                {"index":i,"op":"append","text":".."}],
//    "allMessages":[..],          instead of "messages" after a structural change
//    "stateOps":[[patch],..] | "state":<any>,
//    "status":"..","runs":[..],"steps":[..],"subagents":[..],"error":..,
//                                 runs, steps or subagents changed: those restated
//    "warnings":n}
//
// (also accepted: "view":{..}, the whole view, which replaces the document).
//
// and says what changed, so that the renderer touches only that. No AG-UI
// semantics live here: the server has already reduced the events.
//
// Windows (a stream joined with ?window=N, fanout/window.go): a windowed
// document holds the whole view's messages from messagesFrom on (of
// messageCount). Message ops keep the whole view's indexes; an op for an
// index below what is held is for a message not held and is skipped. A
// windowed "view" change restates from its messagesFrom on and keeps what is
// held before it; a windowed "allMessages" (with messagesFrom) replaces
// everything held. Older messages are put in front with prependPage (a page
// of GET /v1/threads/{thread}/messages).
//
// Anything that cannot be applied exactly — a gap in seq, an index out of
// range, a message that is not the one the index names, a patch that does
// not apply, a payload it does not understand — throws ResyncNeeded: the
// caller then re-joins the stream from a fresh view.

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
  // shift moves the message indexes by k (k messages were put in front).
  shift(k) {
    this.messages = new Map([...this.messages].map(([i, t]) => [i + k, t]));
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
    holder.paged = null;
    replaceView(holder, payload.view, d);
    if (typeof payload.seq === 'number') holder.view.seq = payload.seq;
    return d;
  }
  if (!payload || payload.type !== 'changes') throw new ResyncNeeded('unknown payload type');
  const v = holder.view;
  if (!v) throw new ResyncNeeded('changes before any view');
  if (payload.prev !== v.seq) throw new ResyncNeeded(`gap: prev ${payload.prev}, held ${v.seq}`);
  const ch = payload.changes;
  if (ch != null) {
    if (!isObject(ch)) throw new ResyncNeeded('changes is not an object');
    if (isObject(ch.view)) {
      // The whole view: it already holds every other change of the
      // document. Windowed, it keeps the older messages held, unless the
      // list changed shape (allMessages beside it): those may have moved.
      if (Array.isArray(ch.allMessages)) holder.paged = null;
      replaceView(holder, Array.isArray(ch.allMessages) ? ch.view : keepOlder(v, ch.view), d);
    } else {
      applyChanges(holder, v, ch, d, payload.seq);
    }
  }
  holder.view.seq = payload.seq;
  d.meta = true;
  return d;
}

// replaceView installs a whole view document, marking dirty only what
// differs from the held one, so that a whole view arriving while the
// thread changed little does not redraw every message.
function replaceView(holder, nv, d) {
  const old = holder.view;
  holder.view = nv;
  if (!old || !Array.isArray(old.messages) || !Array.isArray(nv.messages)) { d.all = true; return; }
  const om = old.messages, nm = nv.messages;
  if (nm.length < om.length) d.list = true;
  for (let i = 0; i < nm.length; i++) {
    if (i >= om.length) { d.list = true; d.messages.set(i, null); continue; }
    if (om[i].id !== nm[i].id || om[i].role !== nm[i].role) { d.list = true; d.messages.set(i, null); continue; }
    if (JSON.stringify(om[i]) !== JSON.stringify(nm[i])) d.messages.set(i, null);
  }
  if (JSON.stringify(old.state) !== JSON.stringify(nv.state)) d.state = true;
  d.runs = true;
  d.meta = true;
}

// base returns the whole view's index of v.messages[0].
export function base(v) { return Number.isInteger(v.messagesFrom) ? v.messagesFrom : 0; }

// keepOlder returns nv, a windowed restatement of v, with the messages v
// holds before nv's first put back in front.
function keepOlder(v, nv) {
  if (!isObject(nv) || !Number.isInteger(nv.messagesFrom) || !Array.isArray(v.messages) || !Array.isArray(nv.messages)) return nv;
  const keep = nv.messagesFrom - base(v);
  if (keep <= 0 || keep > v.messages.length) return nv;
  nv.messages = v.messages.slice(0, keep).concat(nv.messages);
  nv.messagesFrom = base(v);
  return nv;
}

// prependPage puts a page of older messages ({messages, first, end, seq},
// as GET /v1/threads/{thread}/messages answers) in front of the held ones
// and returns a Dirty, or null when the page does not end where the held
// messages begin (the list changed meanwhile: ask again). Frames up to the
// page's seq for the messages it holds are then skipped: the page already
// has them.
export function prependPage(holder, page) {
  const v = holder.view;
  if (!v || !page || !Array.isArray(page.messages) || !Array.isArray(v.messages) || page.end !== base(v) ||
      !Number.isInteger(page.first) || page.first > page.end) return null;
  const d = new Dirty();
  v.messages = page.messages.concat(v.messages);
  v.messagesFrom = page.first;
  const seq = Math.max(Number(page.seq) || 0, holder.paged ? holder.paged.seq : 0);
  holder.paged = { seq, end: Math.max(page.end, holder.paged ? holder.paged.end : 0) };
  d.list = true;
  for (let i = 0; i < page.messages.length; i++) d.messages.set(i, null);
  return d;
}

function applyChanges(holder, v, ch, d, seq) {
  if (Array.isArray(ch.allMessages)) {
    v.messages = ch.allMessages;
    if (Number.isInteger(ch.messagesFrom)) v.messagesFrom = ch.messagesFrom; else delete v.messagesFrom;
    if (Number.isInteger(ch.messageCount)) v.messageCount = ch.messageCount;
    holder.paged = null;
    d.list = true;
    for (let i = 0; i < v.messages.length; i++) d.messages.set(i, null);
  } else if (Array.isArray(ch.messages)) {
    const p = holder.paged;
    for (const c of ch.messages) {
      if (p && seq <= p.seq && c && Number.isInteger(c.index) && c.index < p.end) continue; // the page has it
      applyMessageChange(v, c, d);
    }
  }
  if ('state' in ch) {
    v.state = ch.state;
    d.state = true;
  } else if (Array.isArray(ch.stateOps)) {
    let s = v.state;
    for (const p of ch.stateOps) s = applyPatch(s, p);
    v.state = s;
    d.state = true;
  }
  if (Number.isInteger(ch.warnings)) v.warnings = ch.warnings;
  // The run-level members by name, sent when runs, steps or subagents
  // changed (windowed: the newest runs, their subagents, and where they
  // start in the whole lists).
  for (const k of ['runs', 'steps', 'subagents']) {
    if (Array.isArray(ch[k])) { v[k] = ch[k]; d.runs = true; }
  }
  for (const k of ['runsFrom', 'runCount', 'subagentsFrom', 'subagentCount']) {
    if (Number.isInteger(ch[k])) v[k] = ch[k];
  }
  if (typeof ch.status === 'string') v.status = ch.status;
  if ('error' in ch) v.error = ch.error;
}

function applyMessageChange(v, c, d) {
  const msgs = v.messages;
  const whole = c && c.index;
  if (!Number.isInteger(whole) || whole < 0) throw new ResyncNeeded(`bad message index ${whole}`);
  const i = whole - base(v);
  if (i < 0) return; // a message before the window: not held
  switch (c.op) {
    case 'append': {
      const m = msgs[i];
      if (!m || typeof m.content !== 'string' || typeof c.text !== 'string') throw new ResyncNeeded(`append to message ${i} without string content`);
      m.content += c.text;
      const prev = d.messages.get(i);
      d.messages.set(i, d.messages.has(i) ? (prev != null ? prev + c.text : null) : c.text);
      return;
    }
    case 'add':
      if (i !== msgs.length || !isObject(c.message)) throw new ResyncNeeded(`add at ${i}, list has ${msgs.length}`);
      msgs.push(c.message);
      if (Number.isInteger(v.messageCount)) v.messageCount++;
      d.list = true;
      d.messages.set(i, null);
      return;
    case 'replace':
      if (i >= msgs.length || !isObject(c.message)) throw new ResyncNeeded(`replace at ${i}, list has ${msgs.length}`);
      if (msgs[i].id !== c.message.id) throw new ResyncNeeded(`replace at ${i} names ${c.message.id}, held ${msgs[i].id}`);
      msgs[i] = c.message;
      d.messages.set(i, null);
      return;
    default:
      throw new ResyncNeeded(`unknown message op ${c.op}`);
  }
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
