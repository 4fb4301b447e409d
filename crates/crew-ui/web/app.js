// @ts-check
// crew's dashboard: runs, a run as a live DAG, a task, schedules, caches, and a form to start
// a run. Every action is a call of crewd's public JSON-RPC API (through `rpc.js`); refusals are
// shown with the API's own code and message.

/** @typedef {import('../../../proto-docs/crew-api').RunSummaryView} RunSummaryView */
/** @typedef {import('../../../proto-docs/crew-api').StatusResult} StatusResult */
/** @typedef {import('../../../proto-docs/crew-api').TaskView} TaskView */
/** @typedef {import('../../../proto-docs/crew-api').Event} CrewEvent */
/** @typedef {import('../../../proto-docs/crew-api').Job} Job */
/** @typedef {import('../../../proto-docs/crew-api').TaskCommitView} TaskCommitView */
/** @typedef {import('../../../proto-docs/crew-api').DiffResult} DiffResult */

import { Rpc, RpcError } from './rpc.js';
import { drawDag, candidateLine } from './dag.js';
import { parseTranscript } from './transcript.js';
import { shortIds } from './ids.js';
import { timeline } from './timeline.js';

const rpc = new Rpc();
// For tests and the benchmark: the page's API connection.
/** @type {any} */ (window).crewRpc = rpc;

const RUN_STATUSES = ['queued', 'running', 'blocked', 'completed', 'failed', 'cancelled'];
const ACTIVE = new Set(['queued', 'running', 'blocked']);

/** What a task event says about the task's status. */
const TASK_STATUS_OF = /** @type {Record<string, string>} */ ({
  'task.started': 'running',
  'task.completed': 'completed',
  'task.failed': 'failed',
  'task.waiting': 'waiting',
  'task.needs_attention': 'needs_attention',
  'task.cancelled': 'cancelled',
  'task.skipped': 'skipped',
  'task.queued': 'queued',
  'task.retrying': 'queued',
});

/**
 * @param {string} tag
 * @param {Record<string, any> | null} [attrs]
 * @param {...(Node | string | null | undefined | false)} children
 * @returns {HTMLElement}
 */
function h(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(e.dataset, v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) if (c !== null && c !== undefined && c !== false) e.append(c);
  return e;
}

/**
 * `replaceChildren` without the holes: conditional parts are written `cond ? node : null`.
 * @param {Element} parent
 * @param {...(Node | string | null | undefined | false)} children
 */
function fill(parent, ...children) {
  parent.replaceChildren(...children.filter((c) => c !== null && c !== undefined && c !== false));
}

/** @param {unknown} err */
function showError(err) {
  const box = document.getElementById('msg');
  if (!box) return;
  const text = err instanceof RpcError ? `${err.message} (code ${err.code})` : String(err);
  box.replaceChildren(h('div', { class: 'error', role: 'alert' }, text, ' ', h('button', { class: 'link', onclick: () => box.replaceChildren(), 'aria-label': 'dismiss' }, '×')));
}

function clearError() {
  document.getElementById('msg')?.replaceChildren();
}

/**
 * Runs `f`, showing a refusal instead of throwing.
 * @param {() => Promise<any>} f
 */
async function act(f) {
  clearError();
  try {
    return await f();
  } catch (e) {
    showError(e);
    return undefined;
  }
}

/**
 * One id's short form among `all` (the ids listed beside it), as crewctl shows it.
 * @param {string} id
 * @param {string[]} all
 */
const shortId = (id, all) => shortIds(all).get(id) ?? id;

/** @param {string | null | undefined} iso */
function age(iso) {
  if (!iso) return '';
  const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (s < 60) return `${Math.round(s)}s`;
  if (s < 3600) return `${Math.round(s / 60)}m`;
  if (s < 86400) return `${Math.round(s / 3600)}h`;
  return `${Math.round(s / 86400)}d`;
}

/** @param {{input:number, output:number, cacheWrite?:number}} u */
const tokens = (u) => (u.input + u.output).toLocaleString();
/** @param {number} c */
const cost = (c) => `$${c.toFixed(c < 1 ? 4 : 2)}`;

/** The order a run's task counts are drawn in, done first. */
const STRIP = /** @type {const} */ ([['completed', 'completed'], ['skipped', 'skipped'], ['running', 'running'], ['waiting', 'waiting'], ['needsAttention', 'needs_attention'], ['failed', 'failed'], ['cancelled', 'cancelled'], ['queued', 'queued']]);

/**
 * A run's tasks as one small bar, a segment per status as wide as its count (the runs list).
 * @param {RunSummaryView} r
 */
function strip(r) {
  const counts = /** @type {Record<string, number>} */ (/** @type {unknown} */ (r.tasks));
  const parts = STRIP.filter(([k]) => (counts[k] ?? 0) > 0);
  const label = parts.map(([k, s]) => `${counts[k]} ${s.replace('_', ' ')}`).join(', ') || 'no tasks';
  return h('span', { class: 'strip', role: 'img', 'aria-label': label, title: label },
    ...parts.map(([k, s]) => h('span', { class: `s-${s}`, 'data-status': s, 'data-count': counts[k], style: `flex-grow: ${counts[k]}` })));
}

/** A task's tokens and cost, as its DAG node shows them. @param {TaskView} t */
const usageLabel = (t) => t.usage.input + t.usage.output > 0 ? `${tokens(t.usage)} tok · ${cost(t.usage.cost)}` : '';

/** @param {string} status */
const badge = (status) => h('span', { class: `badge s-${status}`, 'data-status': status }, status.replace('_', ' '));

