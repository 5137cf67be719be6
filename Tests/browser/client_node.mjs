// Runs one scenario of client_scenarios.mjs in Node against a running server and prints its
// summary as JSON. Needs a WebSocket global: Node 22+, Node 20 with --experimental-websocket,
// or Node 18 with `--require ./node_websocket.cjs` (Debian's node-ws):
//   node --experimental-websocket client_node.mjs <streamFile|unsupportedAudio|cancelSession> <ws-url> <wav> [more arguments]
// (more arguments are passed on to the scenario, numbers as numbers).
import { readFile } from 'node:fs/promises';
import { StenoClient } from '../../web-client/steno-client.js';
import * as scenarios from './client_scenarios.mjs';

const [name, url, wavPath, ...more] = process.argv.slice(2);
const wav = wavPath ? new Uint8Array(await readFile(wavPath)) : null;
const extra = more.map((a) => (/^-?\d+(\.\d+)?$/.test(a) ? Number(a) : a));
const summary = await scenarios[name](StenoClient, url, wav, ...extra);
process.stdout.write(`${JSON.stringify(summary)}\n`);
process.exit(0);
