/**
 * The `data:` events of a server-sent event stream, read as its bytes pass by: how a recording
 * `fetch` sees the chunks of a streamed chat completion without holding the caller's stream back.
 */

/**
 * Reads `data:` events of a server-sent event stream as its bytes pass by, calling `onEvent` with
 * each event's data text (`[DONE]` left out).
 */
export class EventStreamReader {
  readonly #decoder = new TextDecoder();
  #buffer = '';
  #data: string[] = [];

  /** @param onEvent Called with each event's data text. */
  constructor(private readonly onEvent: (data: string) => void) {}

  /** Adds the next bytes of the stream. */
  push(bytes: Uint8Array): void {
    this.#buffer += this.#decoder.decode(bytes, { stream: true });
    this.#drain();
  }

  /** The stream ended: the last event is handed over even without its blank line. */
  end(): void {
    this.#buffer += this.#decoder.decode();
    this.#drain();
    if (this.#buffer !== '') this.#line(this.#buffer);
    this.#buffer = '';
    this.#line('');
  }

  #drain(): void {
    for (;;) {
      const match = /\r\n|\r|\n/.exec(this.#buffer);
      // A lone '\r' at the end may be the start of '\r\n': wait for the next bytes.
      if (match === null || (match[0] === '\r' && match.index === this.#buffer.length - 1)) return;
      const line = this.#buffer.slice(0, match.index);
      this.#buffer = this.#buffer.slice(match.index + match[0].length);
      this.#line(line);
    }
  }

  #line(line: string): void {
    if (line === '') {
      if (this.#data.length > 0) {
        const data = this.#data.join('\n');
        this.#data = [];
        if (data.trim() !== '[DONE]') this.onEvent(data);
      }
      return;
    }
    if (line.startsWith('data:')) this.#data.push(line.slice(line.startsWith('data: ') ? 6 : 5));
  }
}