// ---------------------------------------------------------------------------------------------
// The daemon-wide event feed: one subscription for the runs list and the schedules page.

/** @type {Set<(e: CrewEvent) => void>} */
const feedListeners = new Set();
/** @type {ReturnType<Rpc['subscribe']> | null} */
let feed = null;

async function startFeed() {
  if (feed) return;
  const st = await rpc.call('daemon.status');
  feed = rpc.subscribe({ afterSeq: st.journal.lastSeq }, (e) => feedListeners.forEach((f) => f(e)));
}

/**
 * @param {() => void} f
 * @param {number} ms
 */
function debounce(f, ms) {
  /** @type {any} */ let t = null;
  return () => {
    if (t) return;
    t = setTimeout(() => {
      t = null;
      f();
    }, ms);
  };
}

// ---------------------------------------------------------------------------------------------
// Views. Each returns a cleanup function, called when the route changes.

/** @param {HTMLElement} main */
async function runsView(main) {
  const params = new URLSearchParams(location.hash.split('?')[1] ?? '');
  let status = params.get('status') ?? '';
  let team = params.get('team') ?? '';
  /** @type {RunSummaryView[]} */
  let runs = [];
  /** @type {string | null | undefined} */
  let next = null;
  const tbody = h('tbody');
  const more = h('button', { onclick: () => load(true) }, 'Load more');
  const teams = await act(() => rpc.call('resource.list', {}));
  const statusSel = h('select', { id: 'filter-status', 'aria-label': 'status filter', onchange: () => { status = /** @type {HTMLSelectElement} */ (statusSel).value; setQuery(); load(false); } },
    h('option', { value: '' }, 'all statuses'), ...RUN_STATUSES.map((s) => h('option', { value: s, selected: s === status }, s)));
  const teamSel = h('select', { id: 'filter-team', 'aria-label': 'team filter', onchange: () => { team = /** @type {HTMLSelectElement} */ (teamSel).value; setQuery(); load(false); } },
    h('option', { value: '' }, 'all teams'), ...(teams?.teams ?? []).map((/** @type {any} */ t) => h('option', { value: t.name, selected: t.name === team }, t.name)));
  const setQuery = () => {
    const q = new URLSearchParams();
    if (status) q.set('status', status);
    if (team) q.set('team', team);
    history.replaceState(null, '', `#/${q.toString() ? `?${q}` : ''}`);
  };
  main.replaceChildren(
    h('h1', null, 'Runs'),
    h('div', { class: 'toolbar' }, statusSel, teamSel, h('a', { href: '#/new', class: 'button' }, 'New run')),
    h('table', { class: 'runs' },
      h('thead', null, h('tr', null, ...['run', 'status', 'team', 'goal', 'age', 'progress', 'tokens', 'cost'].map((c) => h('th', { scope: 'col' }, c)))),
      tbody),
    more,
  );
  function render() {
    // Filtered by the API (`team.list`'s `status` and `team`), so paging holds whole pages.
    const shown = runs;
    const short = shortIds(shown.map((r) => r.id));
    tbody.replaceChildren(...shown.map((r) => {
      const done = r.tasks.completed + r.tasks.skipped;
      return h('tr', { dataset: { run: r.id, status: r.status } },
        h('td', null, h('a', { href: `#/run/${r.id}`, title: r.id, class: 'run-id' }, short.get(r.id) ?? r.id)),
        h('td', null, badge(r.status)),
        h('td', null, r.team),
        h('td', { class: 'goal', title: r.goal }, r.goal),
        h('td', { title: r.createdAt }, age(r.createdAt)),
        h('td', null, strip(r), ` ${done}/${r.tasks.total}`),
        h('td', { class: 'num' }, tokens(r.usage)),
        h('td', { class: 'num' }, cost(r.usage.cost)));
    }));
    if (shown.length === 0) tbody.append(h('tr', null, h('td', { colspan: 8, class: 'empty' }, 'No runs.')));
    more.hidden = !next;
  }
  /** @param {boolean} append */
  async function load(append) {
    const res = await act(() => rpc.call('team.list', { limit: 50, status: status || null, team: team || null, before: append ? next : null }));
    if (!res) return;
    runs = append ? runs.concat(res.runs) : res.runs;
    next = res.next;
    render();
  }
  // Live: re-read the loaded window when any run changes (at most every 300 ms).
  const refresh = debounce(async () => {
    const res = await rpc.call('team.list', { limit: Math.min(1000, Math.max(50, runs.length)), status: status || null, team: team || null }).catch(() => null);
    if (!res) return;
    runs = res.runs;
    next = res.next;
    render();
  }, 300);
  const onEvent = (/** @type {CrewEvent} */ e) => { if (e.type.startsWith('run.') || e.type.startsWith('task.')) refresh(); };
  feedListeners.add(onEvent);
  await load(false);
  startFeed();
  return () => feedListeners.delete(onEvent);
}

/**
 * @param {HTMLElement} main
 * @param {string} runId
 * @param {string | undefined} taskId
 * @param {() => boolean} current whether this view is still the page's (the route may change
 *   while it loads; a view left behind must not draw over its successor)
 */
