// crewd's JSON-RPC API over its Unix socket (HTTP POST, one call per request), typed by the
// generated proto-docs/crew-api.d.ts. Node's standard library only: pi loads this file as it is.

import http from "node:http";
import os from "node:os";
import path from "node:path";
import type { MethodName, ParamsOf, ResultOf, RpcErrorObject } from "../../proto-docs/crew-api.d.ts";

/** `CREW_SOCKET`, else `$XDG_RUNTIME_DIR/crew/crewd.sock`, else `/tmp/crew-$UID/crewd.sock` (crewctl's order). */
export function socketPath(env: NodeJS.ProcessEnv = process.env): string {
	if (env.CREW_SOCKET) return env.CREW_SOCKET;
	if (env.XDG_RUNTIME_DIR) return path.join(env.XDG_RUNTIME_DIR, "crew", "crewd.sock");
	return path.join("/tmp", `crew-${os.userInfo().uid}`, "crewd.sock");
}

/** The daemon answered with an error object: its code, message and data, as the API gives them. */
export class CrewError extends Error {
	code: number | null;
	data: unknown;
	constructor(message: string, code: number | null, data?: unknown) {
		super(message);
		this.name = "CrewError";
		this.code = code;
		this.data = data;
	}
}

/** Replies above this are refused rather than buffered without bound (an export is the largest). */
const MAX_REPLY_BYTES = 64 * 1024 * 1024;

export async function call<M extends MethodName>(
	method: M,
	params: ParamsOf<M>,
	opts: { socket?: string; signal?: AbortSignal } = {},
): Promise<ResultOf<M>> {
	const socket = opts.socket ?? socketPath();
	const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method, params });
	const text = await new Promise<string>((resolve, reject) => {
		const req = http.request(
			{
				socketPath: socket,
				path: "/",
				method: "POST",
				headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) },
				signal: opts.signal,
			},
			(res) => {
				const chunks: Buffer[] = [];
				let size = 0;
				res.on("data", (c: Buffer) => {
					size += c.length;
					if (size > MAX_REPLY_BYTES) {
						req.destroy(new CrewError(`reply of ${method} is larger than ${MAX_REPLY_BYTES} bytes`, null));
						return;
					}
					chunks.push(c);
				});
				res.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
				res.on("error", reject);
			},
		);
		req.on("error", (e: NodeJS.ErrnoException) => {
			if (e.code === "ENOENT" || e.code === "ECONNREFUSED") {
				reject(
					new CrewError(
						`crewd is not running (no answer on ${socket}). Start it with \`crewd &\` or \`systemctl --user start crewd\`.`,
						null,
					),
				);
			} else reject(e);
		});
		req.end(body);
	});
	let msg: { result?: unknown; error?: RpcErrorObject };
	try {
		msg = JSON.parse(text);
	} catch {
		throw new CrewError(`crewd sent a reply that is not JSON: ${text.slice(0, 200)}`, null);
	}
	if (msg.error) throw new CrewError(String(msg.error.message), msg.error.code ?? null, msg.error.data);
	return msg.result as ResultOf<M>;
}
