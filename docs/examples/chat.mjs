// docs/examples/chat.mjs: a chat answer from gpt serve through the official
// openai client (npm install openai). The server: $OPENAI_BASE_URL, else
// http://127.0.0.1:8080/v1; a server started without --api-key takes any key.
import OpenAI from 'openai';

const client = new OpenAI({
    baseURL: process.env.OPENAI_BASE_URL ?? 'http://127.0.0.1:8080/v1',
    apiKey: process.env.OPENAI_API_KEY ?? 'none',
});
const answer = await client.chat.completions.create({
    model: 'demo.bin',
    messages: [{ role: 'user', content: 'Who spoke unto Moses?' }],
    max_tokens: 12,
    seed: 7,
});
console.log(answer.choices[0].message.content);