async function runView(main, runId, taskId, current) {
  // The seq to subscribe after is read before the status, so no event falls between them.
  const st0 = await act(() => rpc.call('daemon.status'));
  /** @type {StatusResult | undefined} */
  let st = await act(() => rpc.call('team.status', { runId }));
  if (!current()) return () => {};
  if (!st0 || !st) {
    main.replaceChildren(h('h1', null, 'Run'), h('p', null, `Cannot show run ${runId}.`), h('a', { href: '#/' }, 'Back to runs'));
    return () => {};
  }
  let selected = taskId ?? null;
  const head = h('section', { class: 'run-head' });
  const dagHost = h('div', { class: 'dag', id: 'dag' });
  const panel = h('section', { class: 'task-panel', id: 'task-panel', 'aria-live': 'polite' });
  const timeHost = h('div', { class: 'timeline', id: 'timeline' });
  main.replaceChildren(h('p', null, h('a', { href: '#/' }, '← Runs')), head, dagHost,
    h('details', { open: true, class: 'timeline-box' }, h('summary', null, 'Timeline'), timeHost), panel);
  // The attempts so far, from the run's stored events up to where the subscription starts.
  const times = timeline(timeHost, st.tasks.map((t) => t.id));
  for (let after = 0; after < st0.journal.lastSeq;) {
    const page = await rpc.call('team.events', { runId, afterSeq: after, limit: 1000 }).catch(() => null);
    if (!page || page.events.length === 0 || page.nextSeq <= after) break;
    for (const e of page.events) if (e.seq <= st0.journal.lastSeq) times.add(e);
    after = page.nextSeq;
  }
  if (!current()) return () => {};
  times.draw();
  const redrawTimes = debounce(() => times.draw(), 100);
  const onSelect = (/** @type {string} */ id) => {
    selected = id;
    history.replaceState(null, '', `#/run/${runId}/task/${id}`);
    dag.select(id);
    renderPanel();
  };
  const dag = drawDag(dagHost, st.tasks, onSelect, usageLabel);
  let drawnIds = st.tasks.map((t) => t.id).join(',');

  // What a plan approval approves, on the page without a click: the planner's result
  // (`shared/plan.md`, as `crewctl` shows it), read once per pending approval.
  const planToApprove = h('section', { class: 'plan-to-approve', id: 'plan-to-approve' });
  let planRead = false;
  async function readPlan() {
    if (planRead) return;
    planRead = true;
    const a = await rpc.call('team.artifact', { runId, name: 'shared/plan.md', limit: 64 * 1024 }).catch(() => null);
    const tasks = st?.tasks.filter((t) => t.status === 'queued').map((t) => `${t.id} (${t.role})`) ?? [];
    fill(planToApprove,
      h('h2', null, 'The plan to approve'),
      a?.content ? h('pre', { class: 'plan' }, a.content) : h('p', { class: 'hint' }, 'The planner left no shared/plan.md.'),
      a?.truncated ? h('p', { class: 'hint' }, 'The plan is cut here; the whole of it: crewctl cat ' + runId + ' shared/plan.md') : null,
      tasks.length ? h('p', { class: 'meta' }, `Approving starts: ${tasks.join(', ')}.`) : null);
  }

  function renderHead() {
    // A reload answered after the route moved on would mark the page as this run's.
    if (!st || !current()) return;
    if (st.run.approval === 'pending') readPlan();
    else planRead = false;
    const r = st.run;
    const budget = r.budget
      ? h('div', { class: 'budget' }, 'budget ', h('meter', { min: 0, max: r.budget.tokens, value: r.usage.input + r.usage.output + r.usage.cacheWrite, high: r.budget.tokens * r.budget.warnAt, 'aria-label': 'budget used' }), ` ${tokens(r.usage)} / ${r.budget.tokens.toLocaleString()} tokens`)
      : null;
    const waiting = st.tasks.filter((t) => t.status === 'waiting' || t.status === 'needs_attention');
    const why = r.status === 'blocked'
      ? h('p', { class: 'blocked', role: 'status' }, r.approval === 'pending' ? 'Waiting for you to approve the plan.' : waiting.length ? `Waiting for you: ${waiting.map((t) => `${t.id} (${t.status.replace('_', ' ')})`).join(', ')}.` : r.reason ?? 'blocked')
      : r.reason && r.status !== 'completed' ? h('p', { class: 'reason' }, r.reason) : null;
    const btn = (/** @type {string} */ label, /** @type {string} */ method, /** @type {any} */ extra = {}) =>
      h('button', { 'data-action': method, onclick: () => act(() => rpc.call(method, { runId, ...extra })).then(reload) }, label);
    fill(head,
      h('h1', null, r.goal),
      h('p', { class: 'meta' }, badge(r.status), ` ${r.team} / ${r.workflow} · ${r.runtime} · `, h('span', { title: r.id }, r.id)),
      h('p', { class: 'meta' }, `${tokens(r.usage)} tokens · ${cost(r.usage.cost)} · ${r.usage.turns} turns`, r.durationMs != null ? ` · ${(r.durationMs / 1000).toFixed(1)}s` : ''),
      r.verdict ? h('p', { class: `verdict verdict-${r.verdict}`, id: 'run-verdict' }, `Verdict: ${r.verdict.replace('_', ' ')}`) : null,
      st.workspace
        ? h('p', { class: 'meta workspace' }, 'worktree · branch ', h('code', null, st.workspace.branch),
          st.workspace.integrated ? ` · integrated: ${diffstat(st.workspace.integrated)}` : ' · not integrated yet')
        : null,
      budget,
      why,
      r.approval === 'pending' && (st.addedTasks ?? []).length === 0 ? planToApprove : null,
      renderAdded(st),
      h('div', { class: 'toolbar' },
        r.approval === 'pending' ? btn('Approve plan', 'team.approve') : null,
        r.approval === 'pending' ? btn('Reject plan', 'team.reject') : null,
        ACTIVE.has(r.status) ? btn('Cancel run', 'team.cancel') : null,
        ['failed', 'cancelled', 'blocked'].includes(r.status) ? btn('Resume', 'team.resume') : null),
    );
    head.dataset.runStatus = r.status;
    main.dataset.runStatus = r.status;
    main.dataset.runId = r.id;
  }

  // The task panel is three parts: its head and body are redrawn on every change of the run,
  // but the answer/steer form is built once per task and kind and then left alone, so what the
  // user is typing (its text, focus and selection) survives every redraw around it.
  const panelHead = h('div', { class: 'panel-head' });
  const panelForm = h('div', { class: 'panel-form' });
  const panelBody = h('div', { class: 'panel-body' });
  /** @type {string | null} */
  let panelTask = null;

  async function renderPanel() {
    if (!st || !selected) {
      panelTask = null;
      panel.replaceChildren(h('p', { class: 'hint' }, 'Select a task (click or Tab + Enter) to see its prompt, transcript and result.'));
      return;
    }
    const t = st.tasks.find((x) => x.id === selected);
    if (!t) return;
    if (panelTask !== t.id) {
      panelTask = t.id;
      panelHead.replaceChildren();
      panelBody.replaceChildren();
      setForm(panelForm, null);
      panel.replaceChildren(panelHead, panelForm, panelBody);
    }
    const names = t.artifacts.map((a) => a.name);
    const read = (/** @type {string | undefined} */ name, tail = false) => readPart(runId, name, tail);
    // The latest attempt's prompt (`prompts/<task>.md`, a second name of it) and the current
    // attempt's transcript (written as the attempt runs, listed only once it ends), read by
    // name as `crewctl logs` reads them.
    const prompt = t.attempts > 0 ? `prompts/${t.id}.md` : undefined;
    const transcript = t.attempts > 0 ? `transcripts/${t.id}.attempt-${t.attempts}.jsonl` : undefined;
    const result = names.find((n) => n.startsWith('results/'));
    // Worktree mode: the task's branch and change, from the public `team.diff`.
    const commit = st.workspace?.tasks?.[t.id] ?? null;
    const diffOf = async () => commit ? rpc.call('team.diff', { runId, taskId: t.id, limit: 256 * 1024 }).catch(() => null) : null;
    // A transcript grows at its end, where the latest output and the final answer are: of a
    // long one the page shows the end.
    const [promptPart, transcriptPart, resultPart, diff] = await Promise.all([read(prompt), read(transcript, true), read(result), diffOf()]);
    const promptText = promptPart.text;
    const transcriptText = transcriptPart.text;
    const resultText = resultPart.text;
    if (selected !== t.id || panelTask !== t.id) return;
    fill(panelHead,
      h('h2', null, `${t.id} `, badge(t.status)),
      h('p', { class: 'meta' }, `${t.role} (${t.agent}) · attempt ${t.attempts} · ${tokens(t.usage)} tokens · ${cost(t.usage.cost)}`, t.model ? ` · ${t.model}` : '', t.progress.currentTool ? ` · now: ${t.progress.currentTool}` : ''),
      t.error ? h('p', { class: 'error' }, t.error) : null,
      t.verdict ? renderVerdict(t.verdict) : null,
      t.question ? h('p', { class: 'question' }, `Question: ${t.question}`) : null,
      !['running', 'queued', 'waiting'].includes(t.status) ? h('button', { 'data-action': 'team.retry', onclick: () => act(() => rpc.call('team.retry', { runId, taskIds: [t.id] })).then(reload) }, 'Retry task') : null,
    );
    setForm(panelForm, t.status === 'waiting' ? 'answer' : t.status === 'running' ? 'steer' : null, t.id);
    // Which parts the user opened or closed stay so across the redraw.
    /** @type {Map<string, boolean>} */
    const opened = new Map([...panelBody.querySelectorAll('details[data-part]')].map((d) => [/** @type {HTMLElement} */ (d).dataset.part ?? '', /** @type {HTMLDetailsElement} */ (d).open]));
    const part = (/** @type {string} */ name, /** @type {boolean} */ open) => opened.get(name) ?? open;
    // A step with candidates (its selector, or one of them): the candidates side by side.
    const sel = t.candidates?.of ? st.tasks.find((x) => x.id === t.candidates?.of) : t;
    fill(panelBody,
      sel?.candidates?.members?.length ? renderCandidates(sel, st.tasks, part('candidates', true)) : null,
      resultText ? h('details', { open: part('result', true), dataset: { part: 'result' } }, h('summary', null, 'Result'), h('pre', { class: 'result' }, resultText), cutHint(runId, resultPart)) : null,
      commit ? renderChange(commit, diff) : null,
      h('details', { open: part('transcript', t.status === 'running'), dataset: { part: 'transcript' } }, h('summary', null, 'Transcript'), cutHint(runId, transcriptPart), renderTranscript(transcriptText)),
      promptText ? h('details', { open: part('prompt', false), dataset: { part: 'prompt' } }, h('summary', null, 'Prompt'), h('pre', null, promptText), cutHint(runId, promptPart)) : null,
    );
  }

  /**
   * The answer or steer form of the task, built only when the kind of form the task needs
   * changes (`kind` null: none).
   * @param {HTMLElement} slot
   * @param {'answer' | 'steer' | null} kind
   * @param {string} [taskId]
   */
  function setForm(slot, kind, taskId) {
    const key = kind ? `${kind}:${taskId}` : '';
    if (slot.dataset.key === key) return;
    slot.dataset.key = key;
    if (!kind || !taskId) {
      slot.replaceChildren();
      return;
    }
    const label = kind === 'answer' ? 'Answer' : 'Steer';
    const method = kind === 'answer' ? 'team.respond' : 'team.steer';
    const input = /** @type {HTMLTextAreaElement} */ (h('textarea', { id: kind, rows: 2, required: true, 'aria-label': label }));
    const submit = (/** @type {Event} */ ev) => {
      ev.preventDefault();
      const message = input.value;
      // The API refuses an empty message too; saying so here keeps the box and its focus.
      if (!message.trim()) {
        showError(kind === 'answer' ? 'Type an answer first: an empty answer is not sent.' : 'Type a message first: an empty steer is not sent.');
        input.focus();
        return;
      }
      act(() => rpc.call(method, { runId, taskId, message })).then((r) => {
        if (r) input.value = '';
        reload();
      });
    };
    // novalidate: the empty case is ours to explain (above), not the browser's bubble.
    slot.replaceChildren(h('form', { class: 'task-form', novalidate: true, 'data-form': kind, onsubmit: submit },
      h('label', { for: kind }, label), input, h('button', { type: 'submit' }, label)));
  }

  async function reload() {
    const fresh = await rpc.call('team.status', { runId }).catch(() => null);
    if (!fresh) return;
    /** @type {StatusResult} */
    const cur = fresh;
    st = cur;
    const ids = cur.tasks.map((t) => t.id).join(',');
    if (ids !== drawnIds) {
      // Tasks were added (a fan-out): lay the graph out again.
      drawnIds = ids;
      Object.assign(dag, drawDag(dagHost, cur.tasks, onSelect, usageLabel));
      if (selected) dag.select(selected);
    } else {
      for (const t of cur.tasks) dag.setStatus(t.id, t.status, t.verdict?.verdict);
    }
    for (const t of cur.tasks) dag.setUsage(t.id, candidateLine(t) ?? usageLabel(t));
    renderHead();
    renderPanel();
  }
  const refresh = debounce(reload, 150);
  const sub = rpc.subscribe({ runId, afterSeq: st0.journal.lastSeq }, (e) => {
    const s = TASK_STATUS_OF[e.type];
    // The colour changes on the event itself; the rest of the page follows from a re-read.
    if (s && e.taskId) dag.setStatus(e.taskId, s);
    times.add(e);
    redrawTimes();
    refresh();
  });
  // After a reconnect (daemon restart) the status is read again too.
  const onState = (/** @type {boolean} */ up) => { if (up) refresh(); };
  rpc.onState.push(onState);
  renderHead();
  if (selected) dag.select(selected);
  renderPanel();
  return () => {
    sub.close();
    times.stop();
    rpc.onState.splice(rpc.onState.indexOf(onState), 1);
  };
}

