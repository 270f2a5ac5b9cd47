// embed_client.mjs - gpt serve's embeddings through the clients people use,
// for tests/cli_serve_embed.sh. Usage:
//
//     node embed_client.mjs NODE_DIR HOST KEY TEXTS_JSON
//
// NODE_DIR holds node_modules/openai, @langchain/openai and ollama
// (scripts/install-deps.sh test). HOST is http://127.0.0.1:PORT. Prints one
// JSON line per call, which tests/serve/embed_check.py compares bit for bit
// with the server's own float answer:
//
//     {"call": "openai", "embeddings": [...], "usage": ..., "model": ...}  embeddings.create, no
//                                       encoding_format (the client asks for base64 and decodes it)
//     {"call": "openai float", "embeddings": [...], "object": ..., "indexes": [...]}
//     {"call": "openai base64", "base64": ["..."]}   as the server sent them
//     {"call": "openai dimensions", "error": CLASS, "status": 400, "param": ...}
//     {"call": "langchain query", "embedding": [...]}        OpenAIEmbeddings.embedQuery(TEXTS[0])
//     {"call": "langchain documents", "embeddings": [...]}   OpenAIEmbeddings.embedDocuments(TEXTS)
//     {"call": "ollama", "embeddings": [...], "prompt_eval_count": N}   ollama's embed({input: TEXTS})
//     {"call": "ollama one", "embeddings": [...]}             embed({input: TEXTS[0]})
//
// No retries: an error is seen at once.
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [nodeDir, host, key, textsJson] = process.argv.slice(2);
const texts = JSON.parse(textsJson);
const mod = (...p) => import(pathToFileURL(join(nodeDir, 'node_modules', ...p)).href);
const say = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const { default: OpenAI } = await mod('openai', 'index.mjs');
const lc = await mod('@langchain', 'openai', 'dist', 'index.js');
const { Ollama } = await mod('ollama', 'dist', 'index.mjs');

const openai = new OpenAI({ baseURL: `${host}/v1`, apiKey: key, maxRetries: 0, timeout: 60000 });
let r = await openai.embeddings.create({ model: 'm', input: texts });
say({ call: 'openai', embeddings: r.data.map((d) => Array.from(d.embedding)), usage: r.usage, model: r.model });
r = await openai.embeddings.create({ model: 'm', input: texts, encoding_format: 'float' });
say({ call: 'openai float', embeddings: r.data.map((d) => d.embedding), object: r.object,
      indexes: r.data.map((d) => d.index) });
r = await openai.embeddings.create({ model: 'm', input: texts, encoding_format: 'base64' });
say({ call: 'openai base64', base64: r.data.map((d) => d.embedding) });
try {
    await openai.embeddings.create({ model: 'm', input: texts[0], dimensions: 8 });
    say({ call: 'openai dimensions', error: null });
} catch (e) {
    say({ call: 'openai dimensions', error: e.constructor.name, status: e.status, param: e.param ?? e.error?.param });
}

const emb = new lc.OpenAIEmbeddings({ model: 'm', apiKey: key, configuration: { baseURL: `${host}/v1` },
                                      maxRetries: 0, timeout: 60000 });
say({ call: 'langchain query', embedding: await emb.embedQuery(texts[0]) });
say({ call: 'langchain documents', embeddings: await emb.embedDocuments(texts) });

const ollama = new Ollama({ host, headers: { Authorization: `Bearer ${key}` } });
const o = await ollama.embed({ model: 'm', input: texts });
say({ call: 'ollama', embeddings: o.embeddings, prompt_eval_count: o.prompt_eval_count });
say({ call: 'ollama one', embeddings: (await ollama.embed({ model: 'm', input: texts[0] })).embeddings });
