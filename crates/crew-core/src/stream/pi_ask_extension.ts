// crew's pi extension: the `ask_user` tool. crew writes this file into the run directory and
// starts pi with `--extension` on it. The call itself is the question: crew reads it from pi's
// `tool_execution_start` event, ends the worker and marks the task waiting; the user's answer
// comes back as the next prompt of this same session (`--session FILE`).
import { Type } from "typebox";

export default function (pi: any) {
	pi.registerTool({
		name: "ask_user",
		label: "Ask the user",
		description:
			"Ask the user a question when you cannot go on without their decision or information. " +
			"The question goes to the user; their answer arrives as your next message. " +
			"End your turn right after calling this tool.",
		promptSnippet: "Ask the user a question; their answer arrives as the next message",
		promptGuidelines: [
			"Use ask_user only when the task cannot go on without the user's decision or information.",
			"After calling ask_user, do not emit another assistant response in the same turn.",
		],
		parameters: Type.Object({
			question: Type.String({ description: "The question for the user, self-contained" }),
		}),
		async execute(_toolCallId: string, params: { question: string }) {
			return {
				content: [
					{
						type: "text",
						text:
							"Your question went to the user: \"" +
							params.question +
							"\". End your turn now; their answer will arrive as the next message.",
					},
				],
				details: {},
				// No follow-up model call: the agent's turn ends on the question.
				terminate: true,
			};
		},
	});
}
