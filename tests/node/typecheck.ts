// Compiled by `tsc --noEmit` in client.test.mjs: what an extension written in TypeScript does
// with proto-docs/crew-api.d.ts. Every `@ts-expect-error` is a misuse the types must reject (tsc
// fails if one of them compiles), so loosening a type to `any` or `unknown` breaks this file.

import type {
  Event,
  ItemOf,
  MethodName,
  Methods,
  ParamsOf,
  ResultOf,
  RunStatus,
  SubscriptionItem,
  SubscriptionName,
  Subscriptions,
  TaskStatus,
} from "../../proto-docs/crew-api.js";

/** The typed face an extension puts on crew-client.mjs. */
interface TypedClient {
  call<M extends MethodName>(method: M, params: ParamsOf<M>): Promise<ResultOf<M>>;
  subscribe<S extends SubscriptionName>(
    method: S,
    params: ParamsOf<S>,
  ): Promise<AsyncIterable<ItemOf<S>> & { close(): Promise<void> }>;
}

function isEvent(item: SubscriptionItem): item is Event {
  return !("notice" in item);
}

function icon(status: TaskStatus): string {
  switch (status) {
    case "completed":
      return "✓";
    case "failed":
      return "✗";
    case "running":
      return "▶";
    case "queued":
    case "waiting":
    case "cancelled":
    case "skipped":
    case "needs_attention":
      return "·";
  }
}

export async function runFromEditor(client: TypedClient, cwd: string): Promise<RunStatus> {
  const listed = await client.call("resource.list", { kind: "team", cwd });
  const team: string | undefined = listed.teams.find((t) => t.source === "builtin")?.name;

  const started = await client.call("team.run", {
    goal: "Add a --verbose flag",
    cwd,
    runtime: "fake",
    budget: { tokens: 100_000, warnAt: 0.8 },
    failurePolicy: "fail-fast",
    ...(team === undefined ? {} : { team }),
  });
  const runId: string = started.runId;

  const sub = await client.subscribe("team.subscribe", { runId, afterSeq: 0 });
  for await (const item of sub) {
    if (!isEvent(item)) {
      // A dropped subscriber resubscribes from where it was.
      const resumeAfter: number = item.lastSeq;
      void resumeAfter;
      break;
    }
    const seq: number = item.seq;
    void seq;
    if (item.type === "run.completed" || item.type === "run.failed" || item.type === "run.cancelled") break;
  }
  await sub.close();

  const status = await client.call("team.status", { runId });
  const lines: string[] = status.tasks.map((t) => `${icon(t.status)} ${t.id} ${t.usage.input + t.usage.output}`);
  void lines;
  const waited = await client.call("team.wait", { runId, timeoutMs: 1000 });
  const finished: boolean = waited.finished;
  void finished;
  const cancelled = await client.call("team.cancel", { runId, reason: "user pressed stop" });
  const ids: string[] = cancelled.cancelledTaskIds;
  void ids;
  await client.call("daemon.ping", {});
  return status.run.status;
}

export async function misuse(client: TypedClient): Promise<void> {
  // @ts-expect-error unknown method
  await client.call("team.launch", {});
  // @ts-expect-error runId is required
  await client.call("team.status", {});
  // @ts-expect-error goal must be a string
  await client.call("team.run", { goal: 42, cwd: "/" });
  // @ts-expect-error not a resource kind
  await client.call("resource.list", { kind: "teams" });
  // @ts-expect-error methods without params take none
  await client.call("daemon.ping", { verbose: true });
  const s = await client.call("team.status", { runId: "r" });
  // @ts-expect-error not a run status
  const bad: RunStatus = "done";
  void bad;
  // @ts-expect-error the run's status is not a number
  const n: number = s.run.status;
  void n;
  // @ts-expect-error a plain call is no subscription
  await client.subscribe("team.status", { runId: "r" });
}

// The notification each subscription arrives as is part of the contract.
const notification: Subscriptions["team.subscribe"]["notification"] = "team.event";
void notification;
type Unsubscribe = Methods["team.unsubscribe"]["params"];
const unsubscribeParams: Unsubscribe = [1];
void unsubscribeParams;
