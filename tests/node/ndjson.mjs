// NDJSON framing for vscode-jsonrpc: one compact JSON object per line, as the sidecar speaks it.
//
// vscode-jsonrpc's own stream reader/writer use LSP's Content-Length headers; these replace them,
// the way the Electron main process wires its connection to the sidecar's stdio.
import { AbstractMessageReader, AbstractMessageWriter, Disposable } from "vscode-jsonrpc/node.js";

const NEWLINE = 0x0a;
const CR = 0x0d;

/**
 * Reads messages from a Readable (the child's stdout): splits on "\n" at the byte level (so a
 * UTF-8 character split across chunks survives), drops a trailing "\r", skips blank lines, and
 * copes with chunks that end mid-line or hold many lines. A line that is not JSON is reported on
 * onError and skipped; the stream's end/close fires onClose.
 */
export class NdjsonMessageReader extends AbstractMessageReader {
  /** @param {import("node:stream").Readable} readable */
  constructor(readable) {
    super();
    this.readable = readable;
    /** @type {Buffer[]} bytes of the line not yet terminated */
    this.pending = [];
    this.callback = undefined;
    this.closed = false;
  }

  listen(callback) {
    this.callback = callback;
    const onData = (chunk) => this.onData(typeof chunk === "string" ? Buffer.from(chunk, "utf8") : chunk);
    const onError = (error) => this.fireError(error);
    const onClose = () => this.onEnd();
    this.readable.on("data", onData);
    this.readable.on("error", onError);
    this.readable.on("end", onClose);
    this.readable.on("close", onClose);
    return Disposable.create(() => {
      this.callback = undefined;
      this.readable.off("data", onData);
      this.readable.off("error", onError);
      this.readable.off("end", onClose);
      this.readable.off("close", onClose);
    });
  }

  /** @param {Buffer} chunk */
  onData(chunk) {
    let start = 0;
    for (let nl = chunk.indexOf(NEWLINE, start); nl !== -1; nl = chunk.indexOf(NEWLINE, start)) {
      let line = chunk.subarray(start, nl);
      if (this.pending.length > 0) {
        this.pending.push(line);
        line = Buffer.concat(this.pending);
        this.pending = [];
      }
      start = nl + 1;
      this.emitLine(line);
    }
    if (start < chunk.length) {
      // Copy: the stream may reuse the chunk's memory.
      this.pending.push(Buffer.from(chunk.subarray(start)));
    }
  }

  /** @param {Buffer} line */
  emitLine(line) {
    let end = line.length;
    if (end > 0 && line[end - 1] === CR) end -= 1;
    const text = line.toString("utf8", 0, end);
    if (text.trim() === "") return;
    let message;
    try {
      message = JSON.parse(text);
    } catch (error) {
      this.fireError(new Error(`NDJSON: line is not JSON (${error.message}): ${text.slice(0, 200)}`));
      return;
    }
    if (this.callback) this.callback(message);
  }

  onEnd() {
    if (this.closed) return;
    this.closed = true;
    if (this.pending.length > 0) {
      // A last line without its "\n": the peer died mid-write, or ended without a newline.
      const rest = Buffer.concat(this.pending);
      this.pending = [];
      this.emitLine(rest);
    }
    this.fireClose();
  }
}

/**
 * Writes each message as JSON.stringify(msg) + "\n" to a Writable (the child's stdin). Write
 * errors (EPIPE once the child is gone) are reported on onError and reject the write's promise.
 */
export class NdjsonMessageWriter extends AbstractMessageWriter {
  /** @param {import("node:stream").Writable} writable */
  constructor(writable) {
    super();
    this.writable = writable;
    this.errorCount = 0;
    // An unhandled 'error' on the child's stdin would crash the process; report it instead.
    writable.on("error", (error) => this.fireError(error));
    writable.on("close", () => this.fireClose());
  }

  write(msg) {
    return new Promise((resolve, reject) => {
      const line = JSON.stringify(msg) + "\n";
      try {
        this.writable.write(line, "utf8", (error) => {
          if (error) {
            this.errorCount += 1;
            this.fireError(error, msg, this.errorCount);
            reject(error);
          } else {
            this.errorCount = 0;
            resolve();
          }
        });
      } catch (error) {
        this.errorCount += 1;
        this.fireError(error, msg, this.errorCount);
        reject(error);
      }
    });
  }

  end() {
    this.writable.end();
  }
}
