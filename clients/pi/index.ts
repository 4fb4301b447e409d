// crew for pi: a `team` tool with pi-crew's action names and params, run by crewd instead of
// inside pi. A pi-crew user swaps the extension and keeps their habits and their agent, team
// and workflow files (crewd loads pi-crew's formats and `~/.pi/agent/{agents,teams,workflows}`).
//
// pi loads this file with jiti, so it is TypeScript without a build step; its only imports are
// what pi provides and Node's standard library.

import { StringEnum, Type } from "@mariozechner/pi-ai";
import { defineTool, type ExtensionAPI } from "@mariozechner/pi-coding-agent";
import path from "node:path";
import type { RunParams, RunStatus, StatusResult } from "../../proto-docs/crew-api.d.ts";
import { CrewError, call } from "./crewd.ts";

const ACTIONS = [
	"run",
	"plan",
	"status",
	"list",
	"get",
	"wait",
	"cancel",
	"resume",
	"retry",
	"steer",
	"respond",
	"events",
	"artifacts",
	"summary",
	"forget",
	"prune",
] as const;
type Action = (typeof ACTIONS)[number];

/** What the model is shown of a report at most (head and tail kept). */
const TEXT_CHARS = 12_000;
/** One `team.wait` call at most, so pi hears progress and an abort is noticed. */
const WAIT_SLICE_MS = 15_000;
/** pi-crew's default for `wait` (config.timeoutMs), clamped to 1 s – 1 h as it did. */
const WAIT_DEFAULT_MS = 300_000;
/** `run` and `resume` block until the run stops, for at most an hour (pi-crew's waitForRun). */
const RUN_WAIT_MS = 3_600_000;

const parameters = Type.Object({
	action: Type.Optional(
		StringEnum(ACTIONS, { description: "What to do (default: list)." }),
	),
	goal: Type.Optional(Type.String({ description: "run/plan: what the team should achieve." })),
	task: Type.Optional(Type.String({ description: "Same as goal." })),
	team: Type.Optional(
		Type.String({ description: "run/plan: the team (default: default); get: a team's name." }),
	),
	workflow: Type.Optional(
		Type.String({ description: "run/plan: the workflow (default: the team's); get: a workflow's name." }),
	),
	agent: Type.Optional(Type.String({ description: "get: an agent's name." })),
	model: Type.Optional(Type.String({ description: "run: model for every task, e.g. provider/model." })),
	runtime: Type.Optional(
		Type.String({ description: "run: crewd runtime (pi, claude, codex, fake, …; default: crewd's)." }),
	),
	cwd: Type.Optional(Type.String({ description: "Project directory (default: pi's)." })),
	runId: Type.Optional(Type.String({ description: "The run of status, wait, cancel, resume, …" })),
	taskId: Type.Optional(Type.String({ description: "steer/respond/retry: the task." })),
	message: Type.Optional(Type.String({ description: "steer/respond: the message or answer." })),
	resource: Type.Optional(
		StringEnum(["agent", "team", "workflow", "skill"] as const, { description: "list: only this kind." }),
	),
	async: Type.Optional(
		Type.Boolean({ description: "run/resume: return at once instead of waiting for the run to stop." }),
	),
	budgetTotal: Type.Optional(Type.Integer({ minimum: 1, description: "run: token budget." })),
	budgetWarning: Type.Optional(Type.Number({ description: "run: warn at this fraction (default 0.8)." })),
	budgetAbort: Type.Optional(Type.Number({ description: "run: stop at this fraction (default 1.0)." })),
	keep: Type.Optional(Type.Integer({ minimum: 0, description: "prune: finished runs to keep (default 20)." })),
	confirm: Type.Optional(Type.Boolean({ description: "forget/prune: must be true." })),
	details: Type.Optional(Type.Boolean({ description: "status: per-task lines (default true)." })),
	config: Type.Optional(
		Type.Object(
			{
				timeoutMs: Type.Optional(Type.Integer({ description: "wait: give up after this long (default 300000)." })),
				reason: Type.Optional(Type.String({ description: "cancel: why." })),
				runtime: Type.Optional(Type.String({ description: "run: crewd runtime." })),
			},
			{ additionalProperties: true },
		),
	),
});

