// The official OpenAI client against a bmad coordinator: list models, complete, chat, stream
// both, n choices, a batch of prompts, a bad request that must come back as a 400 APIError, and
// a wrong API key as an AuthenticationError (401). Exits non-zero on any mismatch.
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const base = process.env.BMAD_BASE_URL;
const expected = process.env.BMAD_EXPECTED_TEXT;
// The key of the coordinator's api_keys_file, sent as every OpenAI client sends its key.
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: process.env.BMAD_API_KEY, maxRetries: 2, timeout: 60_000 });

const models = await client.models.list();
assert.ok(models.data.length >= 1, 'no models listed');
const model = models.data[0].id;
assert.equal((await client.models.retrieve(model)).id, model);

const completion = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 32, temperature: 0 });
assert.equal(completion.choices[0].text, expected, 'completion text differs from bmad generate');
assert.equal(completion.usage.completion_tokens, 32);
assert.equal(completion.choices[0].finish_reason, 'length');

let streamed = '';
let chunks = 0;
const completionStream = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 32, temperature: 0, stream: true });
for await (const chunk of completionStream) {
  chunks += 1;
  streamed += chunk.choices[0]?.text ?? '';
}
assert.equal(streamed, expected, 'streamed completion differs');
assert.ok(chunks > 1, 'the completion did not stream');

const chat = await client.chat.completions.create({
  model, temperature: 0, max_tokens: 16,
  messages: [{ role: 'system', content: 'You tell stories.' }, { role: 'user', content: 'Tell me a story.' }],
});
assert.equal(chat.choices[0].message.role, 'assistant');
assert.ok(chat.choices[0].message.content.length > 0, 'empty chat answer');
assert.equal(chat.usage.completion_tokens, 16);

let chatText = '';
let usage = null;
const chatStream = await client.chat.completions.create({
  model, temperature: 0, max_tokens: 16, stream: true, stream_options: { include_usage: true },
  messages: [{ role: 'system', content: 'You tell stories.' }, { role: 'user', content: 'Tell me a story.' }],
});
for await (const chunk of chatStream) {
  chatText += chunk.choices[0]?.delta?.content ?? '';
  if (chunk.usage) usage = chunk.usage;
}
assert.equal(chatText, chat.choices[0].message.content, 'streamed chat differs from the plain one');
assert.equal(usage?.completion_tokens, 16, 'no usage in the stream');

// n choices, plain and streamed: the client's own stream helper sorts chunks by choice index.
const several = await client.chat.completions.create({
  model, temperature: 1, seed: 11, max_tokens: 12, n: 3,
  messages: [{ role: 'user', content: 'Tell me a story.' }],
});
assert.deepEqual(several.choices.map((c) => c.index), [0, 1, 2]);
assert.equal(several.usage.completion_tokens, 36);
const severalTexts = ['', '', ''];
const severalStream = await client.chat.completions.create({
  model, temperature: 1, seed: 11, max_tokens: 12, n: 3, stream: true,
  messages: [{ role: 'user', content: 'Tell me a story.' }],
});
for await (const chunk of severalStream) {
  for (const choice of chunk.choices) severalTexts[choice.index] += choice.delta?.content ?? '';
}
assert.deepEqual(severalTexts, several.choices.map((c) => c.message.content), 'streamed choices differ');

// A batch of prompts, each with its n choices: index = prompt * n + choice.
const batch = await client.completions.create({
  model, prompt: ['Once upon a time', 'Once upon a time'], max_tokens: 32, temperature: 0, n: 2,
});
assert.deepEqual(batch.choices.map((c) => c.index), [0, 1, 2, 3]);
for (const choice of batch.choices) assert.equal(choice.text, expected, 'a batch choice differs');

try {
  await client.completions.create({ model, prompt: 'hi', max_tokens: -1 });
  assert.fail('a negative max_tokens was accepted');
} catch (e) {
  assert.ok(e instanceof OpenAI.APIError, `not an APIError: ${e}`);
  assert.equal(e.status, 400);
  assert.match(e.message, /max_tokens/);
}
const stranger = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'sk-not-a-key-of-the-file', maxRetries: 0 });
for (const call of [() => stranger.models.list(), () => stranger.completions.create({ model, prompt: 'hi', max_tokens: 4 })]) {
  try {
    await call();
    assert.fail('a wrong API key was accepted');
  } catch (e) {
    assert.ok(e instanceof OpenAI.AuthenticationError, `not an AuthenticationError: ${e}`);
    assert.equal(e.status, 401);
    assert.equal(e.code, 'invalid_api_key');
  }
}
console.log('openai client: OK');
