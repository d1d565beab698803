// app.js — the dashboard's controller: tenant and thread selection, the SSE
// connections (EventSource with the token as access_token, resumed by the
// browser with Last-Event-ID after a dropped connection), batching of
// updates into one draw per animation frame, and the live figures. A thread
// opens with a window of its newest messages (?window=, default 50, or
// #window=N in the page's address); older ones are read page by page
// (GET /v1/threads/{thread}/messages) as the reader scrolls up, keeping what
// is on screen in place. An open thread shows its newest message and
// follows new ones until the reader scrolls up (wheel, keys, touch or the
// scroll bar), and again once they scroll back to the end.
//
// A token given as #token=… is moved to sessionStorage at once and taken
// out of the address (it is not left in the history, and a reload of the
// tab keeps it); tokens pasted into the form are kept the same way. A kept
// token of a tenant replaces the one config.json offers for it.
import { h } from './dom.js';
import { apply, base, prependPage, Dirty, ResyncNeeded } from './viewdoc.js';
import { Messages, renderRuns, renderSteps, renderSubagents } from './render.js';
import { JsonTree } from './jsontree.js';
import { Metrics } from './metrics.js';
import { ThreadList } from './threadlist.js';

const $ = id => document.getElementById(id);

const app = {
  cfg: { tenants: [], api: '', metrics: '/metrics', window: 50, page: 50 },
  tenant: null, token: null,
  listES: null,
  selected: null,
  es: null, holder: { view: null }, dirty: new Dirty(), queued: [], resyncs: [],
  frames: [], renderMs: 0, raf: 0,
  follow: true,            // keep the newest message in view until the reader scrolls up
  scrolledAt: -1e9, dragging: false, // the reader's last scrolling input; a press on the messages (scroll bar)
  resumes: 0, views: 0,    // of the open thread: connections the browser resumed, whole views received
  older: null,             // the page request in flight: {thread, before}, or null
  anchor: null,            // after a page is put in front: the distance from the list's end to keep
};

// Scrolled to within this many pixels of the top, the next older page is read.
const nearTop = 300;
// Within this many pixels of the end, the page follows new messages.
const nearEnd = 60;
// A scroll this long after the reader's last scrolling input is the page's
// own (layout, scroll anchoring), not the reader's.
const inputMs = 600;

const messages = new Messages($('message-list'), subagentName);
const tree = new JsonTree($('state'));
const list = new ThreadList($('thread-scroll'), $('thread-list'), $('thread-count'), id => openThread(id), schedule);
const tokensKey = 'threadcast.tokens'; // sessionStorage: [{tenant, token}] given in this tab

function api(path) { return app.cfg.api + path; }
function withToken(path) { return api(path) + (path.includes('?') ? '&' : '?') + 'access_token=' + encodeURIComponent(app.token); }

function subagentName(id) {
  const v = app.holder.view;
  const s = v && Array.isArray(v.subagents) && v.subagents.find(x => x.subagentRunId === id);
  return s ? String(s.name) : null;
}

// ---- startup and routing (#tenant=…&thread=…, or #token=… for a token
// minted with `threadcast token`) ----

async function start() {
  const hash = new URLSearchParams(location.hash.slice(1));
  const given = takeToken(hash);
  try {
    const r = await fetch('config.json', { cache: 'no-store' });
    if (r.ok) Object.assign(app.cfg, await r.json());
  } catch { /* no config: ask for a token */ }
  const kept = keptTokens();
  app.cfg.tenants = (app.cfg.tenants || []).filter(t => !kept.some(k => k.tenant === t.tenant)).concat(kept);
  const w = Number(hash.get('window'));
  if (Number.isInteger(w) && w > 0) app.cfg.window = w;
  const sel = $('tenant');
  for (const t of app.cfg.tenants) sel.append(h('option', null, String(t.tenant)));
  sel.addEventListener('change', () => useTenant(sel.value, null));
  $('token-form').hidden = false;
  $('token-form').addEventListener('submit', e => { e.preventDefault(); useToken($('token').value.trim()); });
  $('filter').addEventListener('input', () => list.setFilter($('filter').value));
  $('back').addEventListener('click', () => { closeThread(); setHash(); });
  followReader($('messages'));
  setInterval(() => list.tick(), 1000);
  new Metrics(app.cfg.metrics, {
    ingest: $('fig-ingest'), out: $('fig-out'), lat: $('fig-lat'), subs: $('fig-subs'),
  }).start();
  setInterval(tickFigures, 500);
  if (given) useToken(given, hash.get('thread'));
  else if (app.cfg.tenants.length) {
    const want = hash.get('tenant');
    const t = app.cfg.tenants.find(x => x.tenant === want) || kept[kept.length - 1] || app.cfg.tenants[0];
    sel.value = t.tenant;
    useTenant(t.tenant, want === t.tenant ? hash.get('thread') : null);
  }
}

