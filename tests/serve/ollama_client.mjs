// ollama_client.mjs - gpt serve through the `ollama` npm client, for
// tests/cli_serve_ollama.sh. Usage:
//
//     node ollama_client.mjs NODE_DIR HOST KEY PROMPT MAX_TOKENS SEED
//
// NODE_DIR holds node_modules/ollama (npm install --prefix NODE_DIR ollama).
// The client sends KEY as Authorization: Bearer KEY. Prints one JSON line
// per call, which the shell script compares with gpt's own output:
//
//     {"call": "list", "models": [...]}
//     {"call": "show", "details": {...}, "model_info": {...}, "template": ...}
//     {"call": "ps", "models": [...]}
//     {"call": "generate", "response": ..., "done": ..., "done_reason": ..., "prompt_eval_count": N,
//      "eval_count": N, "durations": (all four numbers, total >= eval)}
//     {"call": "generate stream", "response": (the parts joined), "parts": N, "done_reason": ..., "eval_count": N}
//     {"call": "chat", "role": ..., "content": ..., "done_reason": ..., "eval_count": N}
//     {"call": "chat stream", "role": ..., "content": (the parts joined), "parts": N, "done_reason": ...}
//     {"call": "num_ctx", "error": CLASS, "status": 400, "message": ...}
//     {"call": "pull", "error": CLASS, "status": 501, "message": ...}
//
// The chat calls send CHAT_MESSAGES; every generation has options
// {num_predict: MAX_TOKENS, seed: SEED, temperature: 0.8}.
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [nodeDir, host, key, prompt, maxTokens, seed] = process.argv.slice(2);
const { Ollama } = await import(pathToFileURL(join(nodeDir, 'node_modules', 'ollama', 'dist', 'index.mjs')).href);

const client = new Ollama({ host, headers: { Authorization: `Bearer ${key}` } });
const say = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const options = { num_predict: Number(maxTokens), seed: Number(seed), temperature: 0.8 };
const messages = JSON.parse(process.env.CHAT_MESSAGES);

const list = await client.list();
say({ call: 'list', models: list.models });
const show = await client.show({ model: list.models[0].name });
say({ call: 'show', details: show.details, model_info: show.model_info, template: show.template });
const ps = await client.ps();
say({ call: 'ps', models: ps.models });

const g = await client.generate({ model: list.models[0].name, prompt, stream: false, options });
say({
    call: 'generate', response: g.response, done: g.done, done_reason: g.done_reason,
    prompt_eval_count: g.prompt_eval_count, eval_count: g.eval_count,
    durations: [g.total_duration, g.load_duration, g.prompt_eval_duration, g.eval_duration].every((d) => typeof d === 'number')
        && g.total_duration >= g.eval_duration,
});

let text = '', parts = 0, last = null;
for await (const part of await client.generate({ model: list.models[0].name, prompt, stream: true, options })) {
    parts++;
    text += part.response;
    last = part;
}
say({ call: 'generate stream', response: text, parts, done: last.done, done_reason: last.done_reason, eval_count: last.eval_count });

const c = await client.chat({ model: list.models[0].name, messages, stream: false, options });
say({ call: 'chat', role: c.message.role, content: c.message.content, done_reason: c.done_reason, eval_count: c.eval_count });

let content = '', role = null;
parts = 0;
for await (const part of await client.chat({ model: list.models[0].name, messages, stream: true, options })) {
    parts++;
    content += part.message.content;
    role = role ?? part.message.role;
    last = part;
}
say({ call: 'chat stream', role, content, parts, done: last.done, done_reason: last.done_reason });

async function failure(call, f) {
    try {
        await f();
        say({ call, error: null });
    } catch (e) {
        say({ call, error: e.name, status: e.status_code, message: e.message });
    }
}
await failure('num_ctx', () => client.generate({ model: 'demo.bin', prompt, stream: false, options: { num_ctx: 100000 } }));
await failure('pull', () => client.pull({ model: 'gpt2', stream: false }));
