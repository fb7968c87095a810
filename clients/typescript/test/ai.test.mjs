// breakpoint-manager/ai: an AI SDK tool behind a breakpoint, driven by the AI SDK's own mock
// language model (no network, no LLM) against a live Breakpoint Manager (BPM_URL,
// BPM_TOKEN), a reviewer (BPM_REVIEWER_TOKEN, user BPM_REVIEWER_NAME) deciding.
// tests/live/clients/test_typescript_sdk.py runs it on the build output.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { describe, test } from "node:test";

import { generateText, stepCountIs } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { z } from "zod";

import { Client, valuesDigest } from "../dist/index.js";
import { approvalTool, breakpointKey } from "../dist/ai.js";

const live = Boolean(process.env.BPM_URL && process.env.BPM_TOKEN && process.env.BPM_REVIEWER_TOKEN);
const SAFETY_MS = 60_000; // a bound on a hanging run, never an assertion

const USAGE = {
  inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 5, text: 5, reasoning: undefined },
};

/** A model that calls `deploy` with `input` (as call `toolCallId`), then answers `reply`. */
function scriptedModel(toolCallId, input, reply = "done") {
  return new MockLanguageModelV3({
    doGenerate: [
      {
        content: [{ type: "tool-call", toolCallId, toolName: "deploy", input: JSON.stringify(input) }],
        finishReason: { unified: "tool-calls", raw: "tool_calls" },
        usage: USAGE,
        warnings: [],
      },
      {
        content: [{ type: "text", text: reply }],
        finishReason: { unified: "stop", raw: "stop" },
        usage: USAGE,
        warnings: [],
      },
    ],
  });
}

/** The deploy tool behind a breakpoint; `runs` records every input it ran with, `decide`
 * hears of each breakpoint. */
function deployTool(decide) {
  const runs = [];
  const deploy = approvalTool({
    client: new Client(),
    name: "deploy",
    description: "Deploy a service",
    inputSchema: z.object({ service: z.string(), replicas: z.number().int().min(1).max(10) }),
    question: (input) => `Deploy ${input.service} with ${input.replicas} replicas?`,
    breakpoint: { tags: ["ai-sdk"] },
    execute: async (input) => {
      runs.push(input);
      return { deployed: input.service, replicas: input.replicas };
    },
    onBreakpoint: decide,
  });
  return { deploy, runs };
}

/** The tool message the model was sent on its second call. */
function toolResultSentBack(model) {
  const message = model.doGenerateCalls[1].prompt.find((m) => m.role === "tool");
  return message.content.find((part) => part.type === "tool-result").output;
}

test("tool names become breakpoint keys in dotted kebab-case", () => {
  assert.equal(breakpointKey("deploy"), "ai-sdk.deploy");
  assert.equal(breakpointKey("getWeather"), "ai-sdk.get-weather");
  assert.equal(breakpointKey("get_weather_v2"), "ai-sdk.get-weather-v2");
  assert.equal(breakpointKey("__"), "ai-sdk.tool");
});

describe("breakpoint-manager/ai against a live service", { skip: !live && "BPM_URL, BPM_TOKEN, BPM_REVIEWER_TOKEN unset" }, () => {
  test("an approved tool call runs with the values the reviewer edited", async () => {
    const reviewer = new Client({ token: process.env.BPM_REVIEWER_TOKEN });
    const decisions = [];
    const { deploy, runs } = deployTool((breakpoint) => {
      assert.deepEqual(breakpoint.payload.proposal, { service: "web", replicas: 3 });
      assert.equal(breakpoint.payload.form.type, "object");
      assert.equal(breakpoint.key, "ai-sdk.deploy");
      decisions.push(reviewer.release(breakpoint.breakpointId, { comment: "two is enough", values: { service: "web", replicas: 2 } }));
    });
    const model = scriptedModel(`call-${randomUUID()}`, { service: "web", replicas: 3 });
    const result = await generateText({
      model,
      tools: { deploy },
      prompt: "Deploy web",
      stopWhen: stepCountIs(2),
      abortSignal: AbortSignal.timeout(SAFETY_MS),
    });
    await Promise.all(decisions);
    assert.deepEqual(runs, [{ service: "web", replicas: 2 }]);
    assert.deepEqual(result.steps[0].toolResults[0].output, { deployed: "web", replicas: 2 });
    assert.deepEqual(toolResultSentBack(model), { type: "json", value: { deployed: "web", replicas: 2 } });
    assert.equal(result.text, "done");
  });

  test("a rejected tool call does not run and returns the reviewer's comment to the model", async () => {
    const reviewer = new Client({ token: process.env.BPM_REVIEWER_TOKEN });
    const decisions = [];
    const { deploy, runs } = deployTool((breakpoint) => {
      decisions.push(reviewer.release(breakpoint.breakpointId, { approved: false, comment: "Not on a Friday" }));
    });
    const model = scriptedModel(`call-${randomUUID()}`, { service: "db", replicas: 1 });
    const result = await generateText({
      model,
      tools: { deploy },
      prompt: "Deploy db",
      stopWhen: stepCountIs(2),
      abortSignal: AbortSignal.timeout(SAFETY_MS),
    });
    await Promise.all(decisions);
    assert.deepEqual(runs, []);
    const expected = `Not run: ${process.env.BPM_REVIEWER_NAME} rejected this call: Not on a Friday`;
    assert.equal(result.steps[0].toolResults[0].output, expected);
    assert.deepEqual(toolResultSentBack(model), { type: "text", value: expected });
  });

  test("a run restarted with the same tool call id finds its breakpoint and the decision made meanwhile", async () => {
    const toolCallId = `call-${randomUUID()}`;
    const input = { service: "api", replicas: 4 };
    const seen = [];
    // The first run stops (its process dies, say) while the call waits for a person.
    const stop = new AbortController();
    const first = deployTool((breakpoint) => {
      seen.push(breakpoint);
      stop.abort(new Error("the process stopped"));
    });
    const stopped = await generateText({
      model: scriptedModel(toolCallId, input),
      tools: { deploy: first.deploy },
      prompt: "Deploy api",
      stopWhen: stepCountIs(2),
      abortSignal: stop.signal,
    }).then(
      () => "finished",
      (error) => error.message,
    );
    assert.equal(stopped, "the process stopped");
    assert.deepEqual(first.runs, []);
    assert.equal((await new Client().status(seen[0].breakpointId)).status, "waiting");
    const reviewer = new Client({ token: process.env.BPM_REVIEWER_TOKEN });
    await reviewer.release(seen[0].breakpointId, { comment: "go" });

    // The restarted run replays the same tool call: no second breakpoint, the approval runs it.
    const second = deployTool((breakpoint) => seen.push(breakpoint));
    const result = await generateText({
      model: scriptedModel(toolCallId, input),
      tools: { deploy: second.deploy },
      prompt: "Deploy api",
      stopWhen: stepCountIs(2),
      abortSignal: AbortSignal.timeout(SAFETY_MS),
    });
    assert.equal(seen.length, 2);
    assert.equal(seen[1].breakpointId, seen[0].breakpointId);
    assert.equal(seen[1].status, "released");
    assert.deepEqual(second.runs, [input]);
    assert.deepEqual(result.steps[0].toolResults[0].output, { deployed: "api", replicas: 4 });
    const status = await new Client().status(seen[0].breakpointId);
    assert.equal(status.result.valuesDigest, valuesDigest(input));
  });
});
