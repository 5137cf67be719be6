// Runs one scenario of client_scenarios.mjs in Node against a running server and prints its
// summary as JSON. Node 20 needs --experimental-websocket (Node 22+ has WebSocket built in):
//   node --experimental-websocket client_node.mjs <streamFile|unsupportedAudio|cancelSession> <ws-url> <wav>
import { readFile } from 'node:fs/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import path from 'node:path';
import * as scenarios from './client_scenarios.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const clientPath = path.resolve(here, '../../web-client/steno-client.js');
const [name, url, wavPath] = process.argv.slice(2);

// steno-client.js is an ES module in a folder without package.json; load it as one whatever
// Node's module detection does.
const source = await readFile(clientPath, 'utf8');
const { StenoClient } = await import(`data:text/javascript;base64,${Buffer.from(source).toString('base64')}`);

const wav = wavPath ? new Uint8Array(await readFile(wavPath)) : null;
const summary = await scenarios[name](StenoClient, url, wav);
process.stdout.write(`${JSON.stringify(summary)}\n`);
process.exit(0);
