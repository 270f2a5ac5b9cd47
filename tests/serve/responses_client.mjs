// responses_client.mjs - gpt serve's /v1/responses through the official
// `openai` npm client, for tests/cli_serve_responses.sh. Usage:
//
//     node responses_client.mjs NODE_DIR BASE_URL KEY MAX_TOKENS SEED
//
// NODE_DIR holds node_modules/openai. The conversation is INSTRUCTIONS (a
// string) and INPUT (a JSON array of messages), the schema SCHEMA; the
// script renders the same conversation for /v1/chat/completions. Prints
// one JSON line per call, which the shell script compares with the chat
// endpoint's answers:
//
//     {"call": "plain", "response": (the whole object), "output_text": (the SDK's)}
//     {"call": "string input", "response": ...}   input a string, no instructions
//     {"call": "stream", "types": [...], "sequence": [...], "deltas": (joined), "done_text": ...,
//      "final": (the last event's response), "event_types": [...]}
//     {"call": "stream helper", "output_text": (responses.stream(...).finalResponse()'s), "status": ...}
//     {"call": "json_schema", "response": ..., "output_text": ..., "output_parsed": (responses.parse's)}
//     {"call": "json_schema stream", "types": [...], "deltas": ..., "final": ...}
//     {"call": "next turn", "response": ...}   the plain answer's output item sent back, and a user message
//     {"call": "refused FIELD", "error": CLASS, "status": 400, "param": ..., "message": ...}
//
// No retries: an error is seen at once, as it is.
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [nodeDir, baseURL, key, maxTokens, seed] = process.argv.slice(2);
const { default: OpenAI } = await import(pathToFileURL(join(nodeDir, 'node_modules', 'openai', 'index.mjs')).href);

const client = new OpenAI({ baseURL, apiKey: key, maxRetries: 0, timeout: 20000 });
const say = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const request = { model: 'demo.bin', instructions: process.env.INSTRUCTIONS, input: JSON.parse(process.env.INPUT),
                  max_output_tokens: Number(maxTokens), seed: Number(seed), temperature: 0.8 };
const schemaFormat = { type: 'json_schema', name: 'answer', schema: JSON.parse(process.env.SCHEMA), strict: true };

const plain = await client.responses.create(request);
say({ call: 'plain', response: plain, output_text: plain.output_text });

const str = await client.responses.create({ model: 'demo.bin', input: 'Who spoke unto Moses?',
                                            max_output_tokens: Number(maxTokens), seed: Number(seed) });
say({ call: 'string input', response: str, output_text: str.output_text });

// the events of a stream, as the client yields them
async function collect(call, req) {
    const stream = await client.responses.create({ ...req, stream: true });
    const types = [], sequence = [];
    let deltas = '', doneText = null, final = null;
    for await (const event of stream) {
        types.push(event.type);
        sequence.push(event.sequence_number);
        if (event.type === 'response.output_text.delta') deltas += event.delta;
        if (event.type === 'response.output_text.done') doneText = event.text;
        if (event.response) final = event.response;
    }
    say({ call, types, sequence, deltas, done_text: doneText, final });
}
await collect('stream', request);

const helper = client.responses.stream(request);
const helped = await helper.finalResponse();
say({ call: 'stream helper', output_text: helped.output_text, status: helped.status });

const parsed = await client.responses.parse({ ...request, text: { format: schemaFormat } });
say({ call: 'json_schema', response: parsed, output_text: parsed.output_text, output_parsed: parsed.output_parsed });
await collect('json_schema stream', { ...request, text: { format: schemaFormat } });

// the next turn, stateless: the answer's output item sent back as it came
const next = await client.responses.create({ ...request, input: [...request.input, ...plain.output,
                                                                   { role: 'user', content: 'And then?' }] });
say({ call: 'next turn', response: next, output_text: next.output_text });

// refused: each field by name, as the client's BadRequestError
for (const [field, extra] of [
    ['store', { store: true }],
    ['previous_response_id', { previous_response_id: plain.id }],
    ['background', { background: true }],
    ['tools', { tools: [{ type: 'web_search' }] }],
    ['max_output_tokens', { max_output_tokens: -1 }],
]) {
    try {
        await client.responses.create({ ...request, ...extra });
        say({ call: `refused ${field}`, error: null });
    } catch (e) {
        say({ call: `refused ${field}`, error: e.constructor.name, status: e.status, param: e.param ?? null,
              message: e.error?.message ?? e.message, bad_request: e instanceof OpenAI.BadRequestError });
    }
}
