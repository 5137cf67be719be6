// Preloaded (`node --require`) into a Node without a WebSocket of its own, such as Debian 12's
// Node 18: the WebSocket of Debian's node-ws package (/usr/share/nodejs/ws) takes its place,
// so that code written for the standard WebSocket (steno-client.js, README.md's example) runs.
if (typeof globalThis.WebSocket !== 'function') {
  let ws;
  try {
    ws = require('ws');
  } catch {
    ws = require('/usr/share/nodejs/ws');
  }
  globalThis.WebSocket = ws.WebSocket || ws;
}
