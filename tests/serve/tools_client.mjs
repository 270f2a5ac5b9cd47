// tools_client.mjs - function tools on gpt serve's /v1/chat/completions
// through the official `openai` npm client and LangChain's ChatOpenAI, for
// tests/cli_serve_tools.sh. Usage:
//
//     node tools_client.mjs NODE_DIR BASE_URL KEY SEED
//
// NODE_DIR holds node_modules/openai and @langchain/openai. The tools are
// TOOLS (a JSON array of OpenAI function tools), the conversation
// MESSAGES. Prints one JSON line per call:
//
//     {"call": "required", "message": ..., "finish_reason": ..., "tokens": [...]}
//     {"call": "named", ...}        tool_choice {"type": "function", "function": {"name": FIRST}}
//     {"call": "stream", "role": ..., "id": ..., "name": ..., "arguments": (the deltas joined),
//      "pieces": N, "finish_reason": ...}
//     {"call": "auto", "error": CLASS, "status": 400, "param": ...}
//     {"call": "langchain", "tool_calls": (the AIMessage's), "finish_reason": ...}
//     {"call": "openai tool result", "content": ...}   the required call and a tool message with RESULT
//                                                      sent back, tool_choice "none", max_tokens 12
//     {"call": "langchain tool result", "content": ...}  the same through LangChain (its AIMessage and
//                                                        a ToolMessage), without tools
//
// No retries: an error is seen at once, as it is.
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [nodeDir, baseURL, key, seed] = process.argv.slice(2);
const modules = join(nodeDir, 'node_modules');
const { default: OpenAI } = await import(pathToFileURL(join(modules, 'openai', 'index.mjs')).href);
const say = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const client = new OpenAI({ baseURL, apiKey: key, maxRetries: 0, timeout: 20000 });
const tools = JSON.parse(process.env.TOOLS);
const messages = JSON.parse(process.env.MESSAGES);
const request = { model: 'demo.bin', messages, tools, seed: Number(seed) };

const required = await client.chat.completions.create({ ...request, tool_choice: 'required' });
say({ call: 'required', message: required.choices[0].message, finish_reason: required.choices[0].finish_reason,
      tokens: required.choices[0].tokens });

const first = tools[0].function.name;
const named = await client.chat.completions.create({ ...request,
                                                     tool_choice: { type: 'function', function: { name: first } } });
say({ call: 'named', message: named.choices[0].message, finish_reason: named.choices[0].finish_reason,
      tokens: named.choices[0].tokens });

const stream = await client.chat.completions.create({ ...request, tool_choice: 'required', stream: true });
let role = null, id = null, name = null, args = '', pieces = 0, finish = null;
for await (const chunk of stream) {
    const c = chunk.choices[0];
    if (c.delta.role) role = c.delta.role;
    for (const t of c.delta.tool_calls ?? []) {
        pieces++;
        if (t.id) id = t.id;
        if (t.function?.name) name = t.function.name;
        args += t.function?.arguments ?? '';
    }
    if (c.finish_reason) finish = c.finish_reason;
}
say({ call: 'stream', role, id, name, arguments: args, pieces, finish_reason: finish });

try {
    await client.chat.completions.create(request);
    say({ call: 'auto', error: null });
} catch (e) {
    say({ call: 'auto', error: e.constructor.name, status: e.status, param: e.param ?? null,
          message: e.error?.message ?? e.message });
}

// LangChain: bindTools with tool_choice "required"
const lc = await import(pathToFileURL(join(modules, '@langchain', 'openai', 'dist', 'index.js')).href);
const chat = new lc.ChatOpenAI({ model: 'demo.bin', apiKey: key, configuration: { baseURL }, maxRetries: 0,
                                 timeout: 20000, modelKwargs: { seed: Number(seed) } });
const bound = chat.bindTools(tools, { tool_choice: 'required' });
const ai = await bound.invoke(messages.map((m) => [m.role === 'user' ? 'human' : m.role, m.content]));
say({ call: 'langchain', tool_calls: ai.tool_calls, finish_reason: ai.response_metadata?.finish_reason ?? null });

// the next turn: the call and its result sent back
const call = required.choices[0].message.tool_calls[0];
const after = await client.chat.completions.create({ ...request, tool_choice: 'none', max_tokens: 12, messages: [
    ...messages, required.choices[0].message, { role: 'tool', tool_call_id: call.id, content: process.env.RESULT }] });
say({ call: 'openai tool result', content: after.choices[0].message.content, tokens: after.choices[0].tokens });
const { ToolMessage } = await import(pathToFileURL(join(modules, '@langchain', 'core', 'dist', 'messages', 'index.js')).href);
const plain = new lc.ChatOpenAI({ model: 'demo.bin', apiKey: key, configuration: { baseURL }, maxRetries: 0,
                                  timeout: 20000, maxTokens: 12, modelKwargs: { seed: Number(seed) } });
const history = messages.map((m) => [m.role === 'user' ? 'human' : m.role, m.content]);
const answer = await plain.invoke([...history, ai,
                                   new ToolMessage({ tool_call_id: ai.tool_calls[0].id, content: process.env.RESULT })]);
say({ call: 'langchain tool result', content: answer.content });
