// Part of steno-client.js, the module to import: what its classes share — callbacks and async
// iterators over server events (EventOwner), and a promise with its resolve and reject.

export function deferred() {
  let resolve, reject;
  const promise = new Promise((res, rej) => { resolve = res; reject = rej; });
  promise.catch(() => {}); // callers who await it still see the rejection
  return { promise, resolve, reject };
}

/**
 * An async iterator over the events `owner` (a StenoClient or StenoViewer) delivers from now
 * on. The owner pushes to every sink in `owner._iterators` and finishes them when it closes;
 * `owner.state === 'closed'` and `owner.error` describe a finished owner.
 */
function eventIterator(owner) {
  const queue = [];
  let wake = null;
  let done = owner.state === 'closed';
  let failure = done ? owner.error : null;
  const sink = {
    push: (event) => { queue.push(event); wake?.(); },
    finish: (error) => { done = true; failure = error; wake?.(); },
  };
  if (!done) owner._iterators.add(sink);
  const iterator = {
    next: async () => {
      while (queue.length === 0 && !done) {
        await new Promise((resolve) => { wake = resolve; });
        wake = null;
      }
      if (queue.length) return { value: queue.shift(), done: false };
      if (failure) { const f = failure; failure = null; throw f; }
      return { value: undefined, done: true };
    },
    return: async () => {
      owner._iterators.delete(sink);
      done = true;
      queue.length = 0;
      failure = null;
      return { value: undefined, done: true };
    },
    [Symbol.asyncIterator]() { return iterator; },
  };
  return iterator;
}

/** What StenoClient and StenoViewer share: callbacks and async iterators over server events. */
export class EventOwner {
  constructor() {
    this._listeners = new Map();
    this._iterators = new Set();
  }

  on(type, fn) {
    if (!this._listeners.has(type)) this._listeners.set(type, new Set());
    this._listeners.get(type).add(fn);
    return () => this.off(type, fn);
  }

  off(type, fn) {
    this._listeners.get(type)?.delete(fn);
  }

  events() {
    return eventIterator(this);
  }

  [Symbol.asyncIterator]() {
    return this.events();
  }

  /** A server event from a WebSocket message (the server sends only JSON text); null if not one. */
  _parseEvent(data) {
    if (typeof data !== 'string') return null;
    let event;
    try {
      event = JSON.parse(data);
    } catch {
      return null;
    }
    if (!event || typeof event.type !== 'string') return null;
    if (typeof event.seq === 'number') this.lastSeq = event.seq;
    return event;
  }

  /** A server event to the callbacks of its type, the 'event' callbacks and the iterators. */
  _deliver(event) {
    this._emit(event.type, event);
    this._emit('event', event);
    for (const sink of this._iterators) sink.push(event);
  }

  _emit(type, payload) {
    for (const fn of [...(this._listeners.get(type) || [])]) {
      try {
        fn(payload, this);
      } catch (e) {
        // A failing callback must not break the protocol handling.
        setTimeout(() => { throw e; });
      }
    }
  }

  /** Ends every iterator: normally, or by throwing `error`. */
  _finishIterators(error) {
    for (const sink of this._iterators) sink.finish(error);
    this._iterators.clear();
  }
}
