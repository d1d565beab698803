// render.js — draws a view document. Messages are keyed DOM elements that
// live as long as the message: a change re-fills only that element, and
// streamed text is appended to its text node (O(delta), not O(message)), so
// a thread streaming hundreds of deltas a second stays cheap to draw.
import { h, link, pretty, colour } from './dom.js';

const textRoles = new Set(['user', 'assistant', 'system', 'developer']);

export class Messages {
  constructor(container, names) {
    this.box = container;
    this.names = names; // function(subagentRunId) -> display name or null
    this.entries = new Map(); // key -> entry {el, key, text (Text node or null), m}
  }

  clear() { this.entries.clear(); this.box.replaceChildren(); }

  // renderAll reconciles the list with messages, re-filling every element
  // when refill is set, else only new ones and those in dirty (index ->
  // appended text or null).
  renderAll(messages, refill, dirty) {
    const keep = new Set();
    let prev = null;
    messages.forEach((m, i) => {
      const key = keyOf(m);
      keep.add(key);
      let e = this.entries.get(key);
      if (!e) {
        e = { key, el: h('article', { 'data-id': String(m.id) }), text: null, open: false };
        this.entries.set(key, e);
        this.fill(e, m);
      } else if (refill || (dirty && dirty.has(i))) {
        this.fill(e, m);
      }
      const want = prev ? prev.nextSibling : this.box.firstChild;
      if (want !== e.el) this.box.insertBefore(e.el, want);
      prev = e.el;
    });
    while (prev ? prev.nextSibling : this.box.firstChild) (prev ? prev.nextSibling : this.box.firstChild).remove();
    for (const k of this.entries.keys()) if (!keep.has(k)) this.entries.delete(k);
  }

  // update applies per-message changes without touching the list's shape.
  update(messages, dirty) {
    for (const [i, appended] of dirty) {
      const m = messages[i];
      const e = m && this.entries.get(keyOf(m));
      if (!e) continue;
      if (appended != null && e.text && e.m === m) {
        e.text.appendData(appended);
        if (e.count) e.count.data = countLabel(m);
      } else {
        this.fill(e, m);
      }
    }
  }

  fill(e, m) {
    e.m = m;
    e.text = null;
    e.count = null;
    const role = String(m.role);
    e.el.className = `msg role-${role.replace(/[^a-z]/g, '')}`;
    const head = h('header', null, h('span', { class: 'role' }, role));
    if (m.name) head.append(h('span', { class: 'name' }, String(m.name)));
    if (m.subagentRunId) head.append(this.badge(String(m.subagentRunId)));
    if (m.encryptedValue) head.append(h('span', { class: 'pill', title: 'An encrypted reasoning artefact is attached' }, 'encrypted'));
    const usage = usageOf(m.metadata);
    if (usage) head.append(h('span', { class: 'muted' }, usage));
    const parts = [head];
    if (textRoles.has(role)) {
      const t = document.createTextNode(contentText(m.content));
      if (typeof m.content === 'string' || m.content === undefined) e.text = t;
      parts.push(h('div', { class: 'content' }, t));
      if (Array.isArray(m.toolCalls)) for (const c of m.toolCalls) parts.push(toolCall(c));
    } else if (role === 'reasoning') {
      const t = document.createTextNode(typeof m.content === 'string' ? m.content : '');
      e.text = t;
      e.count = document.createTextNode(countLabel(m));
      const d = h('details', { class: 'reasoning' }, h('summary', null, e.count), h('div', { class: 'content' }, t));
      d.open = e.open;
      d.addEventListener('toggle', () => { e.open = d.open; });
      parts.push(d);
    } else if (role === 'tool') {
      head.append(h('span', { class: 'muted mono' }, `→ ${m.toolCallId}`));
      parts.push(h('pre', null, pretty(contentText(m.content))));
      if (m.error) parts.push(h('div', { class: 'error' }, String(m.error)));
    } else if (role === 'activity') {
      head.firstChild.textContent = 'activity';
      parts.push(widget(String(m.activityType), m.content));
    } else {
      parts.push(h('pre', null, pretty(m)));
    }
    if (m.metadata && typeof m.metadata === 'object') {
      parts.push(h('details', { class: 'meta' }, h('summary', null, 'metadata'), h('pre', null, pretty(m.metadata))));
    }
    e.el.replaceChildren(...parts);
  }

  badge(id) {
    const name = this.names(id);
    const b = h('span', { class: 'badge', title: `subagent run ${id}`, 'data-subagent': id }, name ? `${name} · ${short(id)}` : short(id));
    b.style.background = colour(id);
    return b;
  }
}

function keyOf(m) { return `${m.id}\u0000${m.role}`; }

function short(id) { return id.length > 10 ? id.slice(0, 4) + '…' + id.slice(-4) : id; }

function countLabel(m) {
  const n = typeof m.content === 'string' ? m.content.length : 0;
  return `Reasoning · ${n} chars${m.encryptedValue ? ' · encrypted value attached' : ''}`;
}

// contentText renders string content, or the text parts of a part list
// (other parts as placeholders: the dashboard never loads remote media).
function contentText(c) {
  if (c == null) return '';
  if (typeof c === 'string') return c;
  if (Array.isArray(c)) return c.map(p => p && p.type === 'text' ? String(p.text) : `[${p && p.type} part]`).join('');
  return JSON.stringify(c);
}

// usageOf finds a token usage record in message metadata (any key ending in
// "usage", e.g. the demo agents' "threadcast.demo/usage").
function usageOf(md) {
  if (!md || typeof md !== 'object') return null;
  for (const [k, v] of Object.entries(md)) {
    if (/usage$/i.test(k) && v && typeof v === 'object' && Number.isFinite(v.outputTokens)) {
      return `${v.outputTokens} tokens out`;
    }
  }
  return null;
}

