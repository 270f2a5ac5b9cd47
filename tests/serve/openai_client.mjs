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
//
// No retries: an error is seen at once, as it is.
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [nodeDir, baseURL, key, prompt, maxTokens, seed] = process.argv.slice(2);
const { default: OpenAI } = await import(pathToFileURL(join(nodeDir, 'node_modules', 'openai', 'index.mjs')).href);

const client = new OpenAI({ baseURL, apiKey: key, maxRetries: 0, timeout: 20000 });
const request = { model: 'demo.bin', prompt, max_tokens: Number(maxTokens), seed: Number(seed) };
const say = (o) => process.stdout.write(JSON.stringify(o) + '\n');

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