type Params = {
	action?: Action;
	goal?: string;
	task?: string;
	team?: string;
	workflow?: string;
	agent?: string;
	model?: string;
	runtime?: string;
	cwd?: string;
	runId?: string;
	taskId?: string;
	message?: string;
	resource?: "agent" | "team" | "workflow" | "skill";
	async?: boolean;
	budgetTotal?: number;
	budgetWarning?: number;
	budgetAbort?: number;
	keep?: number;
	confirm?: boolean;
	details?: boolean;
	config?: { timeoutMs?: number; reason?: string; runtime?: string; [k: string]: unknown };
};

type Details = {
	action: Action;
	status: "ok" | "error" | "planned";
	runId?: string;
	metrics?: { taskCount: number; completedCount: number; totalTokens: number; totalCost: number; durationMs?: number };
};

type Reply = { content: { type: "text"; text: string }[]; details: Details };
type Update = ((r: Reply) => void) | undefined;

function cut(s: string, max = TEXT_CHARS): string {
	if (s.length <= max) return s;
	const marker = `\n[… ${s.length - max} characters cut …]\n`;
	const keep = Math.max(0, max - marker.length);
	return s.slice(0, Math.ceil(keep / 2)) + marker + s.slice(s.length - Math.floor(keep / 2));
}

function reply(action: Action, text: string, extra: Partial<Details> = {}): Reply {
	return { content: [{ type: "text", text }], details: { action, status: "ok", ...extra } };
}

function need<T>(value: T | undefined, name: string, action: Action): T {
	if (value === undefined || value === "") throw new Error(`team ${action}: \`${name}\` is required`);
	return value;
}

function metrics(s: StatusResult): Details["metrics"] {
	const u = s.run.usage;
	return {
		taskCount: s.tasks.length,
		completedCount: s.tasks.filter((t) => t.status === "completed").length,
		totalTokens: u.input + u.output + u.cacheWrite,
		totalCost: u.cost,
		durationMs: s.run.durationMs ?? undefined,
	};
}

const MARK: Record<string, string> = {
	completed: "✓",
	failed: "✗",
	cancelled: "⊘",
	skipped: "⊘",
	waiting: "?",
	needs_attention: "!",
	running: "…",
	queued: "·",
};

function statusText(s: StatusResult, details = true): string {
	const r = s.run;
	const done = s.tasks.filter((t) => ["completed", "failed", "cancelled", "skipped"].includes(t.status)).length;
	const lines = [
		`Run ${r.id}: ${r.status}${r.reason ? ` (${r.reason})` : ""}`,
		`Team ${r.team} / workflow ${r.workflow} on runtime ${r.runtime}; ${done}/${s.tasks.length} tasks done`,
		`Goal: ${r.goal.split("\n")[0]}`,
		`Usage: ${r.usage.input} input, ${r.usage.output} output tokens; $${r.usage.cost.toFixed(4)}`,
	];
	if (details) {
		for (const t of s.tasks.slice(0, 100)) {
			let line = `${MARK[t.status] ?? "-"} ${t.id} [${t.role}] ${t.status}`;
			if (t.attempts > 1) line += ` (attempt ${t.attempts})`;
			if (t.status === "waiting" && t.question) line += `: asks ${t.question}`;
			else if (t.error && t.status !== "completed") line += `: ${t.error.split("\n")[0]}`;
			const result = t.artifacts.find((a) => a.kind === "result");
			if (result) line += ` → ${result.name}`;
			lines.push(line);
		}
		if (s.tasks.length > 100) lines.push(`… ${s.tasks.length - 100} more tasks`);
	}
	return lines.join("\n");
}

