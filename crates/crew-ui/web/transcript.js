// @ts-check
// A task's transcript (the worker's raw JSON stream, redacted by crewd) as entries, reading the
// same events as `crewctl logs` (crates/crewctl/src/render/transcript.rs): pi's JSON mode,
// Claude Code's stream-json, Codex's exec JSON; anything else is shown raw.

/** @typedef {{kind: 'session'|'prompt'|'text'|'thinking'|'tool'|'result'|'error'|'retry'|'raw', text: string, error?: boolean}} Entry */

/** @param {any} c */
function contentText(c) {
  if (typeof c === 'string') return c;
  if (Array.isArray(c)) return c.filter((p) => typeof p?.text === 'string').map((p) => p.text).join('\n');
  return '';
}

/** @param {unknown} v */
function compact(v) {
  if (v == null) return '';
  if (typeof v === 'string') return v;
  return JSON.stringify(v);
}

/** @param {any} m @returns {Entry[]} */
function piMessage(m) {
  /** @type {Entry[]} */
  const out = [];
  if (m?.role === 'user') {
    const t = contentText(m.content);
    if (t) out.push({ kind: 'prompt', text: t });
  } else if (m?.role === 'assistant') {
    for (const p of Array.isArray(m.content) ? m.content : []) {
      if (p?.type === 'text') out.push({ kind: 'text', text: p.text ?? '' });
      else if (p?.type === 'thinking') out.push({ kind: 'thinking', text: p.thinking ?? '' });
      else if (p?.type === 'toolCall') out.push({ kind: 'tool', text: `${p.name ?? '?'} ${compact(p.arguments)}` });
    }
    if (m.stopReason === 'error' || m.errorMessage) out.push({ kind: 'error', text: m.errorMessage ?? 'model error' });
  }
  return out;
}

/** @param {string} line @returns {Entry[]} */
export function parseLine(line) {
  if (!line.trim()) return [];
  let v;
  try {
    v = JSON.parse(line);
  } catch {
    return [{ kind: 'raw', text: line }];
  }
  switch (v?.type) {
    case 'session':
      return [{ kind: 'session', text: `session ${v.id ?? '?'} · cwd ${v.cwd ?? '?'}` }];
    case 'message_end':
      return piMessage(v.message);
    case 'tool_execution_end':
      return [{ kind: 'result', text: `${v.toolName ?? '?'}: ${contentText(v.result?.content)}`, error: !!v.isError }];
    case 'auto_retry_start':
      return [{ kind: 'retry', text: `retry ${v.attempt}/${v.maxAttempts} in ${v.delayMs}ms: ${v.errorMessage ?? ''}` }];
    case 'system':
      return v.subtype === 'init' ? [{ kind: 'session', text: `claude session · model ${v.model ?? '?'} · cwd ${v.cwd ?? '?'}` }] : [];
    case 'assistant': {
      /** @type {Entry[]} */
      const out = [];
      for (const p of Array.isArray(v.message?.content) ? v.message.content : []) {
        if (p?.type === 'text') out.push({ kind: 'text', text: p.text ?? '' });
        else if (p?.type === 'thinking') out.push({ kind: 'thinking', text: p.thinking ?? '' });
        else if (p?.type === 'tool_use') out.push({ kind: 'tool', text: `${p.name ?? '?'} ${compact(p.input)}` });
      }
      return out;
    }
    case 'user':
      return (Array.isArray(v.message?.content) ? v.message.content : [])
        .filter((/** @type {any} */ p) => p?.type === 'tool_result')
        .map((/** @type {any} */ p) => ({ kind: 'result', text: contentText(p.content), error: !!p.is_error }));
    case 'result':
      return v.is_error ? [{ kind: 'error', text: v.result ?? v.subtype ?? 'error' }] : [];
    case 'item.completed': {
      const it = v.item ?? {};
      if (it.type === 'agent_message') return [{ kind: 'text', text: it.text ?? '' }];
      if (it.type === 'reasoning') return [{ kind: 'thinking', text: it.text ?? '' }];
      if (it.type === 'command_execution') return [{ kind: 'tool', text: `$ ${it.command ?? ''}` }, { kind: 'result', text: it.aggregated_output ?? '', error: (it.exit_code ?? 0) !== 0 }];
      return [];
    }
    case 'error':
      return [{ kind: 'error', text: v.message ?? 'error' }];
    case 'turn.failed':
      return [{ kind: 'error', text: compact(v.error) || 'turn failed' }];
    default:
      return [];
  }
}

/** @param {string} text @returns {Entry[]} */
export function parseTranscript(text) {
  return text.split('\n').flatMap(parseLine);
}
