// Minimal Node.js client of apply_edit's gRPC API, as a VS Code extension would call it: it loads only
// the .proto file. Writes the rewritten file to stdout once complete, progress and stats to stderr.
//
// The file is assembled as it streams and written once complete: FAILED_PRECONDITION after some text
// means no sound result was found, and then nothing is written.
//
//   node proto/examples/client.mjs HOST:PORT FILE SNIPPET [INSTRUCTION]
//
// Needs @grpc/grpc-js and @grpc/proto-loader (npm install).
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

const require = createRequire(process.env.NODE_MODULES_FROM || import.meta.url);
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const protoDir = join(dirname(fileURLToPath(import.meta.url)), '..');
const definition = protoLoader.loadSync('apply_edit/v1/apply_edit.proto', {
  includeDirs: [protoDir], keepCase: true, longs: Number, defaults: true,
});
const { ApplyEdit } = grpc.loadPackageDefinition(definition).apply_edit.v1;

const [address, file, snippet, instruction = ''] = process.argv.slice(2);
const client = new ApplyEdit(address, grpc.credentials.createInsecure());
const call = client.Apply({
  original: readFileSync(file, 'utf8'),
  update: readFileSync(snippet, 'utf8'),
  instruction,
  path: file,
}, { deadline: Date.now() + 600_000 });

let text = '';
call.on('data', (response) => {
  text += response.text;
  if (response.stats) {
    const s = response.stats;
    process.stderr.write(`${s.new_tokens} tokens, ${s.target_passes} passes, ${s.total_s.toFixed(2)}s, path ${s.path}\n`);
    process.stdout.write(text);
  }
});
call.on('error', (err) => {
  process.stderr.write(`${grpc.status[err.code]}: ${err.details}\n`);
  process.exitCode = 1;
});