/** What the lead can do next with a run in this state, in this tool's terms. */
function nextStep(s: StatusResult): string {
	const waiting = s.tasks.find((t) => t.status === "waiting");
	if (waiting) return `\nTask ${waiting.id} asks: ${waiting.question ?? "(no question)"}. Answer with team action "respond", runId "${s.run.id}", taskId "${waiting.id}", message.`;
	if (s.run.status === "blocked" && s.run.approval === "pending") return `\nThe run waits for plan approval (crewctl approve ${s.run.id}).`;
	if (["blocked", "failed", "cancelled"].includes(s.run.status)) return `\nContinue it with team action "resume", runId "${s.run.id}".`;
	return "";
}

/** Waits until the run stops or `totalMs` passes, telling pi how far it got between slices. */
async function waitFor(runId: string, totalMs: number, onUpdate: Update, action: Action, signal?: AbortSignal): Promise<RunStatus> {
	const deadline = Date.now() + totalMs;
	for (;;) {
		const left = deadline - Date.now();
		const w = await call("team.wait", { runId, timeoutMs: Math.max(1, Math.min(WAIT_SLICE_MS, left)) }, { signal });
		if (w.finished || left <= WAIT_SLICE_MS) return w.status;
		const s = await call("team.status", { runId }, { signal });
		onUpdate?.(reply(action, statusText(s, false), { runId, metrics: metrics(s) }));
	}
}

/** The run's report (`team.summary`: per-task status, failures, questions, result excerpts). */
async function finalReply(action: Action, runId: string, signal?: AbortSignal): Promise<Reply> {
	const s = await call("team.status", { runId }, { signal });
	const summary = await call("team.summary", { runId }, { signal });
	const text = cut(summary.markdown) + nextStep(s);
	// pi-crew answered with an error when the run failed or blocked; so does this tool.
	if (s.run.status === "failed" || s.run.status === "blocked") throw new Error(text);
	return reply(action, text, { runId, metrics: metrics(s) });
}

async function run(p: Params, cwd: string, onUpdate: Update, signal?: AbortSignal): Promise<Reply> {
	const goal = need(p.goal ?? p.task, "goal", "run");
	const runtime = p.runtime ?? p.config?.runtime;
	const params: RunParams = {
		goal,
		cwd,
		team: p.team ?? null,
		workflow: p.workflow ?? null,
		model: p.model ?? null,
		runtime: runtime ?? null,
	};
	if (p.budgetTotal !== undefined) {
		params.budget = { tokens: p.budgetTotal, warnAt: p.budgetWarning ?? null, abortAt: p.budgetAbort ?? null };
	}
	const started = await call("team.run", params, { signal });
	const runId = started.runId;
	if (p.async) {
		const tasks = started.tasks.map((t) => `- ${t.id} [${t.role}]${t.dependsOn.length ? ` after ${t.dependsOn.join(", ")}` : ""}`);
		return reply("run", [`Started crew run ${runId} (${started.status}):`, ...tasks, ...started.notes.map((n) => `Note: ${n}`), `Follow it with team action "wait" or "status", runId "${runId}".`].join("\n"), { runId });
	}
	onUpdate?.(reply("run", `Started crew run ${runId} with ${started.tasks.length} tasks; waiting…`, { runId }));
	await waitFor(runId, RUN_WAIT_MS, onUpdate, "run", signal);
	return finalReply("run", runId, signal);
}

