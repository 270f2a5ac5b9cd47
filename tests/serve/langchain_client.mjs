// langchain_client.mjs - gpt serve through LangChain's JS package
// @langchain/openai, for tests/cli_serve_openai.sh. Usage:
//
//     node langchain_client.mjs NODE_DIR BASE_URL KEY PROMPT MAX_TOKENS SEED [chat]
//
// NODE_DIR holds node_modules/@langchain/openai (npm install --prefix
// NODE_DIR @langchain/openai). Prints one JSON line per call, which the
// shell script compares with gpt's own output:
//
//     {"call": "llm invoke", "text": ...}          OpenAI (the completions LLM)
//     {"call": "llm stream", "text": (the chunks joined), "chunks": N}
//     {"call": "chat invoke", "text": ...}         ChatOpenAI, with "chat"
//     {"call": "chat stream", "text": ..., "chunks": N}
//
// The seed goes as LangChain passes extra fields (modelKwargs); no
// retries, so an error is seen at once.
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [nodeDir, baseURL, key, prompt, maxTokens, seed, chat] = process.argv.slice(2);
const lc = await import(pathToFileURL(join(nodeDir, 'node_modules', '@langchain', 'openai', 'dist', 'index.js')).href);
const say = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const settings = {
    model: 'demo.bin', apiKey: key, configuration: { baseURL }, maxRetries: 0, timeout: 20000,
    maxTokens: Number(maxTokens), modelKwargs: { seed: Number(seed) },
};

const llm = new lc.OpenAI(settings);
say({ call: 'llm invoke', text: await llm.invoke(prompt) });
let text = '', chunks = 0;
for await (const chunk of await llm.stream(prompt)) {
    text += chunk;
    chunks++;
}
say({ call: 'llm stream', text, chunks });

if (chat === 'chat') {
    const model = new lc.ChatOpenAI(settings);
    const answer = await model.invoke([['human', prompt]]);
    say({ call: 'chat invoke', text: answer.content });
    text = '';
    chunks = 0;
    for await (const chunk of await model.stream([['human', prompt]])) {
        text += chunk.content;
        chunks++;
    }
    say({ call: 'chat stream', text, chunks });
}
