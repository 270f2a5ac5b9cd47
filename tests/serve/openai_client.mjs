// openai_client.mjs - gpt serve through the official `openai` npm client,
// for tests/cli_serve_openai.sh. Usage:
//
//     node openai_client.mjs NODE_DIR BASE_URL KEY PROMPT MAX_TOKENS SEED
//
// NODE_DIR holds node_modules/openai (npm install --prefix NODE_DIR openai).
// Prints one JSON line per call, which the shell script compares with gpt's
// own output:
//
//     {"call": "plain", "text": ..., "finish_reason": ..., "seed": ...}
//     {"call": "logprobs", "text": ..., "logprobs": {...}}
//     {"call": "stream", "text": (the chunks' texts joined), "chunks": N, "finish_reason": ...}
//     {"call": "stream usage", "text": ..., "usage": (the last chunk's), "last_choices": N, "nulls": N}
//     {"call": "plain usage", "usage": ...}
//     {"call": "retrieve", "id": ..., "object": ...}
//     {"call": "best_of", "seeds": [...], "texts": [...]}
//     {"call": "no model", "error": CLASS, "status": 404, "not_found": true, "code": ...}
//     {"call": "bad key", "error": CLASS, "status": 401, "auth": true, "type": ...}
//     {"call": "bad value", "error": CLASS, "status": 400, "bad_request": true, "param": ..., "message": ...}
//     {"call": "chat", "role": ..., "content": ..., "finish_reason": ..., "seed": ..., "object": ..., "usage": ...}
//     {"call": "chat logprobs", "content": ..., "logprobs": (choices[0].logprobs.content)}
//     {"call": "chat stream", "role": (the first delta's), "content": (the deltas joined), "chunks": N,
//      "finish_reason": ..., "usage": (the last chunk's), "last_choices": N, "object": ...}
//     {"call": "chat max_completion_tokens", "tokens": (usage.completion_tokens)}
//     {"call": "chat response_format", "content": ..., "finish_reason": ...}
//     {"call": "chat response_format bad", "error": CLASS, "status": 400, "bad_request": true, "param": ..., "message": ...}
//
// The chat calls send CHAT_MESSAGES (exported for the script, which renders
// them through /apply-template); response_format's schema is CHAT_SCHEMA.
// No retries: an error is seen at once, as it is.
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [nodeDir, baseURL, key, prompt, maxTokens, seed] = process.argv.slice(2);
const { default: OpenAI } = await import(pathToFileURL(join(nodeDir, 'node_modules', 'openai', 'index.mjs')).href);

const client = new OpenAI({ baseURL, apiKey: key, maxRetries: 0, timeout: 20000 });
const request = { model: 'demo.bin', prompt, max_tokens: Number(maxTokens), seed: Number(seed) };
const say = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const messages = JSON.parse(process.env.CHAT_MESSAGES);
const chatRequest = { model: 'demo.bin', messages, max_tokens: Number(maxTokens), seed: Number(seed) };

const plain = await client.completions.create(request);
say({ call: 'plain', text: plain.choices[0].text, finish_reason: plain.choices[0].finish_reason, seed: plain.seed });

const lp = await client.completions.create({ ...request, logprobs: 2 });
say({ call: 'logprobs', text: lp.choices[0].text, logprobs: lp.choices[0].logprobs });

const stream = await client.completions.create({ ...request, stream: true });
let text = '', chunks = 0, finish = null;
for await (const chunk of stream) {
    chunks++;
    text += chunk.choices[0].text;
    if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
}
say({ call: 'stream', text, chunks, finish_reason: finish });
say({ call: 'plain usage', usage: plain.usage });

const withUsage = await client.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
let utext = '', usage = null, lastChoices = -1, nulls = 0;
for await (const chunk of withUsage) {
    if (chunk.choices.length) utext += chunk.choices[0].text;
    if (chunk.usage) usage = chunk.usage;
    else if (chunk.usage === null) nulls++;
    lastChoices = chunk.choices.length;
}
say({ call: 'stream usage', text: utext, usage, last_choices: lastChoices, nulls });

