// The `openai` npm package against apply-edit's OpenAI-compatible endpoint, as an editor extension uses it.
// Reads {"message": "<code>...</code><update>...</update>"} on stdin; prints {"whole", "streamed"}.
import OpenAI from "openai";

const baseURL = process.argv[2];
const input = JSON.parse(await new Promise((resolve) => {
  let data = "";
  process.stdin.on("data", (chunk) => (data += chunk));
  process.stdin.on("end", () => resolve(data));
}));
const client = new OpenAI({ baseURL, apiKey: "none", maxRetries: 0 });
const messages = [{ role: "user", content: input.message }];

const whole = await client.chat.completions.create({ model: "auto", messages });
let streamed = "";
for await (const chunk of await client.chat.completions.create({ model: "auto", messages, stream: true })) {
  streamed += chunk.choices[0]?.delta?.content ?? "";
}
process.stdout.write(JSON.stringify({ whole: whole.choices[0].message.content, streamed }));
