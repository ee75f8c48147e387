// HTTP/1.1 over a raw socket, for what fetch cannot do: hang up mid-request with a reset
// (SO_LINGER 0, as a client that crashes or is killed does), and stream a body without a
// length while watching for an early answer.
import { connect, type Socket } from "node:net";

function open(url: string): Promise<Socket> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) }, () =>
      resolve(socket),
    );
    socket.once("error", reject);
  });
}

/**
 * Sends `method path` with an empty body, then resets the connection after `after`
 * milliseconds, or once `after()` resolves, whether or not an answer came. Resolves once the
 * socket is gone.
 */
export async function sendAndReset(
  url: string,
  method: string,
  path: string,
  after: number | (() => Promise<unknown>),
): Promise<void> {
  const socket = await open(url);
  socket.on("error", () => {});
  socket.write(
    `${method} ${path} HTTP/1.1\r\nHost: edgecount.test\r\nContent-Length: 0\r\n\r\n`,
  );
  await (typeof after === "number"
    ? new Promise((resolve) => setTimeout(resolve, after))
    : after());
  socket.resetAndDestroy();
}

/** What {@link streamChunked} saw. */
export interface StreamedUpload {
  /** The status line's code, 0 if the server closed without one, -1 if it did neither in 30 s. */
  status: number;
  /** Body bytes written to the socket before the answer arrived (or the upload ended). */
  bytesSentBeforeAnswer: number;
}

/**
 * Streams `totalBytes` of body with `Transfer-Encoding: chunked` (no length, so the server
 * cannot refuse it up front), pacing on the socket's back-pressure, and stops sending as soon
 * as an answer starts to arrive.
 */
export async function streamChunked(
  url: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  totalBytes: number,
  chunkBytes = 64 * 1024,
): Promise<StreamedUpload> {
  const socket = await open(url);
  let answer = "";
  let sent = 0;
  let answered = false;
  let sentBeforeAnswer = 0;
  const done = new Promise<void>((resolve) => {
    socket.on("data", (data) => {
      if (!answered) sentBeforeAnswer = sent;
      answered = true;
      answer += data.toString("latin1");
      if (answer.includes("\r\n\r\n")) resolve();
    });
    socket.on("close", () => resolve());
    socket.on("error", () => resolve());
  });
  const head = Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join("");
  socket.write(
    `${method} ${path} HTTP/1.1\r\nHost: edgecount.test\r\n${head}Transfer-Encoding: chunked\r\n\r\n`,
  );
  // A server that neither reads nor answers must fail the test, not hang it.
  let timedOut = false;
  const deadline = setTimeout(() => {
    timedOut = true;
    socket.destroy();
  }, 30_000);
  const chunk = Buffer.alloc(chunkBytes, "7");
  while (sent < totalBytes && !answered && !socket.destroyed) {
    socket.write(`${chunk.length.toString(16)}\r\n`);
    socket.write(chunk);
    socket.write("\r\n");
    sent += chunk.length;
    // Let an early answer be read before writing more: a write to a socket the server has
    // already closed destroys it, with the unread answer.
    await new Promise((resolve) => setImmediate(resolve));
    // Wait for the socket to drain (checked after the yield: it may have drained during it).
    if (socket.writableNeedDrain && !answered && !socket.destroyed)
      await new Promise((resolve) => {
        socket.once("drain", resolve);
        socket.once("close", resolve);
        socket.once("data", resolve);
      });
  }
  if (!answered && !socket.destroyed) socket.write("0\r\n\r\n");
  await done;
  clearTimeout(deadline);
  socket.destroy();
  const status = timedOut
    ? -1
    : Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? 0);
  return {
    status,
    bytesSentBeforeAnswer: answered ? sentBeforeAnswer : sent,
  };
}

/**
 * Sends `head` (request line and headers, written as given, so a header may be sent with an
 * empty value, which fetch leaves out) with no body on a connection of its own, and resolves
 * to the answer's status code.
 */
export async function sendHead(url: string, head: string): Promise<number> {
  const socket = await open(url);
  let answer = "";
  socket.setEncoding("latin1");
  socket.on("data", (data: string) => (answer += data));
  socket.write(`${head}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
  await new Promise((resolve) => socket.once("close", resolve));
  return Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? 0);
}

/**
 * Sends a request head and the first `partial` bytes of its body, then nothing, keeping the
 * connection open. Resolves to the answer's status line code and body, or status -1 if none
 * came within `waitMs`.
 */
export async function sendPartialBody(
  url: string,
  head: string,
  partial: string,
  waitMs: number,
): Promise<{ status: number; body: string }> {
  const socket = await open(url);
  let answer = "";
  const answered = new Promise<void>((resolve) => {
    socket.on("data", (data) => {
      answer += data.toString("latin1");
      if (/\r\n\r\n[\s\S]*\}/.test(answer)) resolve();
    });
    socket.on("close", () => resolve());
    socket.on("error", () => resolve());
  });
  socket.write(head + partial);
  const timer = new Promise<void>((resolve) => setTimeout(resolve, waitMs));
  await Promise.race([answered, timer]);
  socket.destroy();
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? -1);
  return { status, body: answer.split("\r\n\r\n").slice(1).join("\r\n\r\n") };
}