const model = await client.models.retrieve('demo.bin');
say({ call: 'retrieve', id: model.id, object: model.object });

const best = await client.completions.create({ ...request, n: 2, best_of: 4 });
say({ call: 'best_of', seeds: best.choices.map((c) => c.seed), texts: best.choices.map((c) => c.text) });

// errors: the client's own classes
async function failure(call, c, req, extra) {
    try {
        await c.completions.create(req);
        say({ call, error: null });
    } catch (e) {
        say({ call, error: e.constructor.name, status: e.status, type: e.type, param: e.param ?? null,
              message: e.error?.message ?? e.message, ...extra(e) });
    }
}
try {
    await client.models.retrieve('gpt-4');
    say({ call: 'no model', error: null });
} catch (e) {
    say({ call: 'no model', error: e.constructor.name, status: e.status, not_found: e instanceof OpenAI.NotFoundError,
          code: e.code ?? null });
}
const wrong = new OpenAI({ baseURL, apiKey: key + '-wrong', maxRetries: 0, timeout: 20000 });
await failure('bad key', wrong, request, (e) => ({ auth: e instanceof OpenAI.AuthenticationError }));
await failure('bad value', client, { ...request, temperature: -1 },
              (e) => ({ bad_request: e instanceof OpenAI.BadRequestError }));

// chat.completions
const chat = await client.chat.completions.create(chatRequest);
say({ call: 'chat', role: chat.choices[0].message.role, content: chat.choices[0].message.content,
      finish_reason: chat.choices[0].finish_reason, seed: chat.seed, object: chat.object, usage: chat.usage });

const chatLp = await client.chat.completions.create({ ...chatRequest, logprobs: true, top_logprobs: 2 });
say({ call: 'chat logprobs', content: chatLp.choices[0].message.content, logprobs: chatLp.choices[0].logprobs.content });

const chatStream = await client.chat.completions.create({ ...chatRequest, stream: true,
                                                          stream_options: { include_usage: true } });
let role = null, content = '', cchunks = 0, cfinish = null, cusage = null, clast = -1, cobject = null;
for await (const chunk of chatStream) {
    cchunks++;
    cobject = chunk.object;
    clast = chunk.choices.length;
    if (chunk.usage) cusage = chunk.usage;
    if (!chunk.choices.length) continue;
    const d = chunk.choices[0].delta;
    if (d.role && role === null) role = d.role;
    if (d.content) content += d.content;
    if (chunk.choices[0].finish_reason) cfinish = chunk.choices[0].finish_reason;
}
say({ call: 'chat stream', role, content, chunks: cchunks, finish_reason: cfinish, usage: cusage,
      last_choices: clast, object: cobject });

const short = await client.chat.completions.create({ ...chatRequest, max_tokens: undefined, max_completion_tokens: 3 });
say({ call: 'chat max_completion_tokens', tokens: short.usage.completion_tokens });

// response_format: a JSON Schema (CHAT_SCHEMA), and one outside the subset
const schema = JSON.parse(process.env.CHAT_SCHEMA);
const formatted = await client.chat.completions.create({ ...chatRequest, response_format: {
    type: 'json_schema', json_schema: { name: 'answer', schema, strict: true } } });
say({ call: 'chat response_format', content: formatted.choices[0].message.content,
      finish_reason: formatted.choices[0].finish_reason });
try {
    await client.chat.completions.create({ ...chatRequest, response_format: {
        type: 'json_schema', json_schema: { name: 'bad', schema: { type: 'array', uniqueItems: true } } } });
    say({ call: 'chat response_format bad', error: null });
} catch (e) {
    say({ call: 'chat response_format bad', error: e.constructor.name, status: e.status, param: e.param ?? null,
          message: e.error?.message ?? e.message, bad_request: e instanceof OpenAI.BadRequestError });
}