// takeToken returns the token of the address's fragment (hash, parsed),
// kept in sessionStorage and taken out of the address; null if none.
function takeToken(hash) {
  const token = hash.get('token');
  if (!token) return null;
  keepToken(token);
  hash.delete('token');
  const rest = hash.toString();
  history.replaceState(null, '', location.pathname + location.search + (rest ? '#' + rest : ''));
  return token;
}

// tenantOf reads the tenant claim of a token (an opaque one: "?").
function tenantOf(token) {
  try { return String(JSON.parse(atob(token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/'))).tenant || '?'); } catch { return '?'; }
}

// keptTokens returns the tokens given in this tab (sessionStorage).
function keptTokens() {
  try {
    const v = JSON.parse(sessionStorage.getItem(tokensKey) || '[]');
    return Array.isArray(v) ? v.filter(t => t && typeof t.tenant === 'string' && typeof t.token === 'string') : [];
  } catch { return []; } // storage disabled or garbled: nothing kept
}

// keepToken keeps a token for the tab's life, in place of any kept for its tenant.
function keepToken(token) {
  const tenant = tenantOf(token);
  try {
    sessionStorage.setItem(tokensKey, JSON.stringify(keptTokens().filter(t => t.tenant !== tenant).concat([{ tenant, token }])));
  } catch { /* storage disabled: the token lasts until a reload */ }
}

function useToken(token, thread) {
  if (!token) return;
  keepToken(token);
  const tenant = tenantOf(token);
  app.cfg.tenants = (app.cfg.tenants || []).filter(t => t.tenant !== tenant).concat([{ tenant, token }]);
  const sel = $('tenant');
  if (![...sel.options].some(o => o.value === tenant)) sel.append(h('option', null, tenant));
  sel.value = tenant;
  useTenant(tenant, thread);
}

function useTenant(tenant, thread) {
  const t = (app.cfg.tenants || []).find(x => x.tenant === tenant);
  if (!t) return;
  app.tenant = tenant;
  app.token = t.token;
  if (app.listES) app.listES.close();
  closeThread();
  list.clear();
  loadThreads();
  const es = app.listES = new EventSource(withToken('/v1/threads?live=1'));
  es.onmessage = e => {
    if (app.listES !== es) return;
    let info;
    try { info = JSON.parse(e.data); } catch { return; }
    if (!info || typeof info.thread !== 'string') return;
    list.live(info.thread, typeof info.status === 'string' ? info.status : '');
  };
  setHash();
  if (thread) openThread(thread);
}

// loadThreads reads the tenant's threads, page by page (GET /v1/threads),
// with the status and last activity each had at its last checkpoint.
async function loadThreads() {
  const tenant = app.tenant;
  let after = null;
  try {
    do {
      const r = await fetch(api('/v1/threads?limit=10000' + (after ? '&after=' + encodeURIComponent(after) : '')),
        { headers: { Authorization: 'Bearer ' + app.token } });
      if (!r.ok || tenant !== app.tenant) return;
      const body = await r.json();
      if (tenant !== app.tenant) return;
      for (const t of body.threads || []) {
        if (!t || typeof t.thread !== 'string') continue;
        list.listed(t.thread, typeof t.status === 'string' ? t.status : '', Date.parse(t.lastEvent || t.updated) || 0);
      }
      after = typeof body.next === 'string' && body.next ? body.next : null;
    } while (after);
  } catch { /* the live list still fills in */ }
}

function setHash() {
  const p = new URLSearchParams();
  if (app.tenant) p.set('tenant', app.tenant);
  if (app.selected) p.set('thread', app.selected);
  history.replaceState(null, '', '#' + p.toString());
}

// ---- one thread: the view-mode stream ----

function closeThread() {
  if (app.es) app.es.close();
  app.es = null;
  app.selected = null;
  list.select(null);
  $('layout').classList.remove('detail');
  $('thread-title').textContent = 'Pick a thread';
  $('thread-title').classList.add('muted');
  $('thread-status').textContent = '';
  $('thread-status').className = 'pill';
  $('thread-meta').textContent = '';
  $('thread-error').hidden = true;
  $('runs').replaceChildren();
  setConn('idle');
  app.holder.view = null;
  app.holder.paged = null;
  app.queued = [];
  app.older = null;
  app.anchor = null;
  messages.clear();
  $('state').replaceChildren();
  $('steps').replaceChildren();
  $('subagents').replaceChildren();
}

function openThread(id) {
  closeThread();
  app.selected = id;
  app.resumes = 0;
  app.views = 0;
  app.follow = true;
  app.dirty = new Dirty();
  app.dirty.all = true;
  $('thread-title').textContent = id;
  $('thread-title').classList.remove('muted');
  list.select(id);
  $('layout').classList.add('detail');
  setHash();
  connect();
  schedule();
}

function connect() {
  if (app.es) app.es.close();
  const id = app.selected;
  const es = new EventSource(withToken('/v1/threads/' + encodeURIComponent(id) + '/events?mode=view&window=' + app.cfg.window));
  app.es = es;
  setConn('connecting');
  let opened = 0;
  es.onopen = () => {
    if (app.es !== es) return;
    // A second open of the same EventSource is the browser resuming after
    // a drop, with Last-Event-ID.
    if (++opened > 1) app.resumes++;
    setConn('live');
  };
  es.onerror = () => {
    if (app.es !== es) return;
    // EventSource retries by itself (sending Last-Event-ID) unless the
    // server refused the request; then we retry after a pause.
    if (es.readyState === EventSource.CLOSED) refused(es);
    else setConn('retry');
  };
  es.onmessage = e => {
    if (app.es !== es) return;
    let p;
    try { p = JSON.parse(e.data); } catch { return; }
    app.frames.push(performance.now());
    if (p && p.type === 'view') app.views++;
    app.queued.push(p);
    schedule();
  };
}

// refused handles a stream the server refused: a token it does not accept
// is shown and not retried; anything else (unavailable, overloaded) is
// retried after a pause.
async function refused(es) {
  setConn('retry');
  let status = 0;
  try {
    const r = await fetch(api('/v1/threads/' + encodeURIComponent(app.selected)), { headers: { Authorization: 'Bearer ' + app.token } });
    status = r.status;
  } catch { /* network: retry */ }
  if (app.es !== es) return;
  if (status === 401 || status === 403) {
    setConn('denied');
    const err = $('thread-error');
    err.hidden = false;
    err.textContent = status === 401 ? 'The token was refused (expired or invalid): paste a new one.' : 'This token does not cover this thread.';
    return;
  }
  setTimeout(() => { if (app.es === es) connect(); }, 2000);
}

// resync re-joins the stream from a fresh view (a new EventSource sends no
// Last-Event-ID), at most a few times a second.
function resync(why) {
  console.warn('threadcast: resynchronising:', why);
  const now = Date.now();
  app.resyncs = app.resyncs.filter(t => now - t < 5000);
  app.resyncs.push(now);
  app.holder.view = null;
  app.queued = [];
  if (app.resyncs.length > 3) { setTimeout(connect, 1000); setConn('retry'); } else connect();
}

// drain applies the queued payloads to the held view, collecting what
// changed into one Dirty for the next draw.
function drain() {
  const q = app.queued;
  app.queued = [];
  for (const p of q) {
    try {
      app.dirty.merge(apply(app.holder, p));
    } catch (err) {
      if (!(err instanceof ResyncNeeded)) throw err;
      resync(err.message);
      return;
    }
  }
}

// loadOlder reads the page of messages before the first one held, when the
// held view does not start at the thread's first message. The page goes in
// front at the next draw, which keeps the reader's place (app.anchor).
async function loadOlder() {
  const v = app.holder.view;
  if (app.older || !v || !Array.isArray(v.messages) || !v.messages.length || base(v) === 0) return;
  const thread = app.selected, before = String(v.messages[0].id);
  const req = app.older = { thread, before };
  let page = null;
  try {
    const r = await fetch(api('/v1/threads/' + encodeURIComponent(thread) + '/messages?limit=' + app.cfg.page + '&before=' + encodeURIComponent(before)),
      { headers: { Authorization: 'Bearer ' + app.token } });
    if (r.ok) page = await r.json();
  } catch { /* the next scroll asks again */ }
  if (app.older !== req) return; // another thread was opened meanwhile
  app.older = null;
  if (!page || app.selected !== thread) return;
  drain(); // the page goes in front of the view as it stands
  const box = $('messages');
  const d = prependPage(app.holder, page);
  if (!d) return; // the list changed meanwhile; the next scroll asks again
  app.dirty.shift(page.messages.length);
  app.dirty.merge(d);
  if (app.anchor == null) app.anchor = box.scrollHeight - box.scrollTop;
  schedule();
}

// ---- drawing: at most once per animation frame ----

function schedule() {
  if (!app.raf) app.raf = requestAnimationFrame(draw);
}

function draw() {
  app.raf = 0;
  const t0 = performance.now();
  if (app.queued.length) drain();
  const v = app.holder.view;
  const d = app.dirty;
  if (!d.empty && v) {
    app.dirty = new Dirty();
    const box = $('messages');
    const msgs = Array.isArray(v.messages) ? v.messages : [];
    if (d.all || d.list) messages.renderAll(msgs, d.all, d.messages);
    else if (d.messages.size) messages.update(msgs, d.messages);
    if (d.all || d.state) tree.render(v.state);
    if (d.all || d.runs) {
      renderRuns($('runs'), v.runs);
      renderSteps($('steps'), v.steps, subagentName);
      renderSubagents($('subagents'), v.subagents, subagentName);
    }
    if (d.all || d.meta || d.runs || d.list) drawMeta(v);
    if (app.anchor != null) {
      // Older messages went in front: keep what the reader was looking at
      // where it was, then read on if the top is still in sight.
      if (app.follow) stickToEnd(box);
      else box.scrollTop = box.scrollHeight - app.anchor;
      app.anchor = null;
      if (box.scrollTop < nearTop) loadOlder();
    } else if (app.follow) {
      stickToEnd(box);
      if (box.scrollTop < nearTop) loadOlder(); // the window does not fill the screen
    }
    const ms = performance.now() - t0;
    app.renderMs = app.renderMs ? app.renderMs * 0.9 + ms * 0.1 : ms;
  }
  list.draw();
}

function drawMeta(v) {
  const st = $('thread-status');
  st.textContent = String(v.status ?? '');
  st.className = `pill ${String(v.status ?? '')}`;
  const held = Array.isArray(v.messages) ? v.messages.length : 0;
  const count = Number.isInteger(v.messageCount) && v.messageCount > held ? `${held} of ${v.messageCount}` : `${held}`;
  $('thread-meta').textContent = `seq ${v.seq} · ${count} messages` +
    (v.warnings ? ` · ${v.warnings} warnings` : '');
  const err = $('thread-error');
  err.hidden = v.error == null;
  err.textContent = v.error == null ? '' : `Stream rejected: ${v.error}`;
  if (typeof v.status === 'string') list.setStatus(app.selected, v.status);
}

// ---- following the newest message ----

// followReader wires the message list's scrolling. The page follows the
// newest message (app.follow) until the reader scrolls away from the end,
// and again once they are back at it. Only the reader's own input turns
// following off: a scroll that comes from layout (cards drawn at their real
// height, content-visibility) or from scroll anchoring is not a decision to
// read back. While following, any change of the list's size or of the
// box's (a message grows, a card is laid out, the window is resized) scrolls
// to the end again, so a thread opens at its last message however long its
// messages are.
function followReader(box) {
  const input = () => { app.scrolledAt = performance.now(); };
  const away = () => { input(); if (box.scrollHeight > box.clientHeight) app.follow = false; };
  box.addEventListener('wheel', e => { if (e.deltaY < 0) away(); else input(); }, { passive: true });
  box.addEventListener('touchstart', () => { app.dragging = true; input(); }, { passive: true });
  box.addEventListener('touchend', () => { app.dragging = false; input(); });
  box.addEventListener('touchcancel', () => { app.dragging = false; });
  // A press on the box itself, not on a message, is on its scroll bar.
  box.addEventListener('pointerdown', e => { if (e.target === box) { app.dragging = true; input(); } });
  window.addEventListener('pointerup', () => { if (app.dragging) { app.dragging = false; input(); } });
  document.addEventListener('keydown', e => {
    if (e.target !== document.body && !box.contains(e.target)) return;
    if (['ArrowUp', 'PageUp', 'Home'].includes(e.key) || (e.key === ' ' && e.shiftKey)) away();
    else if (['ArrowDown', 'PageDown', 'End', ' '].includes(e.key)) input();
  });
  box.addEventListener('scroll', () => {
    if (box.scrollHeight - box.scrollTop - box.clientHeight < nearEnd) app.follow = true;
    else if (app.dragging || performance.now() - app.scrolledAt < inputMs) app.follow = false;
    if (box.scrollTop < nearTop) loadOlder();
  }, { passive: true });
  const ro = new ResizeObserver(() => { if (app.follow && app.selected) stickToEnd(box); });
  ro.observe(box);
  ro.observe($('message-list'));
}

function stickToEnd(box) {
  const end = box.scrollHeight - box.clientHeight;
  if (box.scrollTop < end) box.scrollTop = end;
}

// ---- figures ----

function setConn(state) {
  const el = $('fig-conn');
  el.className = `fig ${state === 'live' ? 'live' : state === 'retry' ? 'retry' : ''}`;
  el.querySelector('.v').textContent = state;
}

function tickFigures() {
  const now = performance.now();
  app.frames = app.frames.filter(t => now - t < 1000);
  $('fig-fps').textContent = app.selected ? String(app.frames.length) : '–';
  $('fig-render').textContent = app.renderMs ? `${app.renderMs.toFixed(1)} ms` : '–';
  $('fig-resume').textContent = app.selected ? `${app.resumes}/${app.views}` : '–';
}

start();
