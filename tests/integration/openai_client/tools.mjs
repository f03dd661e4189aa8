// The official OpenAI client's tool calling against bmad (model.tool_call_parser hermes, a model
// whose chat template renders tools): a named function run by the client's own runTools helper,
// the conversation that helper built (the assistant's call, the tool's result) sent back, and
// tool_choice "required" whole and through the client's stream helper. Exits non-zero on any
// mismatch.
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const client = new OpenAI({ baseURL: `${process.env.BMAD_BASE_URL}/v1`, apiKey: 'none', maxRetries: 2, timeout: 60_000 });
const model = (await client.models.list()).data[0].id;
const weather = {
  type: 'object',
  properties: { city: { type: 'string', maxLength: 12 }, days: { type: 'integer', minimum: 1, maximum: 7 } },
  required: ['city'],
};
const question = [{ role: 'user', content: 'What is the weather in Oslo?' }];

// runTools with a forced function: the client parses the call's arguments and runs it once.
let seen = null;
const runner = client.beta.chat.completions.runTools({
  model, messages: question, max_tokens: 200, temperature: 1, seed: 5,
  tools: [{
    type: 'function',
    function: {
      name: 'get_weather', parameters: weather, parse: JSON.parse,
      function: (args) => { seen = args; return { temp: -3 }; },
    },
  }],
  tool_choice: { type: 'function', function: { name: 'get_weather' } },
});
await runner.done();
assert.ok(seen && typeof seen.city === 'string', `get_weather was not called with a city: ${JSON.stringify(seen)}`);
const conversation = runner.messages;  // the question, the assistant's call, the tool's result
assert.equal(conversation.at(-1).role, 'tool');
assert.equal(conversation.at(-2).tool_calls?.length, 1);

const tools = [
  { type: 'function', function: { name: 'get_weather', parameters: weather } },
  { type: 'function', function: { name: 'get_time' } },
];
const followUp = await client.chat.completions.create({
  model, messages: conversation, tools, tool_choice: 'none', max_tokens: 8, temperature: 0,
});
assert.ok(['stop', 'length'].includes(followUp.choices[0].finish_reason), JSON.stringify(followUp));

// "required", whole and streamed through the client's accumulator: the same call for one seed.
const params = {
  model, messages: question, tools, tool_choice: 'required', parallel_tool_calls: false,
  max_tokens: 200, temperature: 1, seed: 9,
};
const whole = await client.chat.completions.create(params);
assert.equal(whole.choices[0].finish_reason, 'tool_calls', JSON.stringify(whole));
assert.equal(whole.choices[0].message.tool_calls.length, 1);
const call = whole.choices[0].message.tool_calls[0];
assert.ok(['get_weather', 'get_time'].includes(call.function.name));
JSON.parse(call.function.arguments);
const stream = client.beta.chat.completions.stream(params);
const final = await stream.finalChatCompletion();
assert.equal(final.choices[0].finish_reason, 'tool_calls');
assert.deepEqual(final.choices[0].message.tool_calls[0].function, call.function);
console.log('openai client tools: OK');
