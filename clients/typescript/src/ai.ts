/**
 * A Vercel AI SDK tool behind a breakpoint (`breakpoint-manager/ai`; `ai` is an optional
 * peer dependency).
 *
 * When the model calls the tool, a person decides first: the tool's input schema becomes
 * the breakpoint's form and the model's input its proposal, so the reviewer approves the
 * call as it is, edits it, or rejects it with a comment. Approved values run the tool (only
 * once the signed receipt verifies for exactly those values); anything else returns to the
 * model, as the tool's result, what the reviewer said. The idempotency key is the tool
 * call's id, so a run that restarts with the same messages finds its breakpoint, and the
 * decision made meanwhile, instead of asking again.
 */
import { asSchema, tool, type FlexibleSchema, type Tool, type ToolExecutionOptions } from "ai";

import type { Client } from "./client.js";
import { ReceiptInvalid } from "./errors.js";
import type { Breakpoint, CreateBody, Decision } from "./types.js";

/** The breakpoint's fields besides its question, form and proposal. */
export type BreakpointExtras = Partial<Omit<CreateBody, "payload">> & { payload?: Record<string, unknown> };

export interface ApprovalToolOptions<INPUT, OUTPUT> {
  /** The client that opens and waits on the breakpoints (an agent's token). */
  client: Client;
  /** The tool's name as given in `tools` (its breakpoint key is `breakpointKey(name)`). */
  name: string;
  description?: string;
  /** The tool's input: the model's arguments and the reviewer's form. */
  inputSchema: FlexibleSchema<INPUT>;
  /** Runs with the approved values (the model's input, or the reviewer's edit of it). */
  execute: (input: INPUT, options: ToolExecutionOptions) => PromiseLike<OUTPUT> | OUTPUT;
  /** What the reviewer is asked (default: "Run <name>?"). */
  question?: string | ((input: INPUT) => string);
  /** More of the breakpoint: title, tags, ttlSeconds, runId, payload keys (expert,
   * context...), fixed or from the input. */
  breakpoint?: BreakpointExtras | ((input: INPUT) => BreakpointExtras);
  /** The tool's result for the model when the call is not approved (default: a sentence
   * with the decision and the reviewer's comment). */
  onRejected?: (decision: Decision) => OUTPUT | string;
  /** Hears of each breakpoint once it exists (to show its consoleUrl, say). */
  onBreakpoint?: (breakpoint: Breakpoint, toolCallId: string) => void;
}

/** The breakpoint key of a tool's calls: `ai-sdk.` and its name in kebab-case (a key is
 * dotted kebab-case: `getWeather` and `get_weather` are `ai-sdk.get-weather`). */
export function breakpointKey(toolName: string): string {
  const words = toolName
    .replace(/([a-z0-9])([A-Z])/g, "$1-$2")
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "");
  return `ai-sdk.${words || "tool"}`;
}

/** A tool whose every call waits for a person's approval through Breakpoint Manager. */
export function approvalTool<INPUT extends Record<string, unknown>, OUTPUT>(
  options: ApprovalToolOptions<INPUT, OUTPUT>,
): Tool<INPUT, OUTPUT | string> {
  const schema = asSchema(options.inputSchema);
  const execute = async (input: INPUT, call: ToolExecutionOptions): Promise<OUTPUT | string> => {
    const extras = typeof options.breakpoint === "function" ? options.breakpoint(input) : (options.breakpoint ?? {});
    const question = typeof options.question === "function" ? options.question(input) : options.question;
    const body: CreateBody = {
      ...extras,
      payload: {
        ...extras.payload,
        question: question ?? `Run ${options.name}?`,
        breakpointId: breakpointKey(options.name),
        form: (await schema.jsonSchema) as Record<string, unknown>,
        proposal: input,
      },
    };
    const decision = await options.client.ask(body, {
      idempotencyKey: `ai-sdk.${options.name}.${call.toolCallId}`,
      signal: call.abortSignal,
      onCreated: (breakpoint) => options.onBreakpoint?.(breakpoint, call.toolCallId),
    });
    if (!decision.approved) return (options.onRejected ?? describeRefusal)(decision);
    if (decision.verified !== true) {
      throw new ReceiptInvalid(
        `the approval of ${options.name} (${decision.breakpointId}) has no receipt that verifies: not running it`,
      );
    }
    return options.execute(await approvedInput(schema, decision, input), call);
  };
  const definition = { description: options.description, inputSchema: options.inputSchema, execute };
  // Tool's conditional types cannot be resolved for a generic OUTPUT: it is this shape.
  return tool(definition as unknown as Tool<INPUT, OUTPUT | string>);
}

/** The values the reviewer approved (else the input as proposed), parsed by the schema. */
async function approvedInput<INPUT>(
  schema: ReturnType<typeof asSchema<INPUT>>,
  decision: Decision,
  input: INPUT,
): Promise<INPUT> {
  const values = decision.values ?? input;
  if (!schema.validate) return values as INPUT;
  const parsed = await schema.validate(values);
  if (!parsed.success) {
    throw new Error(`the approved values do not fit the tool's input schema: ${parsed.error.message}`);
  }
  return parsed.value;
}

/** What the model reads when its call was not approved. */
export function describeRefusal(decision: Decision): string {
  const comment = decision.feedback ? `: ${decision.feedback}` : "";
  if (decision.status === "expired") return `Not run: no one approved this call in time${comment}`;
  if (decision.status === "cancelled") return `Not run: the approval request was cancelled${comment}`;
  const who = typeof decision.respondedBy === "string" ? decision.respondedBy : "the reviewer";
  return `Not run: ${who} rejected this call${comment}`;
}