async function dispatch(p: Params, ctxCwd: string, onUpdate: Update, signal?: AbortSignal): Promise<Reply> {
	const action: Action = p.action ?? "list";
	const cwd = path.resolve(ctxCwd, p.cwd ?? ".");
	const runId = () => need(p.runId, "runId", action);
	switch (action) {
		case "run":
			return run(p, cwd, onUpdate, signal);
		case "plan": {
			const goal = need(p.goal ?? p.task, "goal", action);
			const plan = await call("team.plan", { goal, cwd, team: p.team ?? null, workflow: p.workflow ?? null, runtime: p.runtime ?? p.config?.runtime ?? null }, { signal });
			const lines = plan.tasks.map((t, i) => `${i + 1}. ${t.stepId} [${t.role}]${t.dependsOn.length ? ` after ${t.dependsOn.join(", ")}` : ""}`);
			const diags = plan.diagnostics.map((d) => `! ${d.path}${d.line ? `:${d.line}` : ""}: ${d.message}`);
			return { ...reply(action, [`Team ${plan.team} / workflow ${plan.workflow} on ${plan.runtime}:`, ...lines, ...diags].join("\n")), details: { action, status: "planned" } };
		}
		case "status": {
			const s = await call("team.status", { runId: runId() }, { signal });
			return reply(action, statusText(s, p.details ?? true) + nextStep(s), { runId: s.run.id, metrics: metrics(s) });
		}
		case "list": {
			const r = await call("resource.list", { cwd, kind: p.resource ?? null }, { signal });
			const lines: string[] = [];
			const section = (title: string, entries: { name: string; source: string; description: string }[]) => {
				if (!entries.length) return;
				lines.push(`${title}:`);
				for (const e of entries) lines.push(`- ${e.name} (${e.source}): ${e.description.split("\n")[0]}`);
			};
			section("Teams", r.teams);
			section("Workflows", r.workflows);
			section("Agents", r.agents);
			section("Skills", r.skills);
			if (!p.resource) {
				const runs = await call("team.list", { limit: 10 }, { signal });
				if (runs.runs.length) {
					lines.push("Recent runs:");
					for (const x of runs.runs) lines.push(`- ${x.id} [${x.status}] ${x.team}/${x.workflow}: ${x.goal.split("\n")[0].slice(0, 120)}`);
				}
			}
			for (const d of r.diagnostics) lines.push(`! ${d.path}${d.line ? `:${d.line}` : ""}: ${d.message}`);
			return reply(action, lines.join("\n") || "No resources.");
		}
		case "get": {
			const [kind, name] = p.team ? (["team", p.team] as const) : p.workflow ? (["workflow", p.workflow] as const) : (["agent", need(p.agent, "team, workflow or agent", action)] as const);
			const r = await call("resource.get", { kind, name, cwd }, { signal });
			return reply(action, cut(`${kind} ${name}:\n${JSON.stringify(r.resource, null, 2)}`));
		}
		case "wait": {
			const id = runId();
			const ms = Math.min(3_600_000, Math.max(1_000, p.config?.timeoutMs ?? WAIT_DEFAULT_MS));
			await waitFor(id, ms, onUpdate, action, signal);
			const s = await call("team.status", { runId: id }, { signal });
			if (s.run.status === "queued" || s.run.status === "running") {
				return reply(action, `Still ${s.run.status} after ${ms} ms.\n${statusText(s)}`, { runId: id, metrics: metrics(s) });
			}
			const summary = await call("team.summary", { runId: id }, { signal });
			return reply(action, cut(summary.markdown) + nextStep(s), { runId: id, metrics: metrics(s) });
		}
		case "cancel": {
			const r = await call("team.cancel", { runId: runId(), reason: p.config?.reason ?? null }, { signal });
			return reply(action, `Run ${p.runId}: ${r.status}; cancelled ${r.cancelledTaskIds.join(", ") || "no tasks"}.`, { runId: p.runId });
		}
		case "resume": {
			const id = runId();
			const r = await call("team.resume", { runId: id }, { signal });
			if (p.async) return reply(action, `Run ${id}: ${r.status}; queued again: ${r.requeuedTaskIds.join(", ") || "none"}.`, { runId: id });
			await waitFor(id, RUN_WAIT_MS, onUpdate, action, signal);
			return finalReply(action, id, signal);
		}
		case "retry": {
			const id = runId();
			let taskIds = p.taskId ? [p.taskId] : [];
			if (!taskIds.length) {
				const s = await call("team.status", { runId: id }, { signal });
				taskIds = s.tasks.filter((t) => t.status === "failed" || t.status === "cancelled").map((t) => t.id);
			}
			if (!taskIds.length) return reply(action, `Run ${id} has no failed or cancelled task to retry.`, { runId: id });
			const r = await call("team.retry", { runId: id, taskIds }, { signal });
			return reply(action, `Queued again: ${r.requeuedTaskIds.join(", ")}.`, { runId: id });
		}
		case "steer": {
			const r = await call("team.steer", { runId: runId(), taskId: need(p.taskId, "taskId", action), message: need(p.message, "message", action) }, { signal });
			const queued = r.note ? `Queued for ${p.taskId}'s next attempt: ${r.note}.` : `Queued for ${p.taskId}: it gets it when it starts.`;
			return reply(action, r.delivered === "live" ? `Delivered live to ${p.taskId}.` : queued, { runId: p.runId });
		}
		case "respond": {
			const r = await call("team.respond", { runId: runId(), taskId: need(p.taskId, "taskId", action), message: need(p.message, "message", action) }, { signal });
			return reply(action, `Answered ${p.taskId}; it is ${r.status}. Follow the run with team action "wait".`, { runId: p.runId });
		}
		case "events": {
			const r = await call("team.events", { runId: runId(), limit: 500 }, { signal });
			const lines = r.events.map((e) => `${e.time} ${e.type}${e.taskId ? ` ${e.taskId}` : ""}${e.message ? `: ${e.message}` : ""}`);
			return reply(action, cut(lines.join("\n") || "No events."), { runId: p.runId });
		}
		case "artifacts": {
			const r = await call("team.artifacts", { runId: runId() }, { signal });
			return reply(action, r.artifacts.map((a) => `- ${a.kind}: ${a.name} (${a.bytes}) sha256=${a.sha256.slice(0, 12)}`).join("\n") || "No artifacts.", { runId: p.runId });
		}
		case "summary": {
			const r = await call("team.summary", { runId: runId() }, { signal });
			return reply(action, cut(r.markdown), { runId: p.runId });
		}
		case "forget": {
			const id = runId();
			if (p.confirm !== true) throw new Error(`team forget removes run ${id} and its artifacts: pass confirm: true`);
			await call("team.forget", { runId: id }, { signal });
			return reply(action, `Forgot run ${id}.`, { runId: id });
		}
		case "prune": {
			if (p.confirm !== true) throw new Error("team prune removes old finished runs: pass confirm: true");
			const r = await call("team.prune", { keep: p.keep ?? null }, { signal });
			return reply(action, `Removed ${r.removed.length} run(s), kept ${r.kept}.${r.removed.length ? `\n${r.removed.join("\n")}` : ""}`);
		}
	}
}