function toolCall(c) {
  const f = (c && c.function) || {};
  return h('div', { class: 'toolcall' },
    h('span', { class: 'name' }, `${f.name}()`), ' ',
    h('span', { class: 'muted mono' }, String(c.id)),
    c.encryptedValue ? h('span', { class: 'pill', title: 'encrypted value attached' }, 'encrypted') : null,
    h('pre', null, pretty(typeof f.arguments === 'string' ? f.arguments : '')));
}

// Widgets by activity type; unknown types are shown as JSON.
const widgets = { web_search: searchWidget, checklist: checklistWidget };

function widget(type, content) {
  const w = widgets[type];
  if (w && content && typeof content === 'object') {
    try { return w(content); } catch { /* malformed for this widget: fall through */ }
  }
  return h('div', { class: 'widget generic', 'data-activity': 'generic' },
    h('h4', null, h('span', { class: 'mono' }, type)), h('pre', null, pretty(content)));
}

function searchWidget(c) {
  const results = Array.isArray(c.results) ? c.results : [];
  const searching = c.status !== 'done';
  const list = h('ol', { class: 'results' });
  for (const r of results) {
    if (!r || typeof r !== 'object') continue;
    list.append(h('li', null, link(r.url, r.title ?? r.url ?? ''), h('span', { class: 'url' }, String(r.url ?? '')),
      r.snippet != null ? h('div', { class: 'snippet' }, String(r.snippet)) : null));
  }
  return h('div', { class: 'widget search', 'data-activity': 'web_search', 'data-results': String(results.length), 'data-status': String(c.status ?? '') },
    h('h4', null, h('span', { class: 'muted' }, 'web search'), h('span', { class: 'query' }, String(c.query ?? '')),
      searching ? h('span', { class: 'spinner', title: String(c.status ?? '') }) : h('span', { class: 'pill finished' }, String(c.status)),
      Number.isFinite(c.tookMs) ? h('span', { class: 'muted' }, `${c.tookMs} ms`) : null),
    results.length ? list : h('div', { class: 'empty' }, 'waiting for results…'));
}

function checklistWidget(c) {
  const items = Array.isArray(c.items) ? c.items : [];
  const done = items.filter(i => i && i.done === true).length;
  const ul = h('ul', { class: 'checklist' });
  for (const it of items) {
    if (!it || typeof it !== 'object') continue;
    const box = document.createElement('input');
    box.type = 'checkbox';
    box.checked = it.done === true;
    box.disabled = true;
    ul.append(h('li', { class: it.done === true ? 'done' : null }, box, h('span', null, String(it.label ?? ''))));
  }
  return h('div', { class: 'widget checklist', 'data-activity': 'checklist', 'data-done': String(done) },
    h('h4', null, h('span', { class: 'muted' }, 'checklist'), h('span', null, String(c.title ?? 'Checklist')), h('span', { class: 'muted' }, `${done}/${items.length}`)), ul);
}

// Side panels.

export function renderRuns(ol, runs) {
  ol.replaceChildren(...(runs || []).map(r => {
    const tokens = Array.isArray(r.usage) ? r.usage.reduce((s, u) => s + (Number.isFinite(u && u.totalTokens) ? u.totalTokens : 0), 0) : 0;
    const err = r.error ? `${r.error.code ? r.error.code + ': ' : ''}${r.error.message}` : r.rejection ? `${r.rejection.code}: ${r.rejection.reason}` : null;
    const outcome = r.outcome && r.outcome.type && r.outcome.type !== 'success' ? r.outcome.type : null;
    return h('li', { title: String(r.runId), 'data-run': String(r.runId) },
      h('span', { class: `pill ${r.verdict === 'rejected' ? 'rejected' : String(r.status)}` }, r.verdict === 'rejected' ? 'rejected' : String(r.status)),
      h('span', { class: 'mono' }, short(String(r.runId))),
      outcome && outcome !== r.status ? h('span', { class: 'muted' }, outcome) : null,
      tokens ? h('span', { class: 'muted' }, `${tokens} tok`) : null,
      err ? h('span', { class: 'error' }, err) : null);
  }));
}

export function renderSteps(ul, steps, names) {
  if (!steps || !steps.length) { ul.replaceChildren(h('li', { class: 'empty' }, 'none')); return; }
  ul.replaceChildren(...steps.map(s => {
    const owner = s.subagentRunId ? names(String(s.subagentRunId)) || short(String(s.subagentRunId)) : null;
    return h('li', null, String(s.name ?? s.stepName ?? ''), owner ? h('span', { class: 'muted' }, ` · ${owner}`) : null);
  }));
}

export function renderSubagents(ol, subs, names) {
  if (!subs || !subs.length) { ol.replaceChildren(h('li', { class: 'empty' }, 'none')); return; }
  ol.replaceChildren(...subs.map(s => {
    const id = String(s.subagentRunId);
    const b = h('span', { class: 'badge', 'data-subagent': id }, `${s.name} · ${short(id)}`);
    b.style.background = colour(id);
    return h('li', null, b, h('span', { class: `pill ${String(s.status)}` }, String(s.status)),
      s.parentSubagentRunId ? h('span', { class: 'muted' }, `in ${names(String(s.parentSubagentRunId)) || short(String(s.parentSubagentRunId))}`) : null,
      s.error ? h('span', { class: 'error' }, String(s.error.message)) : null);
  }));
}
