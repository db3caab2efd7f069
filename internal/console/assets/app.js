// sandboxctl console. Everything the daemon sends is data, and agent output
// is hostile: it is only ever put into the page as text (textContent or
// text nodes), never as markup.
'use strict';
(() => {
  const CSRF_HEADER = 'X-Sandboxctl-Csrf';
  const POLL_MS = 1000;
  const state = { csrf: '', canDecide: false, page: 'approvals', scopes: new Map(), finishedOutput: new Map(), timer: 0, openSandbox: '' };

  const $ = (id) => document.getElementById(id);

  // el builds an element; children are nodes or strings (made text nodes).
  function el(tag, props, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (k === 'class') e.className = v;
      else if (k === 'onclick') e.addEventListener('click', v);
      else if (k === 'disabled') e.disabled = !!v;
      else if (k === 'title') e.title = String(v);
      else if (k === 'colspan') e.colSpan = Number(v);
      else if (k.startsWith('data-')) e.setAttribute(k, String(v));
      else throw new Error('el: unsupported property ' + k);
    }
    for (const c of children) {
      if (c === null || c === undefined) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  // Code points a person cannot see (package display's rule: controls,
  // formats such as zero-width and bidi marks, separators and blanks other
  // than U+0020 such as U+3164 and U+2800, default-ignorables, private use,
  // unassigned) come from the daemon as a character class (hidden.js), the
  // one the CLI escapes with; a combining mark with nothing visible before
  // it, and a backslash that starts "\u{", are escaped too. They are shown
  // as \u{XXXX}, so a command cannot look like another. Newlines and tabs
  // stay.
  const HIDDEN = new RegExp('^[' + window.SANDBOXCTL_HIDDEN + ']$', 'u');
  const COMBINING = /^[\p{Mn}\p{Me}]$/u;
  function visible(v) {
    const chars = Array.from(String(v === null || v === undefined ? '' : v));
    let out = '';
    let based = false;
    for (let i = 0; i < chars.length; i++) {
      const c = chars[i];
      if (c === '\n' || c === '\t') {
        out += c;
        based = false;
      } else if (HIDDEN.test(c) || (COMBINING.test(c) && !based) || (c === '\\' && chars[i + 1] === 'u' && chars[i + 2] === '{')) {
        out += '\\u{' + c.codePointAt(0).toString(16).padStart(4, '0') + '}';
        based = false;
      } else {
        out += c;
        based = c !== ' ';
      }
    }
    return out;
  }

  function text(v) {
    if (v === null || v === undefined) return '';
    return typeof v === 'string' ? v : JSON.stringify(v, null, 2);
  }

  function status(msg) { $('status').textContent = msg || ''; }

  class AuthError extends Error {}

  async function call(method, path, body) {
    const opts = { method, credentials: 'same-origin', headers: {} };
    if (body !== undefined) {
      opts.headers['Content-Type'] = 'application/json';
      opts.body = JSON.stringify(body);
    }
    if (method !== 'GET' && state.csrf) opts.headers[CSRF_HEADER] = state.csrf;
    const res = await fetch(path, opts);
    let data = null;
    try { data = await res.json(); } catch (_) { /* not JSON */ }
    if (res.status === 401) throw new AuthError((data && data.error) || 'not logged in');
    if (!res.ok) throw new Error((data && data.error) || (method + ' ' + path + ': HTTP ' + res.status));
    return data;
  }

  function showLogin() {
    clearInterval(state.timer);
    state.timer = 0;
    $('login').hidden = false;
    $('nav').hidden = true;
    $('logout').hidden = true;
    $('who').textContent = '';
    for (const p of document.querySelectorAll('.page')) p.hidden = true;
  }

  async function start() {
    let me;
    try {
      me = await call('GET', '/ui/api/me');
    } catch (e) {
      if (e instanceof AuthError) { showLogin(); return; }
      status(e.message);
      return;
    }
    state.csrf = me.csrf;
    state.canDecide = !!me.canDecide;
    $('login').hidden = true;
    $('nav').hidden = false;
    $('logout').hidden = false;
    $('who').textContent = state.canDecide ? 'approver' : 'view only';
    route();
    clearInterval(state.timer);
    state.timer = setInterval(refresh, POLL_MS);
  }

  function route() {
    const page = (location.hash || '#approvals').slice(1);
    state.page = ['approvals', 'sessions', 'sandboxes', 'nodes', 'audit'].includes(page) ? page : 'approvals';
    for (const p of document.querySelectorAll('.page')) p.hidden = p.id !== state.page;
    for (const a of document.querySelectorAll('nav a')) a.classList.toggle('active', a.dataset.page === state.page);
    refresh();
  }

  let busy = false;
  async function refresh() {
    if (busy || $('nav').hidden) return;
    busy = true;
    try {
      const approvals = await call('GET', '/ui/api/approvals');
      learnScopes(approvals);
      const pending = approvals.filter((a) => a.status === 'pending');
      $('pending-count').textContent = pending.length ? '(' + pending.length + ')' : '';
      if (state.page === 'approvals') renderApprovals(pending, approvals.filter((a) => a.status !== 'pending'));
      if (state.page === 'sessions') await renderSessions();
      if (state.page === 'sandboxes') await renderSandboxes();
      if (state.page === 'nodes') await renderNodes();
      if (state.page === 'audit') await renderAudit();
      document.body.dataset.refreshed = String(Date.now());
    } catch (e) {
      if (e instanceof AuthError) showLogin();
      else status(e.message);
    } finally {
      busy = false;
    }
  }

  // Scopes (agent + session key) whose sessions the console watches: the
  // default one, those of approvals and sandboxes, and those asked for.
  function addScope(agentId, sessionKey) {
    const a = agentId || '', k = sessionKey || '';
    state.scopes.set(JSON.stringify([a, k]), { agentId: a, sessionKey: k });
  }
  function learnScopes(list) {
    for (const x of list || []) addScope(x.agentId, x.sessionKey);
  }

  function field(dl, name, value) {
    dl.append(el('dt', {}, name), el('dd', {}, value instanceof Node ? value : el('pre', {}, text(value))));
  }

  function renderApprovals(pending, recent) {
    const box = $('approvals-list');
    const cards = [];
    for (const a of pending) {
      const dl = el('dl');
      field(dl, 'Command', visible(a.command));
      field(dl, 'Argv', el('ol', {}, ...(a.argv || []).map((w) => el('li', {}, el('code', {}, visible(w))))));
      field(dl, 'Shell', visible(a.shell));
      field(dl, 'Cwd', visible(a.cwd));
      field(dl, 'Host', visible(a.host + (a.where && a.where !== a.host ? ' (' + a.where + ')' : '')));
      field(dl, 'Agent', visible((a.agentId || '(default)') + (a.sessionKey ? ' / ' + a.sessionKey : '')));
      const env = Object.entries(a.env || {});
      field(dl, 'Env', env.length ? el('ul', {}, ...env.map(([k, v]) => el('li', {}, el('code', {}, visible(k + '=' + v))))) : '(none beyond the defaults)');
      if (a.explain) field(dl, 'Why', visible(a.explain));
      field(dl, 'Expires', new Date(a.expiresAtMs).toLocaleTimeString());
      const buttons = el('div', { class: 'decide' },
        decideButton(a, 'allow-once', 'Allow once', 'allow'),
        decideButton(a, 'allow-always', 'Allow always', 'always'),
        decideButton(a, 'deny', 'Deny', 'deny'));
      if (!state.canDecide) buttons.append(el('span', { class: 'hint' }, 'view only: log in with the approver token to decide'));
      cards.push(el('div', { class: 'card approval', 'data-id': a.id }, el('h3', {}, 'Approval ' + (a.slug || a.id)), dl, buttons));
    }
    if (!cards.length) cards.push(el('p', { class: 'hint' }, 'No pending approvals.'));
    box.replaceChildren(...cards);
    const rows = recent.slice(0, 20).map((a) => el('tr', {},
      el('td', {}, a.slug || a.id), el('td', {}, visible(a.agentId)), el('td', {}, el('code', {}, visible(a.command))), el('td', {}, a.status)));
    $('approvals-recent').tBodies[0].replaceChildren(...rows);
  }

  function decideButton(a, decision, label, cls) {
    return el('button', {
      class: cls, disabled: !state.canDecide, 'data-decision': decision,
      onclick: async (ev) => {
        ev.target.disabled = true;
        try {
          await call('POST', '/ui/api/approvals/' + encodeURIComponent(a.id), { decision });
          status('Approval ' + (a.slug || a.id) + ': ' + decision);
        } catch (e) {
          status(e.message);
        }
        refresh();
      },
    }, label);
  }

  async function renderSessions() {
    addScope('', '');
    // Every agent's and session key's sessions, so that none is missed
    // because no approval or sandbox named its scope.
    const all = await call('GET', '/ui/api/all-sessions');
    learnScopes(all && all.sessions);
    const groups = new Map();
    for (const scope of state.scopes.values()) {
      const q = new URLSearchParams({ agentId: scope.agentId, sessionKey: scope.sessionKey });
      const res = await call('GET', '/ui/api/sessions?' + q);
      const sessions = (res.details && res.details.sessions) || [];
      if (!sessions.length) continue;
      const agent = scope.agentId || '(default agent)';
      if (!groups.has(agent)) groups.set(agent, []);
      for (const s of sessions) {
        // A finished session's output no longer changes: fetched once.
        const key = JSON.stringify([scope.agentId, scope.sessionKey, s.sessionId]);
        let out = state.finishedOutput.get(key);
        if (out === undefined) {
          const lq = new URLSearchParams({ agentId: scope.agentId, sessionKey: scope.sessionKey, limit: '200' });
          const log = await call('GET', '/ui/api/sessions/' + encodeURIComponent(s.sessionId) + '/log?' + lq);
          out = (log.content || []).map((c) => c.text).join('\n');
          if (s.status === 'completed' || s.status === 'failed') state.finishedOutput.set(key, out);
        }
        const dl = el('dl');
        field(dl, 'Command', visible(s.command));
        field(dl, 'Status', s.status + (s.exitCode !== undefined && s.exitCode !== null ? ' (exit ' + s.exitCode + ')' : ''));
        field(dl, 'Host', s.host);
        field(dl, 'Cwd', s.cwd);
        if (scope.sessionKey) field(dl, 'Session key', scope.sessionKey);
        groups.get(agent).push(el('div', { class: 'card session', 'data-session': s.sessionId },
          el('h3', {}, s.sessionId + ' ' + (s.name || '')), dl, el('pre', { class: 'output' }, out)));
      }
    }
    const parts = [];
    for (const [agent, cards] of groups) parts.push(el('div', { class: 'agent' }, el('h3', {}, 'Agent ' + agent), ...cards));
    if (!parts.length) parts.push(el('p', { class: 'hint' }, 'No running or recent background sessions.'));
    $('sessions-list').replaceChildren(...parts);
  }

  async function renderSandboxes() {
    let list;
    try {
      list = await call('GET', '/ui/api/sandboxes');
    } catch (e) {
      if (e instanceof AuthError) throw e;
      $('sandboxes-table').tBodies[0].replaceChildren(el('tr', {}, el('td', { colspan: 9 }, e.message)));
      return;
    }
    learnScopes(list);
    const change = async (s, method, action, body) => {
      if (method === 'DELETE' && !window.confirm('Remove sandbox ' + s.name + '?')) return;
      try {
        await call(method, '/ui/api/sandboxes/' + encodeURIComponent(s.name) + (action ? '/' + action : ''), body);
        status('');
      } catch (e) {
        if (e instanceof AuthError) throw e;
        status(s.name + ': ' + e.message);
      }
      await renderSandboxes();
    };
    const rows = (list || []).map((s) => {
      const labels = Object.entries(s.labels || {}).map(([k, v]) => k + '=' + v).join(', ');
      const actions = [el('button', { onclick: () => { state.openSandbox = s.name; renderSandbox(); } }, 'Explain')];
      if (state.canDecide) {
        if (s.state === 'running') actions.push(el('button', { 'data-action': 'pause', onclick: () => change(s, 'POST', 'pause') }, 'Pause'));
        if (s.state === 'paused') actions.push(el('button', { 'data-action': 'resume', onclick: () => change(s, 'POST', 'resume') }, 'Resume'));
        if (s.state === 'running') actions.push(el('button', { 'data-action': 'snapshot', onclick: () => change(s, 'POST', 'snapshot', {}) }, 'Snapshot'));
        actions.push(el('button', { 'data-action': 'remove', onclick: () => change(s, 'DELETE') }, 'Remove'));
      }
      return el('tr', { 'data-name': s.name },
        el('td', {}, s.name), el('td', {}, s.agentId || ''), el('td', {}, s.template || 'default'), el('td', {}, labels),
        el('td', {}, s.state), el('td', {}, s.expiresAt ? new Date(s.expiresAt).toLocaleString() : ''), el('td', {}, s.image),
        el('td', {}, s.current ? 'yes' : 'no (recreated)'), el('td', {}, ...actions));
    });
    if (!rows.length) rows.push(el('tr', {}, el('td', { colspan: 9 }, 'No sandboxes.')));
    $('sandboxes-table').tBodies[0].replaceChildren(...rows);
    if (state.openSandbox) await renderSandbox();
  }

  async function renderSandbox() {
    const name = state.openSandbox;
    let d;
    try {
      d = await call('GET', '/ui/api/sandboxes/' + encodeURIComponent(name));
    } catch (e) {
      $('sandbox-detail').replaceChildren(el('p', {}, name + ': ' + e.message));
      return;
    }
    const ex = d.explain || {};
    const dl = el('dl');
    field(dl, 'Recreate', ex.recreate);
    field(dl, 'Limits', ex.limits);
    field(dl, 'Hardening', ex.hardening);
    field(dl, 'Resource use', d.usage || d.usageError || '(not running)');
    field(dl, 'Snapshots', await snapshotTable(name));
    $('sandbox-detail').replaceChildren(el('div', { class: 'card', 'data-sandbox': name }, el('h3', {}, name), dl));
  }

  // snapshotTable lists a sandbox's snapshots (docs/snapshots.md), with
  // rollback, fork (into an agent the operator names) and removal for
  // sessions that may decide.
  async function snapshotTable(name) {
    let list;
    try {
      list = await call('GET', '/ui/api/sandboxes/' + encodeURIComponent(name) + '/snapshots');
    } catch (e) {
      if (e instanceof AuthError) throw e;
      return el('p', {}, e.message);
    }
    if (!list || !list.length) return el('p', { class: 'hint' }, 'No snapshots.');
    const act = async (method, path, body) => {
      try {
        await call(method, '/ui/api/sandboxes/' + encodeURIComponent(name) + path, body);
        status('');
      } catch (e) {
        if (e instanceof AuthError) throw e;
        status(name + ': ' + e.message);
      }
      await renderSandboxes();
    };
    const rows = list.map((sn) => {
      const actions = [];
      if (state.canDecide) {
        actions.push(el('button', { 'data-action': 'rollback', onclick: () => {
          if (window.confirm('Put ' + name + ' back to ' + sn.name + '? Its running commands end.')) act('POST', '/rollback', { snapshot: sn.name });
        } }, 'Roll back'));
        actions.push(el('button', { 'data-action': 'fork', onclick: () => {
          const agentId = window.prompt('Fork ' + sn.name + ' into the sandbox of agent:');
          if (agentId) act('POST', '/fork', { agentId, snapshot: sn.name });
        } }, 'Fork'));
        actions.push(el('button', { 'data-action': 'remove-snapshot', onclick: () => {
          if (window.confirm('Remove snapshot ' + sn.name + '?')) act('DELETE', '/snapshots/' + encodeURIComponent(sn.name));
        } }, 'Remove'));
      }
      return el('tr', { 'data-snapshot': sn.name }, el('td', {}, sn.name), el('td', {}, new Date(sn.createdAt).toLocaleString()),
        el('td', {}, String(sn.bytes) + ' B, ' + String(sn.files) + ' files'), el('td', {}, sn.method), el('td', {}, ...actions));
    });
    return el('table', {}, el('thead', {}, el('tr', {}, ...['name', 'taken', 'size', 'copy', ''].map((h) => el('th', {}, h)))),
      el('tbody', {}, ...rows));
  }

  async function renderNodes() {
    const list = await call('GET', '/ui/api/nodes');
    const rows = (list || []).map((n) => el('tr', {},
      el('td', {}, (n.name || n.id) + (n.connected ? '' : ' (disconnected)')), el('td', {}, el('pre', {}, text(n)))));
    if (!rows.length) rows.push(el('tr', {}, el('td', { colspan: 2 }, 'No nodes connected.')));
    $('nodes-table').tBodies[0].replaceChildren(...rows);
  }

  // callLines fetches an NDJSON answer (GET /ui/api/audit) as a list.
  async function callLines(path) {
    const res = await fetch(path, { credentials: 'same-origin' });
    const body = await res.text();
    if (!res.ok) {
      let msg = path + ': HTTP ' + res.status;
      try { msg = JSON.parse(body).error || msg; } catch (_) { /* not JSON */ }
      if (res.status === 401) throw new AuthError(msg);
      throw new Error(msg);
    }
    return body.split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l));
  }

  async function renderAudit() {
    const q = new URLSearchParams();
    if ($('audit-agent').value) q.set('agent', $('audit-agent').value);
    if ($('audit-kind').value) q.set('kind', $('audit-kind').value);
    const list = (await callLines('/ui/api/audit?' + q.toString())).reverse();
    const rows = list.map((r) => {
      const a = r.actor || {};
      const actor = [a.via, a.token, a.uid !== undefined ? 'uid ' + a.uid : '', a.pid ? 'pid ' + a.pid : ''].filter(Boolean).join(' ');
      const details = {};
      for (const k of ['sessionId', 'requestId', 'host', 'node', 'exec', 'guard', 'approval', 'session', 'file', 'sandbox', 'daemon']) {
        if (r[k] !== undefined) details[k] = r[k];
      }
      return el('tr', { 'data-seq': r.seq }, el('td', {}, String(r.seq)), el('td', {}, r.time), el('td', {}, r.kind),
        el('td', {}, visible(actor)), el('td', {}, visible(r.agentId || '')), el('td', {}, el('pre', {}, visible(text(details)))));
    });
    if (!rows.length) rows.push(el('tr', {}, el('td', { colspan: 6 }, 'No records.')));
    $('audit-table').tBodies[0].replaceChildren(...rows);
  }

  document.addEventListener('DOMContentLoaded', () => {
    $('audit-form').addEventListener('submit', (ev) => { ev.preventDefault(); refresh(); });
    window.addEventListener('hashchange', route);
    $('login-form').addEventListener('submit', async (ev) => {
      ev.preventDefault();
      try {
        await call('POST', '/ui/api/login', { token: $('token').value });
        $('token').value = '';
        status('');
        start();
      } catch (e) {
        status(e.message);
      }
    });
    $('logout').addEventListener('click', async () => {
      try { await call('POST', '/ui/api/logout'); } catch (_) { /* gone already */ }
      showLogin();
    });
    $('scope-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      addScope($('scope-agent').value.trim(), $('scope-key').value.trim());
      refresh();
    });
    start();
  });
})();