export const teamTool = defineTool({
	name: "team",
	label: "Team",
	description:
		"Delegate work to a crew team of coding agents run by the crewd daemon, and control its runs. " +
		'action "run" (goal, team, workflow, model, runtime, budgetTotal; waits until the run stops unless async) returns the run\'s report; ' +
		'"plan" shows the tasks without running; "list" shows teams, workflows, agents and recent runs; "get" one team/workflow/agent; ' +
		'"status", "wait", "summary", "events", "artifacts" follow a run (runId); "cancel", "resume", "retry", "steer", "respond" (taskId, message) control it; ' +
		'"forget" and "prune" remove runs (confirm: true).',
	promptSnippet: "Delegate a goal to a crew team of agents (explore, plan, execute, verify) and read back its report",
	promptGuidelines: [
		'Use the team tool with action "run" to hand a multi-step coding goal to a crew team; it returns the team\'s report when the run stops.',
	],
	parameters,
	async execute(_toolCallId, params, signal, onUpdate, ctx) {
		try {
			return await dispatch(params as Params, ctx.cwd, onUpdate as Update, signal);
		} catch (e) {
			// A tool error is what pi shows the model; keep the API's message and code.
			if (e instanceof CrewError) throw new Error(e.code === null ? e.message : `${e.message} (crewd error ${e.code})`);
			throw e;
		}
	},
});

export default function crew(pi: ExtensionAPI) {
	pi.registerTool(teamTool);
}