/**
 * The tasks fan-out steps added (`addedTasks`): with a plan approval pending they are what the
 * approve button lets start, so each shows its role, title, dependencies, scope and commands,
 * and the steps waiting for them say which commands will check the work.
 * @param {StatusResult} st
 */
function renderAdded(st) {
  const added = st.addedTasks ?? [];
  if (added.length === 0) return null;
  const pending = added.some((t) => t.awaitingApproval);
  const list = (/** @type {string[] | undefined} */ xs, /** @type {string} */ none) =>
    xs && xs.length ? h('span', null, ...xs.flatMap((x, i) => [i ? ', ' : '', h('code', null, x)])) : h('span', { class: 'hint' }, none);
  const rows = added.map((t) => h('tr', { 'data-added': t.id },
    h('td', null, h('code', null, t.id)),
    h('td', { class: 'role' }, t.agent === t.role ? t.role : `${t.role} (${t.agent})`),
    h('td', { class: 'title' }, t.title ?? ''),
    h('td', { class: 'deps' }, list(t.dependsOn.filter((d) => d !== t.addedBy), '-')),
    h('td', { class: 'scope' }, list(t.scope, 'any file')),
    h('td', { class: 'commands' }, list(t.verifyCommands, 'none'))));
  const addedIds = new Set(added.map((t) => t.id));
  const later = st.tasks.filter((t) => !addedIds.has(t.id) && (t.verifyCommands ?? []).length > 0);
  const by = [...new Set(added.map((t) => t.addedBy))].join(', ');
  return h('section', { class: 'added-tasks', id: 'added-tasks', 'data-pending': pending ? 'true' : 'false' },
    h('h2', null, pending ? `Tasks added by ${by}, awaiting your approval` : `Tasks added by ${by}`),
    h('table', null,
      h('thead', null, h('tr', null, ...['task', 'role', 'title', 'after', 'scope', 'verify commands'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', null, ...rows)),
    later.length
      ? h('ul', { class: 'later-checks' }, ...later.map((t) => h('li', { 'data-task': t.id }, h('code', null, t.id), ' then runs ', list(t.verifyCommands, ''))))
      : null);
}

/** `2 files changed, +10 -2`, or `no change` for a commit that is its start. @param {TaskCommitView} c */
function diffstat(c) {
  if (c.commit === c.start) return 'no change';
  return `${c.files} file${c.files === 1 ? '' : 's'} changed, +${c.insertions} -${c.deletions}`;
}

/** What the task panel reads of an artifact. */
const PART_BYTES = 256 * 1024;

/**
 * @typedef {{ name: string, text: string, shown: number, bytes: number, cut: 'none' | 'end' | 'start' }} Part
 * An artifact as the panel shows it: whole, its first `PART_BYTES` (`cut: 'end'`), or with
 * `tail` its last ones from a line's start (`cut: 'start'`); `shown` of its `bytes` bytes.
 */

/**
 * @param {string} runId
 * @param {string | undefined} name
 * @param {boolean} tail
 * @returns {Promise<Part>}
 */
async function readPart(runId, name, tail) {
  const none = { name: name ?? '', text: '', shown: 0, bytes: 0, cut: /** @type {const} */ ('none') };
  if (!name) return none;
  const a = await rpc.call('team.artifact', { runId, name, limit: PART_BYTES }).catch(() => null);
  if (!a) return none;
  const head = { name, text: a.content, shown: a.read ?? new TextEncoder().encode(a.content).length, bytes: a.bytes, cut: /** @type {Part['cut']} */ (a.truncated ? 'end' : 'none') };
  if (!a.truncated || !tail) return head;
  // One byte before the last `PART_BYTES`: when it is a line's end, the page starts with a
  // whole line.
  const offset = Math.max(0, a.bytes - PART_BYTES - 1);
  const b = await rpc.call('team.artifact', { runId, name, offset, limit: PART_BYTES + 1 }).catch(() => null);
  if (!b) return head;
  // From the first whole line: the page may start inside one (or inside a character). A last
  // line longer than the page has no start in it: then the page as it is.
  const nl = b.content.indexOf('\n');
  const fromLine = nl >= 0 ? b.content.slice(nl + 1) : '';
  const text = fromLine || b.content;
  const shown = new TextEncoder().encode(text).length;
  // The transcript may have grown between the two reads: the newer size.
  const bytes = Math.max(a.bytes, b.bytes);
  return { name, text, shown, bytes, cut: 'start' };
}

/**
 * Says that a part is not shown whole, and how to read all of it.
 * @param {string} runId
 * @param {Part} p
 */
function cutHint(runId, p) {
  if (p.cut === 'none') return null;
  const left = Math.max(0, p.bytes - p.shown);
  const where = p.cut === 'start' ? `its first ${left} bytes are left out` : `cut here, ${left} more bytes`;
  return h('p', { class: 'hint cut' }, `Shown: ${p.shown} of ${p.bytes} bytes (${where}); all of it: crewctl cat ${runId} ${p.name}`);
}

/**
 * A worktree task's branch and change (`team.diff`). Every part is a text node (`h` appends
 * strings as text), so a patch holding markup shows as the text it is.
 * @param {TaskCommitView} c
 * @param {DiffResult | null} diff
 */
function renderChange(c, diff) {
  return h('details', { open: true, class: 'change', id: 'task-change' },
    h('summary', null, 'Changes'),
    h('p', { class: 'meta' }, 'branch ', h('code', { class: 'branch' }, c.branch), ` · ${diffstat(c)} · `, h('span', { title: c.commit }, c.commit.slice(0, 12))),
    diff?.patch ? h('pre', { class: 'patch' }, diff.patch) : null,
    diff?.truncated ? h('p', { class: 'hint' }, `The patch is cut here: git diff ${c.start.slice(0, 12)} ${c.branch} shows all of it.`) : null);
}

/**
 * A judge's last verdict and its findings (issue 30): each finding's title, severity, paths
 * and detail, as the judge gave them (text only).
 * @param {NonNullable<TaskView['verdict']>} v
 */
function renderVerdict(v) {
  const findings = v.findings ?? [];
  return h('div', { class: `verdict verdict-${v.verdict}`, id: 'task-verdict' },
    h('p', null, h('strong', null, `Verdict: ${v.verdict.replace('_', ' ')}`), findings.length ? ` · ${findings.length} finding${findings.length === 1 ? '' : 's'}` : ''),
    findings.length
      ? h('ol', { class: 'findings' }, ...findings.map((f) => h('li', null,
        h('strong', null, f.title),
        f.severity ? ` (${f.severity})` : '',
        f.paths?.length ? h('span', { class: 'meta' }, ` · ${f.paths.join(', ')}`) : null,
        f.detail ? h('p', null, f.detail) : null)))
      : null);
}

/**
 * A step's candidates side by side (issue 36): each one's runtime, status, diffstat, checks
 * and usage, the chosen one marked, and why it was chosen (the judge's reasons, or the rule).
 * Every part is a text node: a failing check's output or a judge's reason stays text.
 * @param {TaskView} sel the step's task (the selector)
 * @param {TaskView[]} tasks
 * @param {boolean} open
 */
function renderCandidates(sel, tasks, open) {
  const c = sel.candidates;
  if (!c) return null;
  const chosen = c.choice?.candidate;
  const cols = (c.members ?? []).map((id) => {
    const t = tasks.find((x) => x.id === id);
    const own = t?.candidates;
    const failed = own?.failedChecks ?? [];
    const ds = own?.diffstat;
    const done = t?.status === 'completed';
    const checks = !done ? 'checks not run yet' : failed.length === 0 ? 'checks passed' : `${failed.length} check${failed.length === 1 ? '' : 's'} failed: out`;
    return h('section', { class: `candidate${id === chosen ? ' chosen' : ''}`, dataset: { candidate: id, index: String(own?.index ?? ''), passed: String(done && failed.length === 0) } },
      h('h3', null, `Candidate ${own?.index ?? '?'}`, id === chosen ? ' · chosen' : ''),
      h('p', { class: 'meta' }, t ? badge(t.status) : null, ` ${own?.runtime ?? t?.agent ?? ''}${t?.model ? ` · ${t.model}` : ''}`),
      h('p', { class: 'diffstat' }, ds ? `${ds.files} file${ds.files === 1 ? '' : 's'} changed, +${ds.insertions} -${ds.deletions}` : 'no commit yet'),
      h('p', { class: done && failed.length === 0 ? 'checks ok' : 'checks' }, checks),
      failed.length ? h('ul', { class: 'failed-checks' }, ...failed.map((f) => h('li', null, h('code', null, f)))) : null,
      t ? h('p', { class: 'meta' }, `${tokens(t.usage)} tokens · ${cost(t.usage.cost)}`) : null);
  });
  const why = c.choice
    ? h('p', { class: 'choice' }, `Chose ${c.choice.index > 0 ? `candidate ${c.choice.index}` : c.choice.candidate} (by ${c.choice.by}): `, h('span', { class: 'reason' }, c.choice.reason))
    : h('p', { class: 'hint' }, 'No choice yet.');
  return h('details', { open, class: 'candidates', id: 'task-candidates', dataset: { part: 'candidates' } },
    h('summary', null, `Candidates of ${sel.id} (${c.members?.length ?? 0}, select: ${c.select ?? ''})`),
    why,
    h('div', { class: 'candidate-grid' }, ...cols));
}

function renderTranscript(text) {
  const entries = parseTranscript(text);
  if (entries.length === 0) return h('p', { class: 'hint' }, 'Nothing yet.');
  return h('ol', { class: 'transcript' }, ...entries.map((e) => h('li', { class: `t-${e.kind}${e.error ? ' t-failed' : ''}` }, h('span', { class: 'kind' }, e.kind), ' ', e.text)));
}

/** @param {HTMLElement} main */
async function newRunView(main) {
  const res = await act(() => rpc.call('resource.list', {}));
  const field = (/** @type {string} */ label, /** @type {HTMLElement} */ input) => h('label', null, h('span', null, label), input);
  const team = h('select', { id: 'run-team' }, ...(res?.teams ?? []).map((/** @type {any} */ t) => h('option', { value: t.name, selected: t.name === 'default' }, t.name)));
  const workflow = h('select', { id: 'run-workflow' }, h('option', { value: '' }, '(the team’s default)'), ...(res?.workflows ?? []).map((/** @type {any} */ w) => h('option', { value: w.name }, w.name)));
  const goal = h('textarea', { id: 'run-goal', rows: 3, required: true });
  const cwd = h('input', { id: 'run-cwd', required: true, placeholder: '/path/to/your/project' });
  const runtime = h('input', { id: 'run-runtime', placeholder: 'pi (the default), fake, claude, codex, …' });
  const approval = h('input', { id: 'run-approval', type: 'checkbox' });
  const preview = h('section', { id: 'plan-preview', 'aria-live': 'polite' });
  const params = () => {
    const v = (/** @type {HTMLElement} */ e) => /** @type {HTMLInputElement} */ (e).value.trim();
    return {
      goal: v(goal), cwd: v(cwd), team: v(team) || null, workflow: v(workflow) || null, runtime: v(runtime) || null,
      requirePlanApproval: /** @type {HTMLInputElement} */ (approval).checked || null,
    };
  };
  const showPlan = async () => {
    const plan = await act(() => rpc.call('team.plan', params()));
    if (!plan) return null;
    fill(preview,
      h('h2', null, `Plan: ${plan.team} / ${plan.workflow} on ${plan.runtime}, ${plan.concurrency} at a time`),
      h('ol', null, ...plan.tasks.map((/** @type {any} */ t) => h('li', null, `${t.id} — ${t.role} (${t.agent})${t.edits ? ', edits files' : ''}${t.dependsOn.length ? `, after ${t.dependsOn.join(', ')}` : ''}${t.scope?.length ? `; scope: ${t.scope.join(', ')}` : ''}${t.verifyCommands?.length ? `; verify: ${t.verifyCommands.join('; ')}` : ''}`))),
      plan.diagnostics.length ? h('ul', { class: 'diagnostics' }, ...plan.diagnostics.map((/** @type {any} */ d) => h('li', { class: `d-${d.severity}` }, `${d.severity}: ${d.path}${d.line ? `:${d.line}` : ''}${d.field ? ` (${d.field})` : ''}: ${d.message}`))) : h('p', null, 'No diagnostics.'),
    );
    return plan;
  };
  main.replaceChildren(
    h('h1', null, 'New run'),
    h('form', { class: 'new-run', onsubmit: async (/** @type {Event} */ ev) => {
      ev.preventDefault();
      const started = await act(() => rpc.call('team.run', params()));
      if (started) location.hash = `#/run/${started.runId}`;
    } },
    field('Team', team), field('Workflow', workflow), field('Goal', goal), field('Working directory', cwd), field('Runtime', runtime), field('Require plan approval', approval),
    h('div', { class: 'toolbar' }, h('button', { type: 'button', id: 'preview-plan', onclick: showPlan }, 'Preview plan'), h('button', { type: 'submit', id: 'start-run' }, 'Start run'))),
    preview,
  );
  return () => {};
}

/** @param {HTMLElement} main */
async function schedulesView(main) {
  const list = h('div', { id: 'schedules' });
  main.replaceChildren(h('h1', null, 'Schedules'), list);
  async function load() {
    const res = await act(() => rpc.call('schedule.list'));
    if (!res) return;
    if (res.jobs.length === 0) {
      list.replaceChildren(h('p', { class: 'empty' }, 'No scheduled jobs. Add one with `crewctl schedule add`.'));
      return;
    }
    const rows = await Promise.all(res.jobs.map(async (/** @type {Job} */ j) => {
      const fires = j.kind === 'cron' ? (await rpc.call('schedule.preview', { cron: j.spec, timezone: j.timezone, count: 5 }).catch(() => null))?.fireTimes ?? [] : j.nextFireAt ? [j.nextFireAt] : [];
      // Removing a schedule leaves the runs it started going (the API's default cancels
      // them; a button labelled Remove must not stop work without saying so).
      const params = (/** @type {string} */ method) => method === 'schedule.remove' ? { id: j.id, cancelRuns: false } : { id: j.id };
      const btn = (/** @type {string} */ label, /** @type {string} */ method) => h('button', { 'data-action': method, onclick: () => act(() => rpc.call(method, params(method))).then(load) }, label);
      return h('article', { class: 'job', dataset: { job: j.id } },
        h('h2', null, `${j.name} `, h('span', { class: `badge ${j.enabled ? 's-running' : 's-cancelled'}` }, j.enabled ? 'enabled' : 'disabled')),
        h('p', { class: 'meta' }, `${j.kind} ${j.spec} (${j.timezone}) · team ${j.run.team ?? 'default'} · “${j.run.goal}” · fired ${j.fireCount}×`),
        h('p', null, 'Next fires: ', h('span', { class: 'next-fires' }, fires.length ? fires.join(', ') : '—')),
        h('p', null, 'Last fire: ', j.lastFireAt ?? 'never', j.lastRunId ? h('span', null, ' → ', h('a', { href: `#/run/${j.lastRunId}` }, shortId(j.lastRunId, j.runIds.concat(j.lastRunId)))) : ''),
        j.runIds.length ? h('p', null, 'Runs: ', ...j.runIds.slice(-10).flatMap((id) => [h('a', { href: `#/run/${id}` }, shortId(id, j.runIds)), ' '])) : null,
        h('div', { class: 'toolbar' }, j.enabled ? btn('Disable', 'schedule.disable') : btn('Enable', 'schedule.enable'), btn('Run now', 'schedule.trigger'), btn('Remove', 'schedule.remove')));
    }));
    list.replaceChildren(...rows);
  }
  const refresh = debounce(load, 300);
  const onEvent = (/** @type {CrewEvent} */ e) => { if (e.type.startsWith('schedule.')) refresh(); };
  feedListeners.add(onEvent);
  await load();
  startFeed();
  return () => feedListeners.delete(onEvent);
}

/** @param {HTMLElement} main */
async function daemonView(main) {
  const [st, caches] = await Promise.all([act(() => rpc.call('daemon.status')), act(() => rpc.call('cache.stats'))]);
  const dl = (/** @type {[string, string | number][]} */ rows) => h('dl', null, ...rows.flatMap(([k, v]) => [h('dt', null, k), h('dd', null, String(v))]));
  const cache = (/** @type {string} */ name, /** @type {any} */ c) => h('section', null, h('h2', null, name), dl([
    ['entries', `${c.entries} / ${c.capacity}`], ['hit rate', `${(c.hitRate * 100).toFixed(1)}%`], ['hits', c.hits], ['misses', c.misses], ['evictions', c.evictions],
    ...(c.tokensSaved !== undefined ? /** @type {[string, string|number][]} */ ([['tokens saved', c.tokensSaved.toLocaleString()], ['cost saved', cost(c.costSaved)]]) : []),
  ]));
  fill(main,
    h('h1', null, 'Daemon'),
    st ? dl([['version', st.version], ['pid', st.pid], ['uptime', `${Math.round(st.uptimeMs / 1000)}s`], ['socket', st.socket], ['state', st.stateDir], ['runs', `${st.runs.total} (${st.runs.active} active)`], ['journal', `${st.journal.bytes.toLocaleString()} bytes, seq ${st.journal.lastSeq}`]]) : null,
    caches ? h('div', { class: 'caches' }, cache('Result reuse', caches.results), cache('Resources', caches.resources), cache('Runs', caches.runs)) : null,
  );
  return () => {};
}

// ---------------------------------------------------------------------------------------------

/** @type {() => void} */
let cleanup = () => {};
let routeToken = 0;

async function route() {
  const my = ++routeToken;
  cleanup();
  cleanup = () => {};
  const main = /** @type {HTMLElement} */ (document.getElementById('main'));
  // Until the new view has drawn, nothing says the page shows the old run (its status, id).
  delete main.dataset.runStatus;
  delete main.dataset.runId;
  const path = location.hash.replace(/^#/, '').split('?')[0] || '/';
  for (const a of document.querySelectorAll('nav a')) a.toggleAttribute('aria-current', a.getAttribute('href') === `#${path}`);
  const m = path.match(/^\/run\/([^/]+)(?:\/task\/([^/]+))?$/);
  const c = m ? await runView(main, decodeURIComponent(m[1]), m[2] && decodeURIComponent(m[2]), () => my === routeToken)
    : path === '/new' ? await newRunView(main)
    : path === '/schedules' ? await schedulesView(main)
    : path === '/daemon' ? await daemonView(main)
    : await runsView(main);
  if (my === routeToken) cleanup = c;
  else c();
}

rpc.onState.push((up) => {
  const s = document.getElementById('conn');
  if (!s) return;
  s.dataset.state = up ? 'up' : 'down';
  s.textContent = up ? 'connected' : 'reconnecting to crewd…';
});
window.addEventListener('hashchange', (e) => {
  // A replaceState inside a view does not fire this; a changed route does.
  const before = new URL(e.oldURL).hash.split('?')[0];
  const after = location.hash.split('?')[0];
  if (before !== after) route();
});
route();
